// The VeerNet dashboard: the jobs table, a job's page, and digitising a scan (analysing a page is
// analyse.js's). Plain JavaScript over the JSON API; routes are URL fragments (#/, #/jobs/12, #/segment,
// #/segment/13, #/analyse). The API key, when the service asks for one, is kept in localStorage and sent
// as "Authorization: Bearer <key>".
"use strict";

const KEY_STORE = "veernet.apiKey";
const FINISHED = ["succeeded", "failed", "cancelled"];
const POLL_MS = 1500;
const RECOVERY_EVENTS = ["lease_lost", "stalled", "requeued", "resumed", "recovered", "resent", "checkpoint_skipped"];
const EXAMPLE_CONFIG = {
  epochs: 2, effective_batch: 4, warmup_steps: 2, device: "auto",
  model: { widths: [8, 8, 16, 16, 32, 32], transformer_heads: 2, transformer_ff: 64 },
  data: { dataset_size: 32, scale: 0.1, seed: 3 },
};
const EXAMPLE_OPTIONS = {
  calibration: {
    depth: { top: 1000, bottom: 1100, unit: "m" },
    curves: [{ mnemonic: "GR", unit: "API", left: 0, right: 150 }],
    track_top: 40, track_bottom: 600, step: 0.5,
  },
  well: "",
};

const $ = (selector, root = document) => root.querySelector(selector);
const view = () => $("#view");
let timer = null;  // the current page's poll; cleared whenever the page changes
let shownPage = 0;  // counts page changes (route), so that a poll can tell its page is gone
let scans = {};  // segment job id -> object URL of the scan uploaded from this page

class AuthNeeded extends Error {}

// ---- the API ----------------------------------------------------------------------------------------

function apiKey() { return localStorage.getItem(KEY_STORE) || ""; }

async function api(path, options = {}) {
  const headers = new Headers(options.headers || {});
  if (apiKey()) headers.set("Authorization", `Bearer ${apiKey()}`);
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) {
    const body = await response.json().catch(() => ({}));
    askForKey(body.detail || "this service needs an API key");
    throw new AuthNeeded(body.detail);
  }
  return response;
}

async function apiJson(path, options = {}) {
  const response = await api(path, options);
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.detail;
    const text = Array.isArray(detail) ? detail.map((d) => `${d.field}: ${d.message}`).join("; ") : detail;
    super(`${status}: ${text || "request failed"}`);
    this.status = status;
    this.detail = detail;
  }
}

function askForKey(reason) {
  $("#key-reason").textContent = apiKey() ? `The key given was refused: ${reason}` : reason;
  $("#key-panel").hidden = false;
  $("#key-input").focus();
}

function showKeyState() {
  $("#key-state").textContent = apiKey() ? "using an API key" : "";
  $("#forget-key").hidden = !apiKey();
}

