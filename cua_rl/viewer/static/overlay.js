// Action marks over a screenshot (loaded before app.js): click points, drag paths,
// and labels for typed text and keys. Everything is drawn in screen pixels.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function actionLabel(a) {
  switch (a.kind) {
    case "type": return `type ${JSON.stringify(a.text ?? "")}`;
    case "key": return `key ${(a.keys || []).join("+")}`;
    case "left_click_drag":
      return `drag ${a.start ? `(${a.start})` : "(cursor)"} → (${a.coordinate})`;
    case "scroll": case "hscroll": return `${a.kind} ${a.pixels}` + (a.coordinate ? ` at (${a.coordinate})` : "");
    case "wait": return `wait ${a.time ?? ""} s`;
    case "terminate": return `terminate ${a.status ?? ""}`;
    default: return a.coordinate ? `${a.kind} (${a.coordinate})` : a.kind;
  }
}

// Coordinates are screen pixels: the SVG's viewBox is the screen, so the browser scales
// every mark to the displayed image size, whatever size the image is shown at.
function drawActions(node, actions, w, h) {
  node.setAttribute("viewBox", `0 0 ${w} ${h}`);
  node.replaceChildren();
  const r = Math.max(w, h) / 90;
  const font = Math.max(w, h) / 60;
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
    markerWidth: "5", markerHeight: "5", orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#e53935" }));
  defs.append(marker);
  node.append(defs);
  let labelY = h - font * 0.8;
  const label = (text, x, y) => {
    const g = svg("g", { class: "mark-label" });
    const t = svg("text", { x, y, "font-size": font, "font-family": "sans-serif", fill: "#fff" });
    t.textContent = text;
    const bg = svg("rect", { x: x - font * 0.3, y: y - font, height: font * 1.3, rx: font * 0.2,
      width: font * 0.3 + text.length * font * 0.58, fill: "rgba(229,57,53,0.88)" });
    g.append(bg, t);
    node.append(g);
  };
  actions.forEach((a, i) => {
    const n = actions.length > 1 ? `${i + 1}. ` : "";
    const c = a.coordinate;
    if (a.kind === "left_click_drag" && c) {
      if (a.start) {
        node.append(svg("circle", { class: "mark-start", cx: a.start[0], cy: a.start[1], r,
          fill: "none", stroke: "#e53935", "stroke-width": r / 3 }));
        node.append(svg("line", { class: "mark-path", x1: a.start[0], y1: a.start[1], x2: c[0],
          y2: c[1], stroke: "#e53935", "stroke-width": r / 2.5, "marker-end": "url(#arrow)" }));
      }
      node.append(point(c, r, a.kind));
      label(n + actionLabel(a), c[0] + r * 1.5, c[1] - r);
    } else if (c) {
      node.append(point(c, r, a.kind));
      label(n + actionLabel(a), Math.min(c[0] + r * 1.5, w - font * 12), c[1] - r);
    } else if (a.kind === "type" || a.kind === "key" || a.kind === "wait" || a.kind === "terminate"
      || a.kind === "scroll" || a.kind === "hscroll") {
      label(n + actionLabel(a), font, labelY);
      labelY -= font * 1.6;
    }
  });
}

function point(c, r, kind) {
  const g = svg("g", { class: "mark-point", "data-kind": kind, "data-x": c[0], "data-y": c[1] });
  g.append(svg("circle", { cx: c[0], cy: c[1], r: r * 1.6, fill: "rgba(229,57,53,0.25)",
    stroke: "#e53935", "stroke-width": r / 4 }));
  g.append(svg("circle", { class: "mark-dot", cx: c[0], cy: c[1], r: r / 3, fill: "#e53935" }));
  return g;
}
