// The jobs list: a snapshot, then changes as they happen (one stream per page, fed by the server's watches).
import * as api from "./api.js";
import { age, eta, h, stateClass } from "./format.js";
import { showSources } from "./app.js";

const COLUMNS = ["Name", "Namespace", "Kind", "Source", "State", "Progress", "Replicas", "Restarts", "Age"];

export function showList(main) {
  const jobs = new Map(); // id -> row data
  const rows = new Map(); // id -> <tr>
  const filters = { text: "", kind: "", namespace: "", state: "", source: "" };
  const count = h("p", { class: "muted", id: "job-count", "aria-live": "polite" });
  const body = h("tbody");
  const selects = {};

  const select = (key, label, plural) => {
    const el = h("select", { id: `filter-${key}`, onchange: () => { filters[key] = el.value; applyFilters(); } },
      h("option", { value: "" }, `All ${plural}`));
    selects[key] = el;
    return h("label", {}, h("span", { class: "label" }, label), el);
  };
  const search = h("input", {
    type: "search", id: "filter-text", placeholder: "name or namespace", autocomplete: "off",
    oninput: () => { filters.text = search.value.trim().toLowerCase(); applyFilters(); },
  });
  main.replaceChildren(
    h("h1", {}, "Jobs"),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      h("label", {}, h("span", { class: "label" }, "Filter"), search),
      select("kind", "Kind", "kinds"), select("namespace", "Namespace", "namespaces"),
      select("state", "State", "states"), select("source", "Source", "sources")),
    count,
    h("table", { class: "jobs", id: "jobs" },
      h("thead", {}, h("tr", {}, COLUMNS.map((c) => h("th", { scope: "col" }, c)))),
      body),
  );

  function visible(row) {
    if (filters.text && !`${row.name} ${row.namespace}`.toLowerCase().includes(filters.text)) return false;
    for (const key of ["kind", "namespace", "state", "source"]) {
      if (filters[key] && row[key] !== filters[key]) return false;
    }
    return true;
  }

  function applyFilters() {
    let shown = 0;
    for (const [id, tr] of rows) {
      const show = visible(jobs.get(id));
      tr.hidden = !show;
      if (show) shown += 1;
    }
    count.textContent = jobs.size === 0 ? "No jobs yet." : `${shown} of ${jobs.size} jobs`;
  }

  function refreshOptions() {
    for (const key of ["kind", "namespace", "state", "source"]) {
      const values = [...new Set([...jobs.values()].map((r) => r[key]))].sort();
      const el = selects[key];
      const have = [...el.options].slice(1).map((o) => o.value);
      if (have.join("\n") === values.join("\n")) continue;
      el.replaceChildren(el.options[0], ...values.map((v) => h("option", { value: v }, v)));
      el.value = values.includes(filters[key]) ? filters[key] : "";
    }
  }

  function progressCell(row) {
    if (row.progress == null) return h("td", { class: "progress" }, h("span", { class: "muted" }, "-"));
    return h("td", { class: "progress" },
      h("div", { class: "bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100",
        "aria-valuenow": String(row.progress), "aria-label": `${row.name} progress` },
        h("div", { class: "fill", style: { width: `${row.progress}%` } })),
      h("span", { class: "pct" }, `${row.progress}%`),
      h("span", { class: "eta", "data-eta": "" }, row.finished ? "" : `ETA ${eta(row)}`));
  }

  function render(row) {
    const tr = h("tr", { "data-id": row.id, "data-state": row.state },
      h("th", { scope: "row" }, h("a", { href: `#/jobs/${row.id}` }, row.name)),
      h("td", {}, row.namespace),
      h("td", {}, row.kind),
      h("td", {}, row.source),
      h("td", {}, h("span", { class: stateClass(row.state), title: row.message || "" }, row.state)),
      progressCell(row),
      h("td", {}, row.replicas),
      h("td", { class: "num" }, row.restarts == null ? "-" : String(row.restarts)),
      h("td", { class: "age", "data-created": row.created || "" }, age(row.created)));
    tr.hidden = !visible(row);
    return tr;
  }

  const order = (a, b) => (b.created || "").localeCompare(a.created || "") || a.name.localeCompare(b.name);

  function upsert(row) {
    const previous = rows.get(row.id);
    jobs.set(row.id, row);
    const tr = render(row);
    if (previous) {
      previous.replaceWith(tr);
    } else {
      // newest first: before the first row that sorts after it
      let before = null;
      for (const other of body.children) {
        if (order(row, jobs.get(other.dataset.id)) < 0) { before = other; break; }
      }
      body.insertBefore(tr, before);
    }
    rows.set(row.id, tr);
  }

  function remove(id) {
    rows.get(id)?.remove();
    rows.delete(id);
    jobs.delete(id);
  }

  function snapshot(data) {
    jobs.clear();
    rows.clear();
    const sorted = [...data.jobs].sort(order);
    const fragment = document.createDocumentFragment();
    for (const row of sorted) {
      jobs.set(row.id, row);
      const tr = render(row);
      rows.set(row.id, tr);
      fragment.append(tr);
    }
    body.replaceChildren(fragment);
    refreshOptions();
    applyFilters();
    showSources(data.sources);
    main.dataset.ready = "true";
  }

  const events = api.stream("api/stream", {
    snapshot,
    changes(data) {
      for (const row of data.upserts) upsert(row);
      for (const id of data.deletes) remove(id);
      if (data.sources) showSources(data.sources);
      refreshOptions();
      applyFilters();
    },
    reset() { events.close(); setTimeout(() => main.isConnected && showList(main), 500); },
  });

  const ticker = setInterval(() => {
    for (const [id, tr] of rows) {
      if (tr.hidden) continue;
      const row = jobs.get(id);
      tr.querySelector(".age").textContent = age(row.created);
      const etaCell = tr.querySelector(".eta");
      if (etaCell && !row.finished) etaCell.textContent = `ETA ${eta(row)}`;
    }
  }, 1000);

  return () => { events.close(); clearInterval(ticker); };
}