// Downloads go through fetch so that the key is sent; the browser then saves the bytes under `name`.
async function download(path, name) {
  const response = await api(path);
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

async function imageUrl(path) {
  const response = await api(path);
  if (!response.ok) throw new ApiError(response.status, null);
  return URL.createObjectURL(await response.blob());
}

// ---- small helpers ------------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function statusBadge(status, id = null) {
  return h("span", { class: `status status-${status}`, id, dataset: { status } }, status);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function clock(iso) { return iso ? new Date(iso).toLocaleString() : ""; }

function eta(job) {
  if (FINISHED.includes(job.status)) return job.status === "succeeded" ? "done" : "";
  const e = job.eta || {};
  if (job.status === "queued" && e.expected_start_seconds !== null && e.expected_start_seconds !== undefined) {
    return `starts in ~${duration(e.expected_start_seconds)}`;
  }
  if (e.seconds === null || e.seconds === undefined) return "measuring…";
  return `${duration(e.seconds)} (at ${new Date(e.at).toLocaleTimeString()})`;
}

function percent(job) {
  const f = job.progress && job.progress.fraction;
  return f === null || f === undefined ? "" : `${Math.floor(f * 100)} %`;
}

// Epochs count work done, as steps do (README: "Epochs count work done"): "1/2" while the second epoch
// trains, "2/2" at the end.
function epochsDone(job) {
  const p = job.progress || {};
  return p.epoch === null || p.epoch === undefined || !p.epochs ? "" : `${p.epoch}/${p.epochs}`;
}

function bytes(n) {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let k = 0;
  while (n >= 1000 && k < units.length - 1) { n /= 1000; k += 1; }
  return `${n.toFixed(k ? 1 : 0)} ${units[k]}`;
}

function num(v, digits = 4) { return v === null || v === undefined ? "" : (+v).toFixed(digits); }

function showError(error) {
  if (error instanceof AuthNeeded) return;
  $("#error").textContent = String(error.message || error);
  $("#error").hidden = false;
}

function poll(fn) {
  const mine = shownPage;  // a poll whose page was left while its request was in flight stops there
  const tick = async () => {
    let again = true;
    try {
      again = (await fn()) !== false;
      if (mine !== shownPage) return;
      $("#error").hidden = true;
    } catch (error) {
      if (mine !== shownPage) return;
      showError(error);
      again = !(error instanceof AuthNeeded);
    }
    if (again) timer = setTimeout(tick, POLL_MS);
  };
  tick();
}

// ---- the jobs table -------------------------------------------------------------------------------------

function jobsPage() {
  const table = h("table", { id: "jobs-table" }, h("thead", {}, h("tr", {},
    ["Job", "Kind", "Status", "Progress", "Epochs done", "Loss", "ETA", "Attempt", "Recoveries", "Created"]
      .map((name) => h("th", {}, name)))), h("tbody"));
  const filter = h("select", { id: "status-filter", onchange: () => refresh() },
    h("option", { value: "" }, "every status"), ...["queued", "running", "succeeded", "failed", "cancelled"]
      .map((s) => h("option", { value: s }, s)));
  const config = h("textarea", { id: "job-config", rows: 9, spellcheck: "false" },
    JSON.stringify(EXAMPLE_CONFIG, null, 2));
  const errors = h("ul", { id: "submit-errors", class: "error-list" });
  const form = h("form", { id: "submit-form", onsubmit: (event) => { event.preventDefault(); submit(); } },
    h("p", { class: "hint" }, "A training config (veernet_core TrainConfig as JSON); omitted fields take their ",
      "defaults, listed with their ranges under POST /jobs in ", h("a", { href: "docs" }, "the API docs"), "."),
    config, h("p", {}, h("button", { type: "submit", id: "submit-job" }, "Submit training job")), errors);
  view().replaceChildren(
    h("h2", {}, "Jobs ", filter), table, h("p", { id: "jobs-total", class: "hint" }),
    h("h2", {}, "Train a model"), h("section", { class: "card" }, form));

  async function submit() {
    errors.replaceChildren();
    let body;
    try {
      body = { kind: "train", config: JSON.parse(config.value) };
    } catch (error) {
      errors.append(h("li", {}, `config: not valid JSON (${error.message})`));
      return;
    }
    try {
      const job = await apiJson("jobs", { method: "POST", headers: { "Content-Type": "application/json" },
                                          body: JSON.stringify(body) });
      location.hash = `#/jobs/${job.id}`;
    } catch (error) {
      if (error instanceof AuthNeeded) return;
      const detail = Array.isArray(error.detail) ? error.detail : [{ field: "", message: error.message }];
      errors.replaceChildren(...detail.map((d) => h("li", {}, d.field ? `${d.field}: ${d.message}` : d.message)));
    }
  }

  async function refresh() {
    const status = filter.value ? `&status=${filter.value}` : "";
    const page = await apiJson(`jobs?limit=100${status}`);
    const rows = page.items.map((job) => h("tr", { dataset: { job: job.id, status: job.status } },
      h("td", {}, h("a", { href: job.kind === "segment" ? `#/segment/${job.id}` : `#/jobs/${job.id}` }, `#${job.id}`)),
      h("td", {}, job.kind), h("td", {}, statusBadge(job.status)), h("td", { class: "num" }, percent(job)),
      h("td", { class: "num epochs" }, epochsDone(job)), h("td", { class: "num" }, num(job.progress.loss)),
      h("td", { class: "eta" }, eta(job)), h("td", { class: "num" }, job.attempt),
      h("td", { class: "num" }, job.recoveries), h("td", {}, clock(job.created_at))));
    $("tbody", table).replaceChildren(...rows);
    $("#jobs-total").textContent = page.total > page.items.length
      ? `${page.items.length} newest of ${page.total} jobs` : `${page.total} job(s)`;
  }
  poll(refresh);
}

// ---- one job -----------------------------------------------------------------------------------------

function jobPage(id) {
  const facts = h("div", { class: "facts", id: "job-facts" });
  const progress = h("progress", { id: "job-progress", max: 1, value: 0 });
  const lossChart = h("div", { id: "loss-chart" });
  const iouChart = h("div", { id: "iou-chart" });
  const attempts = h("ul", { class: "attempts", id: "attempts" });
  const timeline = h("tbody");
  const checkpoints = h("tbody");
  const cancel = h("button", { type: "button", class: "secondary", id: "cancel-job", hidden: true,
                               onclick: () => cancelJob(id) }, "Cancel job");
  view().replaceChildren(
    h("h2", { id: "job-title" }, `Job #${id}`), h("section", { class: "card" }, facts, progress,
      h("p", { id: "job-progress-text", class: "hint" }), h("p", { id: "job-error", class: "error-list" }), cancel),
    h("h2", {}, "Training curves (per committed epoch)"), h("div", { class: "charts" }, lossChart, iouChart),
    h("h2", {}, "Attempts and recoveries"), attempts,
    h("table", { id: "timeline" }, h("thead", {}, h("tr", {}, ["Time", "Attempt", "Event", "What happened"]
      .map((name) => h("th", {}, name)))), timeline),
    h("h2", {}, "Checkpoints"),
    h("table", { id: "checkpoints" }, h("thead", {}, h("tr", {}, ["#", "Epochs done", "Step", "Global step", "Attempt",
      "Size", "IoU (curves)", "sha256", ""].map((name) => h("th", {}, name)))), checkpoints));

  let drawnHistory = "";
  poll(async () => {
    const job = await apiJson(`jobs/${id}`);
    if (job.kind === "segment") { location.hash = `#/segment/${id}`; return false; }
    renderFacts(job);
    const [history, events, saved] = await Promise.all([
      apiJson(`jobs/${id}/history`), apiJson(`jobs/${id}/events?limit=5000`), apiJson(`jobs/${id}/checkpoints`)]);
    const signature = JSON.stringify(history.map((r) => [r.epoch, r.attempt]));
    if (signature !== drawnHistory) { renderCurves(history); drawnHistory = signature; }
    renderTimeline(events.items);
    renderCheckpoints(saved);
    return !FINISHED.includes(job.status);
  });

  function renderFacts(job) {
    const p = job.progress;
    $("#job-title").replaceChildren(`Job #${job.id} `, statusBadge(job.status, "job-status"));
    facts.replaceChildren(...[
      ["Tenant", job.tenant], ["Attempt", job.attempt], ["Recoveries", job.recoveries],
      ["Time lost to recoveries", duration(job.recovery_seconds)], ["ETA", eta(job)],
      ["Images / s", num(p.images_per_s, 1)], ["Step time", p.step_time_s ? `${num(p.step_time_s, 3)} s` : ""],
      ["Loss", num(p.loss)], ["IoU (curves, last epoch)", num(job.metrics && job.metrics.iou_fg_mean, 3)],
      ["Created", clock(job.created_at)], ["Started", clock(job.started_at)], ["Finished", clock(job.finished_at)],
    ].map(([name, value]) => h("div", {}, h("span", {}, name), value === "" ? "–" : value)));
    progress.value = p.fraction || 0;
    progress.dataset.fraction = String(p.fraction ?? "");
    $("#job-progress-text").textContent = p.total_steps
      ? `step ${p.global_step ?? 0} of ${p.total_steps} (${percent(job)}), epochs done ${epochsDone(job)}`
      : "waiting for the first step";
    $("#job-error").textContent = job.error || "";
    cancel.hidden = FINISHED.includes(job.status) || job.cancel_requested;
  }

  function renderCurves(history) {
    const points = (name) => history.map((r) => [r.epoch, name === "train_loss" ? r.train_loss : r.metrics[name]]);
    Charts.line(lossChart, { id: "loss-svg", xLabel: "epoch", yLabel: "train loss",
                             series: [{ name: "train loss", points: points("train_loss") }] });
    const names = [...new Set(history.flatMap((r) => Object.keys(r.metrics)))]
      .filter((n) => n.startsWith("iou_") && n !== "iou_background");
    Charts.line(iouChart, { id: "iou-svg", xLabel: "epoch", yLabel: "validation IoU", yRange: [0, 1],
                            series: names.map((n) => ({ name: n === "iou_fg_mean" ? "IoU (curves, mean)" : n,
                                                        points: points(n) })) });
  }

  function renderTimeline(events) {
    const byAttempt = new Map();
    for (const e of events) {
      if (!byAttempt.has(e.attempt)) byAttempt.set(e.attempt, []);
      byAttempt.get(e.attempt).push(e);
    }
    attempts.replaceChildren(...[...byAttempt.entries()].filter(([a]) => a > 0).map(([a, list]) => {
      const claimed = list.find((e) => e.kind === "claimed");
      const last = list[list.length - 1];
      const saved = list.filter((e) => e.kind === "checkpoint").length;
      return h("li", { dataset: { attempt: a, outcome: last.kind } }, h("strong", {}, `Attempt ${a}`),
        claimed ? ` claimed ${clock(claimed.created_at)} by ${claimed.data?.owner ?? "a worker"}` : "",
        `; ${saved} checkpoint(s); last: ${last.kind} — ${last.message}`);
    }));
    timeline.replaceChildren(...events.map((e) => h("tr", {
      class: RECOVERY_EVENTS.includes(e.kind) ? "event-recovery" : e.kind === "stale_write_refused"
        ? "event-refused" : FINISHED.includes(e.kind) ? "event-end" : null,
      dataset: { kind: e.kind } },
    h("td", {}, clock(e.created_at)), h("td", { class: "num" }, e.attempt), h("td", {}, e.kind),
    h("td", {}, e.message))));
  }

  function renderCheckpoints(saved) {
    checkpoints.replaceChildren(...saved.map((c) => {
      const name = `job-${c.job_id}-${c.storage_key.split("/").pop()}`;
      const link = h("a", { href: c.download_url.replace(/^\//, ""), download: name, class: "download",
                            dataset: { checkpoint: c.id, sha256: c.sha256 } }, "download");
      link.addEventListener("click", (event) => {
        if (!apiKey()) return;  // no key to send: the browser follows the link itself
        event.preventDefault();
        download(link.getAttribute("href"), name).catch(showError);
      });
      return h("tr", { dataset: { checkpoint: c.id } }, h("td", {}, c.id), h("td", { class: "num" }, c.epoch),
        h("td", { class: "num" }, c.step), h("td", { class: "num" }, c.global_step),
        h("td", { class: "num" }, c.attempt), h("td", { class: "num" }, bytes(c.size)),
        h("td", { class: "num" }, num(c.metrics.iou_fg_mean, 3), c.is_best ? " ★ best" : ""),
        h("td", { class: "mono", title: c.sha256 }, c.sha256.slice(0, 12)), h("td", {}, link));
    }));
  }
}

async function cancelJob(id) {
  try {
    await apiJson(`jobs/${id}/cancel`, { method: "POST" });
  } catch (error) { showError(error); }
}

// ---- digitising a scan ---------------------------------------------------------------------------------

function segmentPage() {
  const file = h("input", { type: "file", id: "scan-file", accept: "image/png,image/tiff,image/jpeg" });
  const options = h("textarea", { id: "segment-options", rows: 12, spellcheck: "false" },
    JSON.stringify(EXAMPLE_OPTIONS, null, 2));
  const preview = h("img", { id: "scan-preview", alt: "", hidden: true });
  const errors = h("ul", { id: "segment-errors", class: "error-list" });
  file.addEventListener("change", () => {
    if (!file.files.length) return;
    preview.src = URL.createObjectURL(file.files[0]);
    preview.hidden = false;
  });
  const form = h("form", { id: "segment-form", onsubmit: (event) => { event.preventDefault(); send(); } },
    h("p", {}, h("label", {}, "Scanned log (PNG, TIFF or JPEG; depth along the width) ", file)),
    h("div", { class: "scan-view" }, preview),
    h("p", { class: "hint" }, "Options: the calibration read off the log (depth at two ends or two ticks, the ",
      "track's top and bottom rows, each curve's scale and, to tell the curves apart, the style, ink and ",
      "anchors the log's legend and a reading give them; every field in docs/reference.md), optionally a model ({\"checkpoint_id\": n} or ",
      "{\"job_id\": n}; the bundled model if omitted), the well's name, and scan_scale (1.0 = full resolution, ",
      "480-640 px tall at about 300 dpi; taken from the scan's height if omitted)."),
    options, h("p", {}, h("button", { type: "submit", id: "segment-submit" }, "Digitise")), errors);
  view().replaceChildren(h("h2", {}, "Digitise a scanned log"), h("section", { class: "card" }, form));

  async function send() {
    errors.replaceChildren();
    if (!file.files.length) { errors.append(h("li", {}, "file: choose a scan first")); return; }
    const body = new FormData();
    body.append("file", file.files[0]);
    body.append("options", options.value);
    try {
      const job = await apiJson("segment", { method: "POST", body });
      const opts = JSON.parse(options.value);
      if (!opts.rotate_portrait) scans[job.id] = URL.createObjectURL(file.files[0]);
      location.hash = `#/segment/${job.id}`;
    } catch (error) {
      if (error instanceof AuthNeeded) return;
      const detail = Array.isArray(error.detail) ? error.detail : [{ field: "", message: error.message }];
      errors.replaceChildren(...detail.map((d) => h("li", {}, d.field ? `${d.field}: ${d.message}` : d.message)));
    }
  }
}

function segmentResultPage(id) {
  const state = h("p", { id: "segment-state" });
  const image = h("img", { id: "scan-image", alt: "the scan" });
  image.addEventListener("load", () => { image.dataset.loaded = "true"; });
  const overlay = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  overlay.id = "trace-svg";
  const depth = h("div", { id: "depth-view" });
  const files = h("p", { class: "files", id: "result-files" });
  const service = h("img", { id: "overlay-image", alt: "the service's overlay", hidden: true });
  view().replaceChildren(h("h2", { id: "segment-title" }, `Segment job #${id}`), state,
    h("h2", {}, "Traced curves over the scan"), h("div", { class: "scan-view" }, image, overlay), files,
    h("h2", {}, "Curves against depth"), depth,
    h("h2", {}, "The service's overlay"), h("div", { class: "scan-view" }, service));

  poll(async () => {
    const job = await apiJson(`jobs/${id}`);
    $("#segment-title").replaceChildren(`Segment job #${id} `, statusBadge(job.status, "job-status"));
    state.textContent = job.status === "succeeded" ? `digitised with ${job.config.model.model_id}`
      : job.error || `${job.status}: ${eta(job) || "waiting for a segment worker"}`;
    if (!FINISHED.includes(job.status)) return true;
    if (job.status === "succeeded") await showResult(job);
    return false;
  });

  async function showResult(job) {
    const result = await apiJson(`jobs/${id}/result`);
    service.src = await imageUrl(`jobs/${id}/overlay.png`);
    service.hidden = false;
    image.src = scans[id] || service.src;
    Charts.traceOverlay(overlay, result);
    Charts.depthTracks(depth, result);
    const names = { result: "JSON", "result.csv": "CSV", "result.las": "LAS 2.0", "mask.png": "mask",
                    "overlay.png": "overlay" };
    files.replaceChildren("Download: ", ...Object.entries(names).map(([path, label]) => {
      const name = `segment-${id}-${path === "result" ? "result.json" : path}`;
      return h("a", { href: `jobs/${id}/${path}`, download: name, onclick: (event) => {
        event.preventDefault();
        download(`jobs/${id}/${path}`, name).catch(showError);
      } }, label);
    }));
    const found = result.curves.map((c) => `${c.mnemonic}: ${Math.round(c.found_fraction * 100)} % of depths`);
    state.textContent = `digitised with ${job.config.model.model_id}; ${result.depth.values.length} depth samples ` +
      `from ${Charts.format(result.depth.start)} to ${Charts.format(result.depth.stop)} ${result.depth.unit}; ` +
      found.join(", ");
    const read = result.inference;
    if (read && read.resampled) {
      state.textContent += `; read at the model's scale (${read.model_size.join(" x ")} px of the scan's ` +
        `${read.scan_size.join(" x ")})`;
    }
    state.dataset.done = "true";
  }
}

// ---- routing ---------------------------------------------------------------------------------------

function route() {
  clearTimeout(timer);
  shownPage += 1;
  $("#error").hidden = true;
  showKeyState();
  const hash = location.hash || "#/";
  let match;
  if ((match = hash.match(/^#\/jobs\/(\d+)$/))) jobPage(+match[1]);
  else if ((match = hash.match(/^#\/segment\/(\d+)$/))) segmentResultPage(+match[1]);
  else if (hash === "#/segment") segmentPage();
  else if (hash === "#/analyse") analysePage();  // analyse.js
  else jobsPage();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(KEY_STORE, $("#key-input").value.trim());
    $("#key-input").value = "";
    $("#key-panel").hidden = true;
    route();
  });
  $("#forget-key").addEventListener("click", () => { localStorage.removeItem(KEY_STORE); route(); });
  window.addEventListener("hashchange", route);
  route();
});
