// The page-analysis view of the dashboard (#/analyse): upload one full-page scan, show the calibration the
// service proposes (POST /scans/analyse) with each field's confidence, and offer it as a JSON file to
// confirm and complete. Uses app.js's helpers (h, apiJson, AuthNeeded, view), loaded beside it.
"use strict";

function analysePage() {
  const file = h("input", { type: "file", id: "page-file", accept: "image/tiff,image/png,image/jpeg" });
  const dpi = h("input", { type: "number", id: "page-dpi", min: 50, max: 2400, step: "any",
                           placeholder: "from the file" });
  const errors = h("ul", { id: "analyse-errors", class: "error-list" });
  const result = h("div", { id: "analyse-result" });
  const form = h("form", { id: "analyse-form", onsubmit: (event) => { event.preventDefault(); send(); } },
    h("p", {}, h("label", {}, "One page of a raster log (TIFF of any mode, PNG or JPEG) ", file)),
    h("p", {}, h("label", {}, "Resolution, dpi (only if the file states none or a wrong one) ", dpi)),
    h("p", { class: "hint" }, "The service finds the page's orientation, header, log sections, tracks, depth ",
      "column, depth scale and depth fit, value grids and the curves named in the track headers. Every field ",
      "comes with a confidence; what it could not read is left empty, with a note saying what to supply."),
    h("p", {}, h("button", { type: "submit", id: "analyse-submit" }, "Analyse")), errors);
  view().replaceChildren(h("h2", {}, "Analyse a full-page scan"), h("section", { class: "card" }, form), result);

  async function send() {
    errors.replaceChildren();
    result.replaceChildren();
    if (!file.files.length) { errors.append(h("li", {}, "file: choose a scan first")); return; }
    const body = new FormData();
    body.append("file", file.files[0]);
    if (dpi.value) body.append("dpi", dpi.value);
    $("#analyse-submit").disabled = true;
    try {
      showProposal(result, await apiJson("scans/analyse", { method: "POST", body }), file.files[0].name);
    } catch (error) {
      if (error instanceof AuthNeeded) return;
      const detail = Array.isArray(error.detail) ? error.detail : [{ field: "", message: error.message }];
      errors.replaceChildren(...detail.map((d) => h("li", {}, d.field ? `${d.field}: ${d.message}` : d.message)));
    } finally {
      $("#analyse-submit").disabled = false;
    }
  }
}

function sure(field) {
  if (!field || field.value === null || field.value === undefined) {
    return h("span", { class: "confidence unread", title: field ? field.evidence : "" }, "not read");
  }
  const level = field.confidence >= 0.8 ? "high" : field.confidence >= 0.5 ? "mid" : "low";
  return h("span", { class: `confidence ${level}`, title: field.evidence }, `${Math.round(field.confidence * 100)} %`);
}

// The ink and weight a curve's line sample shows, where read (empty is no hint, not a field to fill in).
function legendHints(curve) {
  const read = [curve.ink, curve.weight].filter((f) => f && f.value !== null).map((f) => f.value);
  return read.length ? `${read.join(" ")} ` : "";
}

function shown(value) {
  if (value === null || value === undefined) return "?";
  return typeof value === "number" ? String(+value.toFixed(4)) : String(value);
}

function showProposal(target, proposal, name) {
  const o = proposal.orientation;
  const facts = h("p", { id: "analyse-orientation" },
    `Turned ${o.turn.value} degrees clockwise `, sure(o.turn), `, skew ${shown(o.skew_deg.value)} degrees `,
    sure(o.skew_deg), `; page ${proposal.page.width} x ${proposal.page.height} px at `,
    `${proposal.image.dpi ? proposal.image.dpi + " dpi" : "an unknown resolution"}.`);
  const notes = h("ul", { id: "analyse-messages", class: "notes" },
    ...proposal.messages.map((m) => h("li", {}, m)));
  const blob = new Blob([JSON.stringify(proposal, null, 2)], { type: "application/json" });
  const link = h("a", { id: "proposal-download", href: URL.createObjectURL(blob),
                        download: name.replace(/\.[^.]*$/, "") + ".calibration.json" }, "Download the proposal (JSON)");
  target.replaceChildren(h("h2", {}, "Proposed calibration"), facts, notes,
    ...proposal.sections.map((section, k) => sectionCard(section, k + 1)), h("p", {}, link));
}

function sectionCard(section, k) {
  const depth = section.depth;
  const span = depth.range ? `${shown(depth.range[0])} to ${shown(depth.range[1])} ${depth.unit.value}` : "not fitted";
  const labels = depth.labels.filter((l) => l.value !== null);
  const summary = h("p", {},
    `Rows ${shown(section.rows.value.top)} to ${shown(section.rows.value.bottom)} `, sure(section.rows),
    `; scale ${shown(section.scale.value)} `, sure(section.scale), `; depths ${span} `, sure(depth.ticks),
    depth.residual === null ? "" : `; residual ${shown(depth.residual)} ${depth.unit.value}`,
    `; ${labels.filter((l) => l.inlier).length} of ${labels.length} depth numbers read agree.`);
  const rows = section.tracks.map((track, j) => h("tr", { class: "track-row" },
    h("td", {}, String(j + 1)),
    h("td", {}, `${shown(track.extent.value.left)}-${shown(track.extent.value.right)} `, sure(track.extent)),
    h("td", {}, track.grid.value ? `${track.grid.value.scale} ${track.grid.value.divisions} ` : "", sure(track.grid)),
    h("td", {}, ...track.curves.map((c) => h("div", { class: "curve" },
      `${shown(c.mnemonic.value)} (${shown(c.unit.value)}) ${shown(c.left.value)} .. ${shown(c.right.value)} `,
      `${shown(c.style.value)} `, legendHints(c), sure(c.mnemonic))), track.curves.length ? "" : "none read")));
  const table = h("table", { class: "tracks" },
    h("thead", {}, h("tr", {}, ...["track", "columns", "value grid", "curves"].map((t) => h("th", {}, t)))),
    h("tbody", {}, ...rows));
  return h("section", { class: "card section-card", dataset: { section: k } }, h("h3", {}, `Section ${k}`),
    summary, table);
}
