// The page's router: #/ the jobs list, #/jobs/<id> one job, #/new the new-job form.
import * as api from "./api.js";
import { h } from "./format.js";
import { showList } from "./list.js";
import { showJob } from "./job.js";
import { showNew } from "./new.js";

const main = document.getElementById("main");
let current = null; // the shown view's cleanup (closes its streams)
let info = { sources: [] };

export function showSources(sources) {
  info.sources = sources;
  const box = document.getElementById("sources");
  box.replaceChildren(
    ...sources
      .filter((s) => s.message || !s.reachable)
      .map((s) => h("p", { class: s.reachable ? "notice" : "notice warn" }, h("strong", {}, `${s.name}: `), s.message)),
  );
}

export function sourcesInfo() {
  return info;
}

function route() {
  if (current) current();
  current = null;
  const hash = decodeURIComponent(location.hash.replace(/^#/, "")) || "/";
  document.getElementById("nav-jobs").toggleAttribute("aria-current", hash === "/");
  document.getElementById("nav-new").toggleAttribute("aria-current", hash === "/new");
  if (hash.startsWith("/jobs/")) current = showJob(main, hash.slice("/jobs/".length));
  else if (hash === "/new") current = showNew(main);
  else current = showList(main);
}

async function start() {
  try {
    info = await api.session();
    if (info.user) document.getElementById("user").textContent = info.user;
    showSources(info.sources);
  } catch (error) {
    main.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
    return;
  }
  window.addEventListener("hashchange", route);
  route();
}

start();
