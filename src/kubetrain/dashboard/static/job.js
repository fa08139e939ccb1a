// One job: its state and diagnosis, progress and metric curves, conditions, replicas, events, logs, manifest
// and the describe text; suspend, resume and delete. Live from the job's own stream. A TrainJob shows its
// runtime and its JobSet's jobs too.
import * as api from "./api.js";
import { lineChart } from "./chart.js";
import { age, clock, eta, h, stateClass } from "./format.js";

const LOG_LINES_KEPT = 5000;

export function showJob(main, id) {
  const path = api.jobPath(id);
  let detail = null;
  let history = { points: [] };
  let historyError = "";
  let lastSignature = "";
  let logs = null; // the open log stream
  const closers = [];

  const header = h("div", { class: "job-header" });
  const diagnosis = h("section", { id: "diagnosis", "aria-live": "polite" });
  const firstFailure = h("section", { id: "first-failure", "aria-labelledby": "first-failure-title", hidden: true });
  const progress = h("section", { id: "progress", "aria-labelledby": "progress-title" });
  const conditions = h("section", { id: "conditions", "aria-labelledby": "conditions-title" });
  const jobs = h("section", { id: "jobset-jobs", "aria-labelledby": "jobset-jobs-title" });
  const replicas = h("section", { id: "replicas", "aria-labelledby": "replicas-title" });
  const tabs = tabbed([
    ["logs", "Logs", logsPanel()],
    ["events", "Events", h("div", { id: "events" })],
    ["manifest", "Manifest", h("pre", { id: "manifest", class: "code", tabindex: "0" })],
    ["describe", "Describe", h("pre", { id: "describe", class: "code", tabindex: "0" })],
  ]);
  const status = h("p", { id: "job-status", class: "muted", role: "status" });
  main.replaceChildren(
    h("p", {}, h("a", { href: "#/" }, "← All jobs")),
    header, status, diagnosis, firstFailure, progress, conditions, jobs, replicas, tabs.element,
  );

  // --- live state ----------------------------------------------------------------------------

  const jobStream = api.stream(`${path}/stream`, {
    job(data) {
      detail = data;
      addLivePoint(data.trainerStatus);
      renderHeader();
      renderProgress();
      renderConditions();
      renderJobs();
      renderManifest();
      // Pods, events and the diagnosis are read when the job's visible state moved, not on every report.
      const row = data.row;
      const signature = JSON.stringify([row.suspended, row.restarts, row.replicas, data.replicaTypes, data.jobs,
        data.conditions.map((c) => [c.type, c.status, c.reason])]);
      if (signature !== lastSignature) {
        lastSignature = signature;
        loadPods();
        loadEvents();
        loadDiagnosis();
        loadFailures();
        if (tabs.current() === "describe") loadDescribe();
      }
      main.dataset.ready = "true";
    },
    deleted() {
      status.textContent = "This job was deleted.";
      header.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      jobStream.close();
    },
    reset() { jobStream.close(); },
    error() {
      if (!detail) status.textContent = "Cannot read this job (it may not exist, or you may not see it).";
    },
  });
  closers.push(() => jobStream.close());

  // Every report before this page opened, read once; the job's stream adds each later one (a report that
  // arrived meanwhile is kept when it is newer than the history's last point).
  api.get(`${path}/history`).then((data) => {
    const last = data.points.length ? data.points[data.points.length - 1].t : -Infinity;
    history = { points: [...data.points, ...history.points.filter((p) => p.t > last)] };
    renderProgress();
  }).catch((error) => {
    historyError = `The progress history could not be read: ${error.message}`;
    renderProgress();
  });

  function addLivePoint(trainer) {
    if (!trainer || !trainer.lastUpdatedTime) return;
    const t = Date.parse(trainer.lastUpdatedTime) / 1000;
    const last = history.points[history.points.length - 1];
    if (last && last.t >= t) return;
    const m = {};
    for (const metric of trainer.metrics || []) {
      const value = Number(metric.value);
      if (Number.isFinite(value)) m[metric.name] = value;
    }
    const point = { t, m };
    if (trainer.progressPercentage != null) point.p = trainer.progressPercentage;
    history.points.push(point);
  }

  // --- rendering -----------------------------------------------------------------------------

  function renderHeader() {
    const row = detail.row;
    const suspend = h("button", { type: "button", id: "suspend", onclick: () => act("suspend") }, "Suspend");
    const resume = h("button", { type: "button", id: "resume", onclick: () => act("resume") }, "Resume");
    const remove = h("button", { type: "button", id: "delete", class: "danger", onclick: () => act("delete") }, "Delete");
    suspend.hidden = row.suspended || row.finished;
    resume.hidden = !row.suspended;
    const runtime = detail.runtime ? ` · runtime ${detail.runtime}` : "";
    header.replaceChildren(
      h("h1", {}, row.name, " ", h("span", { class: stateClass(row.state), id: "job-state" }, row.state)),
      h("p", { class: "muted", id: "job-summary" },
        `${row.kind}${runtime} · namespace ${row.namespace} · ${row.source} · created ${age(row.created)} ago`),
      h("div", { class: "actions" }, suspend, resume, remove),
    );
    if (row.message) header.append(h("p", { class: "message" }, row.message));
  }

  function renderProgress() {
    if (!detail) return;
    const row = detail.row;
    const points = history.points;
    const start = points.length ? points[0].t : 0;
    const names = [...new Set(points.flatMap((p) => Object.keys(p.m || {})))];
    const charts = names.map((name) =>
      lineChart(name, points.filter((p) => p.m && p.m[name] != null).map((p) => [p.t - start, p.m[name]])));
    const progressPoints = points.filter((p) => p.p != null).map((p) => [p.t - start, p.p]);
    if (progressPoints.length || row.progress != null) charts.unshift(lineChart("progress %", progressPoints, { min: 0, max: 100 }));
    progress.replaceChildren(
      h("h2", { id: "progress-title" }, "Progress"),
      row.progress == null
        ? h("p", { class: "muted" }, "The training has not reported progress.")
        : h("div", { class: "progress-line" },
          h("div", { class: "bar wide", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100",
            "aria-valuenow": String(row.progress), "aria-label": "progress" },
          h("div", { class: "fill", style: { width: `${row.progress}%` } })),
          h("span", {}, `${row.progress}%`), row.finished ? "" : h("span", { class: "muted" }, ` ETA ${eta(row)}`)),
      row.metrics.length
        ? h("p", { id: "metrics" }, row.metrics.map((m) => h("span", { class: "metric" }, `${m.name} = ${m.value}`)))
        : "",
      h("div", { class: "charts", id: "charts" }, charts),
      historyError ? h("p", { class: "error", id: "history-error" }, historyError) : "",
    );
  }

  function renderConditions() {
    const items = detail.conditions.map((c) =>
      h("li", { class: c.status === "True" ? "current" : "past" },
        h("time", { datetime: c.lastTransitionTime || "" }, clock(c.lastTransitionTime)),
        h("span", { class: stateClass(c.type) }, c.type),
        h("span", { class: "muted" }, c.status === "True" ? "" : " (no longer)"),
        c.reason ? h("strong", {}, ` ${c.reason}`) : "",
        c.message ? h("span", { class: "message" }, ` ${c.message}`) : ""));
    conditions.replaceChildren(
      h("h2", { id: "conditions-title" }, "Conditions"),
      items.length ? h("ol", { class: "timeline" }, items) : h("p", { class: "muted" }, "None yet."),
    );
  }

  // A TrainJob's JobSet: each replicated job, counted in Jobs (jobsStatus), as `kubetrain describe` shows it.
  function renderJobs() {
    jobs.hidden = !detail.runtime;
    if (!detail.runtime) return;
    jobs.replaceChildren(
      h("h2", { id: "jobset-jobs-title" }, "Jobs"),
      h("p", { class: "muted small" }, `Training nodes: ${detail.row.replicas || "-"}`),
      table(["Replicated job", "Ready", "Active", "Succeeded", "Failed", "Suspended"],
        detail.jobs.map((j) => [j.name, String(j.ready), String(j.active), String(j.succeeded), String(j.failed),
          String(j.suspended)]),
        "jobset-jobs-table", "No JobSet jobs yet."),
    );
  }

  function renderManifest() {
    document.getElementById("manifest").textContent = detail.manifestYaml;
  }

  async function loadPods() {
    try {
      const pods = await api.get(`${path}/pods`);
      replicas.replaceChildren(
        h("h2", { id: "replicas-title" }, "Replicas"),
        table(["Replica", "Pod", "Phase", "Node", "Restarts", "Ready", "Waiting", "Exit codes"],
          pods.map((p) => [p.replica, p.name, h("span", { class: stateClass(p.phase) }, p.phase), p.node || "-",
            String(p.restarts), p.ready ? "yes" : "no", p.waiting || "-", p.exitCodes.join(", ") || "-"]),
          "pods", "No pods."),
      );
      updateReplicaChoices(pods);
    } catch (error) {
      replicas.replaceChildren(h("h2", { id: "replicas-title" }, "Replicas"), h("p", { class: "error" }, error.message));
    }
  }

  async function loadEvents() {
    const box = document.getElementById("events");
    try {
      const events = await api.get(`${path}/events`);
      box.replaceChildren(table(["Type", "Reason", "Age", "Object", "Message"],
        events.map((e) => [e.type, e.reason, age(e.lastSeen), e.object, e.message]), "events-table", "No events."));
    } catch (error) {
      box.replaceChildren(h("p", { class: "error" }, error.message));
    }
  }

  async function loadDiagnosis() {
    try {
      const findings = await api.get(`${path}/diagnosis`);
      diagnosis.replaceChildren(...findings.map((f) =>
        h("div", { class: "finding", role: "alert" }, h("strong", {}, f.reason), " ", f.message,
          f.replicas.length ? h("span", { class: "muted" }, ` (${f.replicas.join(", ")})`) : "")));
    } catch (error) {
      diagnosis.replaceChildren(h("p", { class: "error" }, `The diagnosis could not be read: ${error.message}`));
    }
  }

  // Which replica failed first, kept on the job: still shown once its pods are gone.
  async function loadFailures() {
    let kept;
    try {
      kept = await api.get(`${path}/failures`);
    } catch (error) {
      firstFailure.hidden = false;
      firstFailure.replaceChildren(h("p", { class: "error" }, `The first failure could not be read: ${error.message}`));
      return;
    }
    firstFailure.hidden = !kept;
    if (!kept) return;
    const first = kept.first;
    const where = `pod ${first.pod}` + (first.node ? ` on node ${first.node}` : "");
    const children = [
      h("h2", { id: "first-failure-title" }, "First failure"),
      h("p", {}, h("strong", {}, first.replica), ` ${first.how} (${where}), `,
        h("time", { datetime: first.at, title: first.at }, `${age(first.at)} ago`)),
      first.lines
        ? h("pre", { class: "code failure-lines", tabindex: "0", "aria-label": `last lines of ${first.replica}` }, first.lines)
        : h("p", { class: "muted" }, "No last lines were kept."),
    ];
    if (kept.latest.length || kept.others) {
      children.push(table(["Replica", "Node", "Age", "How"],
        kept.latest.map((f) => [f.replica, f.node || "", age(f.at), f.how]), "failures-table", ""));
      if (kept.others) children.push(h("p", { class: "muted" }, `and ${kept.others} more replica(s) failed, not kept`));
    }
    firstFailure.replaceChildren(...children);
  }

  async function loadDescribe() {
    const box = document.getElementById("describe");
    try {
      box.textContent = await api.get(`${path}/describe`, "text");
    } catch (error) {
      box.textContent = error.message;
    }
  }

  // --- logs ----------------------------------------------------------------------------------

  function logsPanel() {
    const replica = h("select", { id: "log-replica", onchange: () => openLogs() });
    const follow = h("input", { type: "checkbox", id: "log-follow", checked: true, onchange: () => openLogs() });
    const search = h("input", { type: "search", id: "log-search", placeholder: "search", oninput: () => filterLogs() });
    const output = h("pre", { id: "log-output", class: "code logs", tabindex: "0", "aria-live": "off" });
    const note = h("p", { id: "log-note", class: "muted small" });
    return h("div", {},
      h("div", { class: "log-controls" },
        h("label", {}, h("span", { class: "label" }, "Replica"), replica),
        h("label", {}, follow, " Follow"),
        h("label", {}, h("span", { class: "label" }, "Search"), search)),
      output, note);
  }

  function updateReplicaChoices(pods) {
    const select = document.getElementById("log-replica");
    const wanted = pods.map((p) => p.replica);
    const have = [...select.options].map((o) => o.value);
    if (wanted.join() === have.join()) return;
    const chosen = select.value;
    select.replaceChildren(...wanted.map((r) => h("option", { value: r }, r)));
    if (wanted.includes(chosen)) select.value = chosen;
    if (!logs || !wanted.includes(chosen)) openLogs();
  }

  function openLogs() {
    if (logs) logs.close();
    const replica = document.getElementById("log-replica").value;
    const output = document.getElementById("log-output");
    const note = document.getElementById("log-note");
    output.replaceChildren();
    if (!replica) return;
    const follow = document.getElementById("log-follow").checked;
    note.textContent = follow ? "Following…" : "";
    logs = api.stream(`${path}/logs?replica=${encodeURIComponent(replica)}&follow=${follow ? 1 : 0}`, {
      lines(data) {
        const query = document.getElementById("log-search").value.toLowerCase();
        for (const line of data.lines) {
          const el = h("span", { class: "line" }, line, "\n");
          if (query && !line.toLowerCase().includes(query)) el.hidden = true;
          output.append(el);
        }
        while (output.childElementCount > LOG_LINES_KEPT) output.firstElementChild.remove();
        if (document.getElementById("log-follow").checked) output.scrollTop = output.scrollHeight;
      },
      end(data) {
        note.textContent = data.error ? `Logs: ${data.reason}` : "End of the log.";
        logs.close();
      },
      error() {
        if (logs && logs.readyState === EventSource.CLOSED) note.textContent = "The log stream closed.";
      },
    });
  }
  closers.push(() => logs && logs.close());

  function filterLogs() {
    const query = document.getElementById("log-search").value.toLowerCase();
    for (const line of document.getElementById("log-output").children) {
      line.hidden = Boolean(query) && !line.textContent.toLowerCase().includes(query);
    }
  }

  tabs.onShow("describe", loadDescribe);

  // --- actions -------------------------------------------------------------------------------

  async function act(action) {
    const row = detail.row;
    const texts = {
      suspend: `Suspend ${row.kind} ${row.name}? Its pods are deleted; resuming starts them again from scratch.`,
      resume: `Resume ${row.kind} ${row.name}? Its pods are created again.`,
      delete: `Delete ${row.kind} ${row.name}? Its pods and services go with it. This cannot be undone.`,
    };
    if (!(await confirmed(texts[action], action === "delete" ? "Delete" : action[0].toUpperCase() + action.slice(1)))) return;
    status.textContent = `${action}…`;
    try {
      if (action === "delete") await api.send("DELETE", path);
      else await api.send("POST", `${path}/${action}`);
      status.textContent = action === "delete" ? "Deleting…" : `${action[0].toUpperCase()}${action.slice(1)} requested.`;
    } catch (error) {
      status.textContent = `${action} failed: ${error.message}`;
    }
  }

  return () => closers.forEach((close) => close());
}

