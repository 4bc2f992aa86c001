"""Page layout analysis against the full-page generator's truth, and its speed and memory on a large page.

    python bench/analyse_eval.py [--renderer synth|paper] [--pages 40] [--seed 20261124] [--big-width 2000]
                                 [--big-height 30000]

Renderers: `synth` (the default) is the project's full-page generator, `veernet_core.page_synth`, with every
option left to chance (150-400 dpi, gray or 1-bit, skew up to 0.8 degrees, dirt, stored turned a quarter or
a half in 3 of 7, one or two sections in feet or metres). `paper` is bench/paper/sheet.py, full pages drawn
by code of its own, independent of the generator's (its own fonts, header blocks, track-header legends in
four layouts, unit and number spellings, grid, paper and scanner): a figure on it is not a figure on the
pages the analysis was tuned on. With `paper` the JSON adds `by_convention`: the main figures per level of
each convention the page was drawn with, and `worst`, the levels with the fewest complete pages. Each page is
analysed as the service does it (`analyse_image` then `to_proposal`) with the dpi the file would state, on
one thread (OMP, OpenBLAS and Tesseract limited to one). The largest page is the generator's in both.

Figures (one JSON line):
  pages            pages analysed
  track_recall     share of true tracks found with both borders within 2 px (in a section found where
                   the true one is)
  track_err_px     worst border error of the proposed track nearest each true track (found sections)
  depth_rms_ft, depth_max_ft  depth error over the rows of 1 in per 100 ft sections (the target's), RMS
                   over all their rows and the worst row; sections left without a fit are counted in
                   `depth_fitted`, not here. `depth_by_scale` gives the same per scale, in the scale's unit
  depth_fitted     share of true sections given a depth fit
  depth_scale_acc  share of true sections whose scale is named right
  linlog_acc       share of true tracks whose value grid is called linear or logarithmic right;
                   `divisions_acc` the same for the number of divisions or decades
  turn_acc         share of pages turned upright
  pages_no_correction  share of pages whose whole calibration needs no correction: turned right, every
                   section found with its scale and a depth fit off by at most 0.02 in of paper at any row
                   (2 ft at 1 in per 100 ft), every track within 2 px with its value grid right, no extra
                   curve, and every curve field that was filled in (name, unit, scale ends, line style, ink,
                   weight) right. A field left empty is for the person to complete, not a correction;
                   `pages_complete` also asks that none is empty, `pages_geometry_ok` ignores the curve fields
  curve_fields_read, curve_fields_wrong  of the true curves' fields (name, unit, left, right, style), the
                   share proposed, and the share proposed wrong; `curve_fields_by_name` the same per field
  curves_found, curves_extra  the share of the true curves a proposed curve was read for (on its header line,
                   named or not: a line sample under an unread name is a curve left for the person to name), and
                   the proposed curves on no true curve's header line or on one another curve was read for
  ink_read, ink_wrong, weight_read, weight_wrong  the same for the legend's ink (dark or light) and weight
                   (thin or thick where the track's pens differ twofold: `synth_truth.legend_weights`) read off
                   each curve's line sample; empty is no hint, so only a wrong one is a correction
  seconds_per_page mean analysis time of the pages above
  largest_page     a page of --big-width x about --big-height px (1-bit, stored as a Group 4 TIFF, skewed 0.3
                   degrees: its tracks keep clear of the sides by what the skew moves them) analysed in
                   a fresh process from the file's bytes, decoding included: its size, seconds, and
                   `peak_rss_mb` (ru_maxrss), `rss_after_imports_mb` the same process before the scan
Targets (issue 17): track_recall >= 0.98 within 2 px; depth_rms_ft <= 0.5 and depth_max_ft <= 2 at 1 in per
100 ft; linlog_acc >= 0.98; pages_no_correction >= 0.8; the largest page in <= 10 s and <= 1.5 GB.
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # one core, as the targets say; before numpy is imported

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from analyse_scoring import PageScore, Slot, score_page, summarise  # noqa: E402
from benchio import log, stdout_to_stderr  # noqa: E402
from paper.sheet import render_page  # noqa: E402

from veernet_core.digitise.layout.analyse import analyse_image  # noqa: E402
from veernet_core.digitise.layout.proposal import propose_calibration, to_proposal  # noqa: E402
from veernet_core.page_draw import HEADER_SLOT_TOLERANCE_IN  # noqa: E402
from veernet_core.page_synth import PageOptions, generate_page  # noqa: E402

BIG_PIXELS = 80_000_000  # the analysis' own pixel limit for the large page (the service's is MAX_IMAGE_PIXELS)


Rows = tuple[tuple[tuple[float, ...], ...], ...]  # [section][track][curve]: a page row


def paper_slot(header_rows: Rows, dpi: int, ends_rows: Rows = ()) -> Slot:
    """The independent renderer's pages: the curve whose legend entry has a line of text (its name's, or its
    scale ends' where they are printed on a line of their own, `ends_rows`) nearest the row, within the
    tolerance the generator's pages are scored with (`page_draw.HEADER_SLOT_TOLERANCE_IN`)."""
    def slot(row: float, section: int, track: int) -> int | None:
        names = header_rows[section][track]
        if not names:
            return None
        ends = ends_rows[section][track] if ends_rows else names
        off = [min(abs(row - name), abs(row - end)) for name, end in zip(names, ends, strict=True)]
        k = int(np.argmin(off))
        return k if off[k] <= HEADER_SLOT_TOLERANCE_IN * dpi else None
    return slot


