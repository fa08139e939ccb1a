// Durations as `kubetrain get` prints them (sdk/tables.py duration): 45s, 12m, 5h, 3d.
export function duration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 2 * 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function age(iso, now = Date.now()) {
  if (!iso) return "-";
  return duration((now - Date.parse(iso)) / 1000);
}

// The training's estimate of the time left, counted down since it reported (sdk/tables.py eta).
export function eta(row, now = Date.now()) {
  if (row.remainingSeconds == null || !row.reportedAt || row.finished) return "-";
  const left = row.remainingSeconds - (now - Date.parse(row.reportedAt)) / 1000;
  return duration(Math.max(0, left));
}

export function clock(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleString();
}

// A tiny element builder: never innerHTML, so nothing a job says is ever read as markup.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "style") Object.assign(el.style, value); // CSSOM: the CSP allows no style attributes
    else if (key === "text") el.textContent = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function stateClass(state) {
  return `state state-${(state || "unknown").toLowerCase()}`;
}
