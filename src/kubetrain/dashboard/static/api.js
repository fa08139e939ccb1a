// The dashboard's API, always relative to the page: it works at / and behind a gateway's prefix alike.
let csrf = "";

export async function session() {
  const response = await fetch("api/session", { credentials: "same-origin" });
  csrf = response.headers.get("X-CSRF-Token") || "";
  if (!response.ok) throw await problem(response);
  return response.json();
}

async function problem(response) {
  let message = `${response.status} ${response.statusText}`;
  let errors = [];
  try {
    const body = await response.json();
    message = body.error || message;
    errors = body.errors || [];
  } catch (_) { /* not JSON */ }
  const error = new Error(message);
  error.status = response.status;
  error.errors = errors;
  return error;
}

export async function get(path, as = "json") {
  const response = await fetch(path, { credentials: "same-origin" });
  if (!response.ok) throw await problem(response);
  return as === "text" ? response.text() : response.json();
}

export async function send(method, path, body) {
  const response = await fetch(path, {
    method,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await problem(response);
  return response.json();
}

export function jobPath(id) {
  return `api/jobs/${id.split("/").map(encodeURIComponent).join("/")}`;
}

// A Server-Sent Events stream; `handlers` maps event names to functions of the parsed data.
export function stream(path, handlers) {
  const source = new EventSource(path);
  for (const [name, handle] of Object.entries(handlers)) {
    if (name === "error" || name === "open") source.addEventListener(name, handle);
    else source.addEventListener(name, (event) => handle(JSON.parse(event.data)));
  }
  return source;
}