def evaluate(pages: int, seed: int, renderer: str = "synth") -> tuple[list[PageScore], list[float],
                                                                      list[dict[str, Any]]]:
    """Each page analysed and scored; with the conventions it was drawn with (the independent renderer's)."""
    scores, seconds, conventions = [], [], []
    for index in range(pages):
        if renderer == "paper":
            drawn = render_page(seed, index)
            image, spec = drawn.image, drawn.spec
            slot = paper_slot(drawn.header_rows, drawn.spec.dpi, drawn.ends_rows)
            conventions.append(drawn.style)
        else:
            page = generate_page(seed, index)
            image, spec, slot = page.image, page.spec, None
            conventions.append({})
        started = time.perf_counter()
        proposal = to_proposal(analyse_image(image, float(spec.dpi)))
        seconds.append(time.perf_counter() - started)
        scores.append(score_page(spec, proposal, slot))
        log(f"page {index}: {image.shape[1]}x{image.shape[0]} px, {seconds[-1]:.2f} s, "
            f"no correction: {scores[-1].no_correction}, complete: {scores[-1].complete}")
    return scores, seconds, conventions


CONVENTION_FIGURES = ("track_recall", "depth_fitted", "depth_scale_acc", "pages_no_correction", "pages_geometry_ok",
                      "pages_complete", "curve_fields_read", "curve_fields_wrong")


def by_convention(scores: list[PageScore], conventions: list[dict[str, Any]]) -> dict[str, Any]:
    """The main figures per level of each convention (pages drawn with it), and the levels with the fewest
    complete pages first (`worst`, levels of at least three pages)."""
    levels: dict[str, dict[str, list[PageScore]]] = {}
    for score, drawn in zip(scores, conventions, strict=True):
        for name, level in drawn.items():
            levels.setdefault(name, {}).setdefault(str(level), []).append(score)
    table = {name: {level: {"pages": len(group), **{k: v for k, v in summarise(group).items()
                                                    if k in CONVENTION_FIGURES}}
                    for level, group in sorted(found.items())} for name, found in sorted(levels.items())}
    ranked = sorted(((figures["pages_complete"] or 0.0, figures["curve_fields_read"] or 0.0, name, level)
                     for name, found in table.items() for level, figures in found.items() if figures["pages"] >= 3))
    return {"by_convention": table,
            "worst": [{"convention": name, "level": level, "pages_complete": complete, "curve_fields_read": read}
                      for complete, read, name, level in ranked[:8]]}


def big_page(seed: int, width: int, height: int) -> dict[str, Any]:
    """Generate the large page, write it as a Group 4 TIFF, analyse it in a fresh process."""
    dpi = round(width / 8.5)
    paper_in = height / dpi - 6.0  # header block, two track-header strips and gaps take about 6 in
    options = PageOptions(width_px=width, sections=2, bitonal=True, turn=0, skew_deg=0.3,
                          first_section_in=(paper_in * 0.68,) * 2, second_section_in=(paper_in * 0.32,) * 2)
    page = generate_page(seed, 0, options)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "page.tif"
        buffer = io.BytesIO()
        Image.fromarray(page.image).convert("1").save(buffer, format="TIFF", compression="group4", dpi=(dpi, dpi))
        path.write_bytes(buffer.getvalue())
        done = subprocess.run([sys.executable, __file__, "--one-page", str(path)], capture_output=True, text=True,
                              check=True)
    child = json.loads(done.stdout.strip().splitlines()[-1])
    score = score_page(page.spec, child.pop("proposal"))
    return {"height": page.image.shape[0], "width": page.image.shape[1], "dpi": dpi, "file_bytes": len(
        buffer.getvalue()), **child, "no_correction": score.no_correction}


def high_water_mb() -> float:
    """This process's peak RSS (VmHWM). Not ru_maxrss: a child keeps the maximum of the parent it was
    forked from (here one that had just drawn the 60 Mpx page) across its exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_page(path: str) -> None:
    """In a fresh process: read the file, analyse it, print the seconds, peak RSS (the larger of its own and
    its Tesseract runs') and the proposal."""
    data = Path(path).read_bytes()
    base = high_water_mb()
    started = time.perf_counter()
    proposal = propose_calibration(data, BIG_PIXELS)
    seconds = time.perf_counter() - started
    peak = max(high_water_mb(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    print(json.dumps({"seconds": round(seconds, 3), "peak_rss_mb": round(peak, 1),
                      "rss_after_imports_mb": round(base, 1), "proposal": proposal}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--renderer", choices=("synth", "paper"), default="synth",
                        help="synth: the project's page generator; paper: the independent page renderer")
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--big-width", type=int, default=2000)
    parser.add_argument("--big-height", type=int, default=30000)
    parser.add_argument("--one-page", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_page:
        one_page(args.one_page)
        return
    started = time.perf_counter()
    with stdout_to_stderr():
        scores, seconds, conventions = evaluate(args.pages, args.seed, args.renderer)
        largest = big_page(args.seed, args.big_width, args.big_height)
    figures = summarise(scores)
    if args.renderer == "paper":
        figures.update(by_convention(scores, conventions))
    figures.update({"seconds_per_page": round(float(np.mean(seconds)), 3),
                    "seconds_per_page_max": round(float(np.max(seconds)), 3),
                    "largest_page": largest, "peak_rss_mb": largest["peak_rss_mb"], "seed": args.seed,
                    "renderer": args.renderer, "bench_seconds": round(time.perf_counter() - started, 1)})
    print(json.dumps({"pages": len(scores), **figures}))


if __name__ == "__main__":
    main()