function confirmed(text, verb) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = verb;
  dialog.returnValue = "cancel";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

function table(columns, rows, id, empty) {
  if (!rows.length) return h("p", { class: "muted", id }, empty);
  return h("table", { id },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))));
}

// Tabs as WAI-ARIA describes them: arrow keys move between tabs, each tab shows its panel.
function tabbed(entries) {
  const hooks = {};
  let current = entries[0][0];
  const list = h("div", { role: "tablist", class: "tabs", "aria-label": "Job details" });
  const panels = [];
  const buttons = entries.map(([key, title, panel], i) => {
    const button = h("button", { type: "button", role: "tab", id: `tab-${key}`, "aria-controls": `panel-${key}`,
      "aria-selected": i === 0 ? "true" : "false", tabindex: i === 0 ? "0" : "-1", onclick: () => show(key) }, title);
    panels.push(h("div", { role: "tabpanel", id: `panel-${key}`, "aria-labelledby": `tab-${key}`, hidden: i !== 0 }, panel));
    return button;
  });
  list.append(...buttons);
  list.addEventListener("keydown", (event) => {
    const index = entries.findIndex(([key]) => key === current);
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    const next = entries[(index + step + entries.length) % entries.length][0];
    show(next);
    document.getElementById(`tab-${next}`).focus();
    event.preventDefault();
  });
  function show(key) {
    current = key;
    entries.forEach(([k], i) => {
      buttons[i].setAttribute("aria-selected", k === key ? "true" : "false");
      buttons[i].tabIndex = k === key ? 0 : -1;
      panels[i].hidden = k !== key;
    });
    if (hooks[key]) hooks[key]();
  }
  return {
    element: h("section", { class: "details" }, list, panels),
    current: () => current,
    onShow: (key, hook) => { hooks[key] = hook; },
  };
}
