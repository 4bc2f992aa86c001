// Small SVG charts for the dashboard: line charts (loss, IoU per epoch), well-log tracks (curves against
// depth) and traced curves drawn over a scan. No library: everything is an <svg> built here.
"use strict";

const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const COLOURS = ["#2f5fd0", "#c0392b", "#1f8a4c", "#b7791f", "#7d3cc8", "#16868c"];
  // Digitised curves: the colours of the service's overlay PNG, in its order (veernet_core/digitise/export.py PALETTE,
  // colour-blind safe), so a curve is the same colour on the page and in the downloaded overlay.
  const CURVE_COLOURS = ["#e69f00", "#0072b2", "#cc79a7", "#009e73", "#d55e00", "#56b4e9"];

  function el(name, attrs = {}, parent = null) {
    const node = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    if (parent) parent.appendChild(node);
    return node;
  }

  function text(parent, x, y, content, attrs = {}) {
    const node = el("text", { x, y, ...attrs }, parent);
    node.textContent = content;
    return node;
  }

  // Round "nice" tick values covering [low, high].
  function ticks(low, high, count = 5) {
    if (!(high > low)) return [low];
    const raw = (high - low) / count;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(low / step) * step; v <= high + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function extent(values, pad = 0.05) {
    const finite = values.filter((v) => Number.isFinite(v));
    if (!finite.length) return [0, 1];
    let low = Math.min(...finite), high = Math.max(...finite);
    if (low === high) { low -= Math.abs(low) * 0.1 || 0.5; high += Math.abs(high) * 0.1 || 0.5; }
    const margin = (high - low) * pad;
    return [low - margin, high + margin];
  }

  function format(v) {
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(1) : String(+v.toPrecision(4));
  }

  // A line chart: series = [{name, points: [[x, y], ...]}]; points with a non-finite y break the line.
  function line(container, { series, xLabel = "", yLabel = "", yRange = null, id = "" }) {
    container.replaceChildren();
    const width = 560, height = 260, m = { left: 56, right: 16, top: 14, bottom: 40 };
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img" }, container);
    if (id) svg.id = id;
    const all = series.flatMap((s) => s.points);
    if (!all.length) {
      text(svg, width / 2, height / 2, "no epoch committed yet", { "text-anchor": "middle", class: "empty" });
      svg.dataset.points = "0";
      return svg;
    }
    const [x0, x1] = extent(all.map((p) => p[0]), 0.02);
    const [y0, y1] = yRange || extent(all.map((p) => p[1]));
    const sx = (x) => m.left + ((x - x0) / (x1 - x0)) * (width - m.left - m.right);
    const sy = (y) => height - m.bottom - ((y - y0) / (y1 - y0)) * (height - m.top - m.bottom);
    const axis = el("g", { class: "axis" }, svg);
    for (const t of ticks(y0, y1)) {
      el("line", { x1: m.left, x2: width - m.right, y1: sy(t), y2: sy(t), class: "grid" }, axis);
      text(axis, m.left - 6, sy(t) + 4, format(t), { "text-anchor": "end" });
    }
    for (const t of ticks(x0, x1).filter((t) => Number.isInteger(t) || x1 - x0 > 10)) {
      text(axis, sx(t), height - m.bottom + 16, format(t), { "text-anchor": "middle" });
    }
    el("line", { x1: m.left, x2: width - m.right, y1: height - m.bottom, y2: height - m.bottom }, axis);
    el("line", { x1: m.left, x2: m.left, y1: m.top, y2: height - m.bottom }, axis);
    text(axis, (m.left + width - m.right) / 2, height - 6, xLabel, { "text-anchor": "middle" });
    text(axis, 14, (m.top + height - m.bottom) / 2, yLabel,
         { "text-anchor": "middle", transform: `rotate(-90 14 ${(m.top + height - m.bottom) / 2})` });
    const legend = el("g", { class: "legend" }, svg);
    series.forEach((s, k) => {
      const colour = COLOURS[k % COLOURS.length];
      const runs = [[]];
      for (const [x, y] of s.points) {
        if (Number.isFinite(y)) runs[runs.length - 1].push(`${sx(x).toFixed(1)},${sy(y).toFixed(1)}`);
        else if (runs[runs.length - 1].length) runs.push([]);
      }
      for (const run of runs.filter((r) => r.length)) {
        el("polyline", { points: run.join(" "), class: "series", stroke: colour, "data-series": s.name }, svg);
      }
      for (const [x, y] of s.points.filter((p) => Number.isFinite(p[1]))) {
        const dot = el("circle", { cx: sx(x), cy: sy(y), r: 3, fill: colour }, svg);
        el("title", {}, dot).textContent = `${s.name} at ${format(x)}: ${format(y)}`;
      }
      el("rect", { x: m.left + 10, y: m.top + k * 16, width: 12, height: 3, fill: colour }, legend);
      text(legend, m.left + 27, m.top + k * 16 + 5, s.name);
    });
    svg.dataset.points = String(all.filter((p) => Number.isFinite(p[1])).length);
    return svg;
  }

  // Where a curve's value sits across the track: 0 at its `left` (the track's top row), 1 at `right`.
  function fraction(scale, value) {
    const f = (v) => (scale.log ? Math.log10(v) : v);
    return (f(value) - f(scale.left)) / (f(scale.right) - f(scale.left));
  }

  // Image column of a depth, from the calibration's two depth ticks ([column, depth] pairs).
  function columnOf(calibration, depth) {
    const [[ca, da], [cb, db]] = calibration.depth.ticks;
    return ca + ((depth - da) * (cb - ca)) / (db - da);
  }

  // A polyline's point runs, broken where a value is missing or a wrapped trace jumps across the track.
  function runsOf(points) {
    const runs = [[]];
    let last = null;
    for (const p of points) {
      if (!p || (last && Math.abs(p[1] - last[1]) > 0.5 * p[2])) runs.push([]);
      if (p) runs[runs.length - 1].push(`${p[0].toFixed(1)},${p[1].toFixed(1)}`);
      last = p;
    }
    return runs.filter((r) => r.length > 1);
  }

  // The traced curves of a segment result, in image pixels, on an <svg> laid over the scan.
  function traceOverlay(svg, result) {
    svg.replaceChildren();
    const { width, height } = result.image;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("preserveAspectRatio", "none");
    const cal = result.calibration;
    const span = cal.track_bottom - cal.track_top;
    let drawn = 0;
    result.curves.forEach((curve, k) => {
      const scale = cal.curves[k];
      const points = result.depth.values.map((depth, i) => {
        const v = curve.values[i];
        if (v === null || v === undefined) return null;
        let f = fraction(scale, v);
        if (curve.wrapped[i]) f -= Math.floor(f);  // drawn where the pen was: back inside the track
        return [columnOf(cal, depth), cal.track_top + f * span, span];
      });
      for (const run of runsOf(points)) {
        el("polyline", { points: run.join(" "), stroke: CURVE_COLOURS[k % CURVE_COLOURS.length],
                         "data-curve": curve.mnemonic }, svg);
        drawn += 1;
      }
    });
    svg.dataset.polylines = String(drawn);
    return svg;
  }

  // Curves against depth, as on a log print turned upright: one track per curve, depth downwards.
  function depthTracks(container, result) {
    container.replaceChildren();
    const curves = result.curves, depths = result.depth.values;
    const trackWidth = 220, height = 520, m = { left: 64, top: 34, bottom: 12, gap: 18 };
    const width = m.left + curves.length * (trackWidth + m.gap);
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", id: "depth-chart", role: "img" },
                   container);
    const [d0, d1] = [depths[0], depths[depths.length - 1]];
    const sy = (d) => m.top + ((d - d0) / (d1 - d0 || 1)) * (height - m.top - m.bottom);
    const axis = el("g", { class: "axis" }, svg);
    for (const t of ticks(Math.min(d0, d1), Math.max(d0, d1), 8)) {
      el("line", { x1: m.left, x2: width, y1: sy(t), y2: sy(t), class: "grid" }, axis);
      text(axis, m.left - 6, sy(t) + 4, format(t), { "text-anchor": "end" });
    }
    text(axis, 4, m.top - 2, `depth (${result.depth.unit})`);
    let sampled = 0;
    curves.forEach((curve, k) => {
      const scale = result.calibration.curves[k];
      const x0 = m.left + k * (trackWidth + m.gap);
      el("rect", { x: x0, y: m.top, width: trackWidth, height: height - m.top - m.bottom, fill: "none",
                   stroke: "#9aa1ae" }, svg);
      text(svg, x0, m.top - 14, `${curve.mnemonic} (${curve.unit})`, { class: "legend-text" });
      text(svg, x0, m.top - 2, format(scale.left));
      text(svg, x0 + trackWidth, m.top - 2, format(scale.right), { "text-anchor": "end" });
      const points = depths.map((depth, i) => {
        const v = curve.values[i];
        if (v === null || v === undefined) return null;
        const f = Math.min(Math.max(fraction(scale, v), -0.02), 1.02);  // a wrapped value is pinned to its edge
        return [x0 + f * trackWidth, sy(depth), 1e9];
      });
      sampled += points.filter((p) => p).length;
      for (const run of runsOf(points)) {
        el("polyline", { points: run.join(" "), class: "series", stroke: CURVE_COLOURS[k % CURVE_COLOURS.length],
                         "data-curve": curve.mnemonic }, svg);
      }
    });
    svg.dataset.samples = String(sampled);
    return svg;
  }

  return { line, traceOverlay, depthTracks, format };
})();
