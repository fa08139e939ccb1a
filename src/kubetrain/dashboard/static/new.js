// A new job from YAML: first what `kubetrain plan` makes of it (each pod's command and env), then create it.
import * as api from "./api.js";
import { h } from "./format.js";
import { sourcesInfo } from "./app.js";

const EXAMPLE = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: my-job
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: localhost/kubetrain/pytorch:2.13.0
              command: [python, train.py]
`;

export function showNew(main) {
  const sources = sourcesInfo().sources;
  const source = h("select", { id: "new-source", onchange: () => invalidate() },
    sources.map((s) => h("option", { value: s.name }, s.name === "local" ? "local runs (this machine)" : s.name)));
  const namespace = h("input", { id: "new-namespace", placeholder: "from the manifest, else the default",
    autocomplete: "off", oninput: () => invalidate() });
  const text = h("textarea", { id: "new-yaml", rows: "18", spellcheck: "false", oninput: () => invalidate() }, EXAMPLE);
  const preview = h("section", { id: "plan", "aria-live": "polite" });
  const create = h("button", { type: "button", id: "create", disabled: true, onclick: () => submit() }, "Create");
  const planButton = h("button", { type: "button", id: "preview", class: "primary", onclick: () => plan() }, "Preview plan");
  const status = h("p", { id: "new-status", role: "status" });

  main.replaceChildren(
    h("h1", {}, "New job"),
    h("p", { class: "muted" }, "Paste a job manifest. Preview shows the pods (locally, the processes) it becomes and each one's environment, as kubetrain plan prints them; nothing is created until you press Create."),
    h("form", { class: "new-job", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "new-yaml" }, h("span", { class: "label" }, "Manifest (YAML)")), text,
      h("div", { class: "row" },
        h("label", {}, h("span", { class: "label" }, "Where"), source),
        h("label", {}, h("span", { class: "label" }, "Namespace"), namespace)),
      h("div", { class: "buttons" }, planButton, create)),
    status, preview,
  );

  function body() {
    return { source: source.value, yaml: text.value, namespace: namespace.value.trim() || undefined };
  }

  function invalidate() {
    create.disabled = true;
    preview.replaceChildren();
    status.textContent = "";
  }

  function showProblem(error) {
    status.replaceChildren(h("span", { class: "error" }, error.message),
      error.errors && error.errors.length ? h("ul", {}, error.errors.map((e) => h("li", {}, e))) : "");
    status.setAttribute("role", "alert");
  }

  async function plan() {
    invalidate();
    try {
      const planned = await api.send("POST", "api/plan", body());
      preview.replaceChildren(
        h("h2", {}, `${planned.kind} ${planned.name}: ${planned.pods.length} ${source.value === "local" ? "processes" : "pods"}`),
        ...planned.pods.map((pod) => h("details", { class: "pod", open: true },
          h("summary", {}, h("strong", {}, pod.name), pod.image ? ` · ${pod.image}` : ""),
          pod.command.length ? h("p", {}, h("code", {}, pod.command.join(" "))) : "",
          h("table", { class: "env" },
            h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Variable"), h("th", { scope: "col" }, "Value"))),
            h("tbody", {}, pod.env.map((e) => h("tr", {}, h("td", {}, h("code", {}, e.name)), h("td", {}, h("code", {}, e.value)))))))),
        planned.objects.length
          ? h("p", { class: "muted" }, "Also: ", planned.objects.map((o) => `${o.kind} ${o.name}`).join(", "))
          : "",
      );
      create.disabled = false;
      status.textContent = "Check the plan, then create the job.";
      status.setAttribute("role", "status");
      create.focus();
    } catch (error) {
      showProblem(error);
    }
  }

  async function submit() {
    create.disabled = true;
    status.textContent = "Creating…";
    try {
      const created = await api.send("POST", "api/jobs", body());
      location.hash = `#/jobs/${created.id}`;
    } catch (error) {
      showProblem(error);
    }
  }

  return () => {};
}
