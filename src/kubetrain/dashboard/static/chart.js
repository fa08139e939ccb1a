// Line charts drawn as SVG, no library: one curve over the job's life, its axes labelled at the ends.
import { duration } from "./format.js";

const NS = "http://www.w3.org/2000/svg";
const W = 320, H = 140, PAD = { left: 48, right: 8, top: 10, bottom: 22 };

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text != null) el.textContent = text;
  return el;
}

function label(value) {
  if (!Number.isFinite(value)) return "";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 0.01 || abs >= 1e5)) return value.toExponential(1);
  return String(Number(value.toPrecision(3)));
}

// points: [[seconds since start, value], ...]
export function lineChart(title, points, { min = null, max = null } = {}) {
  const figure = document.createElement("figure");
  figure.className = "chart";
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  const last = points.length ? points[points.length - 1][1] : null;
  if (last != null) caption.append(` · ${label(last)}`);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title} over time` });
  root.dataset.points = String(points.length);
  if (points.length === 0) {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no reports yet"));
  } else {
    const xs = points.map((p) => p[0]);
    const ys = points.map((p) => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
    let y0 = min ?? Math.min(...ys), y1 = max ?? Math.max(...ys);
    if (y1 === y0) { y0 -= 1; y1 += 1; }
    const sx = (x) => PAD.left + ((x - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
    const sy = (y) => H - PAD.bottom - ((y - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
    root.append(
      svg("line", { x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom, class: "axis" }),
      svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom, class: "axis" }),
      svg("text", { x: PAD.left - 4, y: PAD.top + 8, "text-anchor": "end", class: "tick" }, label(y1)),
      svg("text", { x: PAD.left - 4, y: H - PAD.bottom, "text-anchor": "end", class: "tick" }, label(y0)),
      svg("text", { x: PAD.left, y: H - 6, class: "tick" }, "0s"),
      svg("text", { x: W - PAD.right, y: H - 6, "text-anchor": "end", class: "tick" }, duration(x1 - x0)),
      svg("polyline", { points: points.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" "), class: "line" }),
    );
    if (points.length === 1) {
      root.append(svg("circle", { cx: sx(xs[0]), cy: sy(ys[0]), r: 3, class: "dot" }));
    }
  }
  figure.append(root, caption);
  return figure;
}
