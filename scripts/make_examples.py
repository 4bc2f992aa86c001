"""Write examples/'s scans and calibrations from the synthetic generator:

    .venv/bin/python scripts/make_examples.py

Run it when veernet_core.synth draws logs differently (tests/core/test_examples.py then says the shipped
files no longer match). The calibrations hold what a person would read off the scans: depth ends or two
ticks, track rows, each curve's scale, the side it wraps to, its line style, and one anchor.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from veernet_core.synth import CurveTruth, SynthLog, generate  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SEED, SCALE = 2026, 0.1
SYNTHETIC_INDEX, TRACK_INDEX = 54, 333
TRACK_COLUMNS = (150, 750)  # the crop of the track example
TICKS = (20, 580)  # columns of the crop whose depths are read off as ticks
ANCHOR_COLUMN = 100  # column of the crop where SP's value is read off as an anchor


def crop_rows(log: SynthLog) -> tuple[int, int]:
    return max(0, log.track[0] - 3), min(log.image.shape[0], log.track[1] + 4)


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _curve_lines(curve: CurveTruth, indent: str, extra: list[str]) -> list[str]:
    s = curve.scale
    lines = [f"- mnemonic: {s.mnemonic}", f"  unit: {s.unit}", f"  left: {s.left:g}", f"  right: {s.right:g}"]
    lines += ["  log: true"] if s.log else []
    wrap = curve.wrap
    lines += [f"  wrap: {wrap}          # its backup scales: one track width past `{wrap}`"] if wrap != "none" else []
    lines += [f"  style: {curve.style}       # from the log's legend", f"  ink: {curve.ink_class}",
              *extra]
    return [indent + line for line in lines]


def synthetic() -> str:
    log = generate(SEED, SYNTHETIC_INDEX, SCALE, 3)
    (EXAMPLES / "scan-synthetic.png").write_bytes(_png(log.image))
    height, width = log.image.shape
    lines = [
        f"# A calibration for examples/scan-synthetic.png: synthetic log {SYNTHETIC_INDEX} of data seed {SEED} at "
        f"scale {SCALE}",
        f"# (veernet_core.synth.generate({SEED}, {SYNTHETIC_INDEX}, {SCALE}), {width} x {height} px). Read it as "
        "a person reads the print:",
        "#",
        "#   veernet segment examples/scan-synthetic.png --calibration examples/calibration-synthetic.yaml -o out.las",
        "#",
        "# Every field is described in docs/reference.md. tests/core/test_examples.py regenerates the scan,",
        "# checks this file against the generator's truth and digitises the scan with it.",
        "depth:                 # the scan's first and last columns",
        f"  top: {round(log.depth.top, 3)}", f"  bottom: {round(log.depth.bottom, 3)}", f"  unit: {log.depth.unit}",
        f"track_top: {log.track[0]}           # image row of the track's top border: where every scale reads `left`",
        f"track_bottom: {log.track[1]}       # image row of its bottom border: where every scale reads `right`",
        "step: 0.2              # one output sample every 0.2 m",
        "curves:",
    ]
    for curve in log.curves:
        lines += _curve_lines(curve, "  ", [])
    return "\n".join(lines) + "\n"


def track() -> str:
    log = generate(SEED, TRACK_INDEX, SCALE, 3)
    (r0, r1), (c0, c1) = crop_rows(log), TRACK_COLUMNS
    (EXAMPLES / "scan-track.png").write_bytes(_png(log.image[r0:r1, c0:c1]))
    width = log.image.shape[1]
    depth = [float(log.depth.depth_of_column(np.array(c0 + col), width)) for col in TICKS]
    first = log.curves[0]
    at = c0 + ANCHOR_COLUMN
    anchor_depth = float(log.depth.depth_of_column(np.array(at), width))
    anchor = [f"  anchors:         # a point read off the scan: {first.scale.mnemonic} reads "
              f"{first.values[at]:.3g} {first.scale.unit} at {anchor_depth:.2f} m",
              f"    - {{depth: {anchor_depth:.2f}, value: {first.values[at]:.3g}}}"]
    lines = [
        f"# The options for examples/scan-track.png: one track cropped out of a log print (columns {c0}-{c1 - 1},",
        f"# rows {r0}-{r1 - 1} of synthetic log {TRACK_INDEX} of data seed {SEED} at scale {SCALE}), so its depth "
        "comes from two ticks read",
        "# off the crop and a value read off the scan pins a curve's name. The whole POST /segment",
        "# options, as `veernet segment` takes them:",
        "#",
        "#   veernet segment examples/scan-track.png --calibration examples/calibration-track.yaml -o out.csv",
        "#",
        "# Every field is described in docs/reference.md; tests/core/test_examples.py keeps this file true.",
        "well: EXAMPLE-TRACK",
        "calibration:",
        "  depth:",
        "    ticks:             # [column of the crop, depth there]: two depth ticks read off the print",
        *(f"      - [{col}, {d:.3f}]" for col, d in zip(TICKS, depth, strict=True)),
        f"    unit: {log.depth.unit}",
        f"  track_top: {log.track[0] - r0}         # rows of the crop",
        f"  track_bottom: {log.track[1] - r0}",
        "  step: 0.25",
        "  curves:",
        *_curve_lines(first, "    ", anchor),
        *(line for curve in log.curves[1:] for line in _curve_lines(curve, "    ", [])),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    (EXAMPLES / "calibration-synthetic.yaml").write_text(synthetic())
    (EXAMPLES / "calibration-track.yaml").write_text(track())
    print(f"wrote the scans and calibrations in {EXAMPLES}; check them with tests/core/test_examples.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
