"""bench/error_split.py: the mean error split by what is wrong with each sample, on rows built by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import error_split  # noqa: E402
from digitise_figures import told_apart  # noqa: E402


def _row(position: int, curves: int, truth: np.ndarray, pred: np.ndarray, told: str = "none",
         identity: str = "ambiguous") -> dict[str, Any]:
    return {"position": position, "curves_in_log": curves, "truth": truth, "pred": pred,
            "inked": np.ones(truth.size, dtype=bool), "wrapped": np.zeros(truth.size, dtype=bool),
            "told_apart_by": told, "identity": identity}


def test_a_swap_a_slip_a_stray_and_a_near_miss_each_land_in_their_share() -> None:
    n = 100
    low, high = np.full(n, 0.3), np.full(n, 0.7)
    # Log 0: two curves, both traces on the second: the first is named wrong (0.4 off), and untraced.
    swapped = [_row(1, 2, low, high.copy()), _row(2, 2, high, high.copy())]
    # Log 1: a curve alone read a track width off (slip) in 10 samples, 0.2 off in 10, 0.01 off in 80.
    pred = np.full(n, 0.51)
    pred[:10] = 1.5
    pred[10:20] = 0.7
    alone = [_row(1, 1, np.full(n, 0.5), pred, told="single", identity="single")]
    result = error_split.split(swapped + alone)
    samples = 3 * n
    assert result["scored_samples"] == samples
    assert result["named_pct"] == pytest.approx(100 * 0.4 * n / samples, abs=1e-3)
    assert result["slip_pct"] == pytest.approx(100 * 1.0 * 10 / samples, abs=1e-3)
    assert result["off_pct"] == pytest.approx(100 * 0.2 * 10 / samples, abs=1e-3)
    assert result["small_pct"] == pytest.approx(100 * 0.01 * 80 / samples, abs=1e-3)
    parts = sum(result[f"{name}_pct"] for name in ("named", "slip", "off", "small"))
    assert parts == pytest.approx(result["mae_pct"], abs=2e-3)
    assert result["named_by_told_apart_pct"]["none/ambiguous"] == pytest.approx(result["named_pct"], abs=1e-3)
    assert result["untraced_inside"] == 0.5 and result["untraced_at_edge"] == 0.0  # the first curve, of two
    assert result["edge_samples"] == 0.0
    worst = result["worst_curves"]
    assert [(c["log"], c["position"]) for c in worst] == [(0, 1), (1, 1), (0, 2)]  # by their share of the error
    assert worst[0]["named_pct"] == pytest.approx(result["named_pct"], abs=1e-3)
    assert worst[1]["slip_pct"] == pytest.approx(result["slip_pct"], abs=1e-3)
    assert worst[1]["told_apart_by"] == "single" and worst[0]["identity"] == "ambiguous"
    assert worst[2]["mae_pct"] == 0.0


def test_untraced_samples_by_the_curves_line_style_and_whether_another_curve_looks_alike() -> None:
    n = 40
    solid, dashed_a, dashed_b = np.full(n, 0.2), np.full(n, 0.5), np.full(n, 0.8)
    rows = [_row(1, 3, solid, solid.copy()), _row(2, 3, dashed_a, dashed_a.copy()),
            _row(3, 3, dashed_b, dashed_a.copy())]  # the second dashed curve's trace doubles the first's
    rows[2]["pred"][: n // 4] = 0.8  # but follows its own curve over a quarter of the log

    def legend(*inks: str) -> list[dict[str, Any]]:  # each row's hints and what they tell it apart by
        hints = list(zip(("solid", "dashed", "dashed"), inks, strict=True))
        for k, (row, (style, ink)) in enumerate(zip(rows, hints, strict=True)):
            row.update(style=style, ink_class=ink, told_apart_by=told_apart(hints, k))
        return rows

    looks = error_split.split(legend("dark", "dark", "dark"))["untraced_by_look"]
    assert looks == {"dashed/twin": {"samples": 2 * n, "untraced": 0.375},  # 30 of the two curves' 80
                     "solid/own look": {"samples": n, "untraced": 0.0}}
    # The second dashed curve declared in another ink: no longer the first one's twin.
    looks = error_split.split(legend("dark", "dark", "light"))["untraced_by_look"]
    assert looks["dashed/own look"] == {"samples": 2 * n, "untraced": 0.375}


def test_samples_at_an_edge_and_their_share_of_the_error() -> None:
    n = 50
    truth = np.concatenate([np.full(n, 0.98), np.full(n, 0.5)])
    pred = np.concatenate([np.full(n, 0.5), np.full(n, 0.5)])  # the edge stretch traced in the middle
    result = error_split.split([_row(1, 1, truth, pred, told="single", identity="single")])
    assert result["edge_samples"] == 0.5
    assert result["edge_error"] == 1.0
    assert result["untraced_inside"] is None  # no track of two or more curves


def test_wrapped_samples_read_right_a_scale_off_or_elsewhere_by_track_and_declared_wrap() -> None:
    n = 40
    truth = np.full(n, 1.2)  # past the bottom edge, on the backup scale, throughout
    pred = np.full(n, 1.21)
    pred[:10] = 0.2  # read on the primary scale: a whole scale off
    pred[10:15] = 0.6  # on nothing
    alone = _row(1, 1, truth, pred, told="single", identity="single")
    alone.update(wrapped=np.ones(n, dtype=bool), wrap="right")
    shared = [_row(1, 2, truth.copy(), np.full(n, 2.2)), _row(2, 2, np.full(n, 0.5), np.full(n, 0.5))]
    shared[0].update(wrapped=np.ones(n, dtype=bool), wrap="both")  # read a scale too far, past the other edge
    result = error_split.split([alone, *shared])["wrapped"]
    assert result == {"alone/right": {"samples": n, "right": 0.625, "a_scale_off": 0.25, "elsewhere": 0.125},
                      "shared/both": {"samples": n, "right": 0.0, "a_scale_off": 1.0, "elsewhere": 0.0}}
