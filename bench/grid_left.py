"""How much of a page's printed grid `grid.without_grid` leaves: every track of generated full pages, cut out
and made upright as the service cuts it, with the grid taken off as the service takes it off before the
model reads the track.

    python bench/grid_left.py [--pages 20] [--seed 5150]

Pages come from `veernet_core.page_synth` with every option left to chance (gray or 1-bit, skewed, dirty),
as in bench/page_segment_eval.py. A line is measured over a band of 3 px about where the page's truth puts
it, as the ink darker than the paper (per row for depth lines, over the track's rows; per column for value
lines and borders, over the track's length), before and after; it "stays" where over a third of that ink is
left. Borders are measured over 7 px (a 1-bit border wobbles a row, and its ragged edge with it). Depth
lines are measured only where the scan inks at least 70 % of the track's rows in the band (a
line the scan itself broke up is no line to take off). Curves crossing a line count as its ink on both sides,
so a clean grid leaves a few per cent standing.

Figures (one JSON line): `depth_lines`, `value_lines`, `borders`, each with `lines` measured, `staying`
and `share` staying, and `ink_left` (the lines' ink left, summed, over their ink before: a line that keeps
under a third of its ink over a stretch does not stay, but what it leaves there reads as a curve), over all
pages, and per scan kind (`gray`, `one_bit`); `seconds`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from veernet_core.digitise import grid  # noqa: E402
from veernet_core.digitise.ink import MIN_DARKNESS, paper_gray  # noqa: E402
from veernet_core.digitise.section import turned_crop  # noqa: E402
from veernet_core.digitise.section_calibration import track_crop  # noqa: E402
from veernet_core.page_dataset import upright  # noqa: E402
from veernet_core.page_synth import generate_page  # noqa: E402

KEEPS = 0.35  # of a line's ink: left over this, the line stays
BORDER_BAND = 3  # rows either side of a border measured
BROKEN = 0.7  # of the track's rows: a depth line the scan inks less than this is not measured


def _ink(paper: np.ndarray, pixels: np.ndarray) -> float:
    return float(np.clip(paper - pixels.astype(np.float64), 0, None).sum())


def measure(seed: int, pages: range) -> dict[str, dict[str, list[float]]]:
    """Per kind of line, per scan kind (and `all`): [lines measured, lines staying, their ink before, their
    ink after], over `pages` (indices)."""
    counts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0.0, 0.0]))

    def count(kind: str, scan: str, before: float, after: float) -> None:
        for key in (scan, "all"):
            tally = counts[kind][key]
            tally[0] += 1
            tally[1] += int(after > KEEPS * before)
            tally[2] += before
            tally[3] += after

    for index in pages:
        drawn = generate_page(seed, index)
        spec = drawn.spec
        scan = "one_bit" if spec.scan.bitonal else "gray"
        turned = upright(drawn)
        for section in spec.sections:
            for track in section.tracks:
                crop = track_crop((section.top, section.bottom), track.left, track.right, (spec.height, spec.width))
                gray = turned_crop(turned, crop)
                top, bottom = track.left - crop.col0, track.right - crop.col0
                out, _ = grid.without_grid(gray, None, top, bottom)
                first, last = math.ceil(top) + 4, math.floor(bottom) - 4  # the track inside its borders
                paper = paper_gray(gray[first:last]).astype(np.float64)
                lines = round((section.depth_bottom - section.depth_top) / section.scale.minor)
                for k in range(lines + 1):
                    column = round(float(section.row_of(section.depth_top + k * section.scale.minor)) - crop.row0)
                    if not 2 <= column < gray.shape[1] - 2:
                        continue
                    band = slice(column - 1, column + 2)
                    if (gray[first:last, band] <= paper[band] - MIN_DARKNESS).any(axis=1).mean() < BROKEN:
                        continue
                    count("depth_lines", scan, _ink(paper[band], gray[first:last, band]),
                          _ink(paper[band], out[first:last, band]))
                along = np.median(gray, axis=0).astype(np.float64)  # the paper per column, over the crop's rows
                ends = slice(4, gray.shape[1] - 4)
                for fraction in (0.0, *track.division_fractions(), 1.0):
                    row = round(top + fraction * (bottom - top))
                    if not 2 <= row < gray.shape[0] - 2:
                        continue
                    kind = "borders" if fraction in (0.0, 1.0) else "value_lines"
                    reach = BORDER_BAND if kind == "borders" else 1
                    band = slice(max(0, row - reach), row + reach + 1)
                    paper_along = along[None, ends]
                    count(kind, scan, _ink(paper_along, gray[band, ends]), _ink(paper_along, out[band, ends]))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--seed", type=int, default=5150)
    args = parser.parse_args()
    started = time.monotonic()
    counts = measure(args.seed, range(args.pages))
    result: dict[str, object] = {"pages": args.pages, "seed": args.seed}
    for kind in ("depth_lines", "value_lines", "borders"):
        result[kind] = {scan: {"lines": int(n), "staying": int(s), "share": round(s / n, 4) if n else None,
                               "ink_left": round(after / before, 4) if before else None}
                        for scan, (n, s, before, after) in sorted(counts[kind].items())}
    result["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
