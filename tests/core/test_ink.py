"""The naming step's measures on the scan's pixels: the same numbers as NumPy's own statistics."""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.ink import MIN_DARKNESS, ScanPixels, page_of, sorted_median, sorted_quantile
from veernet_core.synth import generate


def test_median_and_quantile_of_sorted_values_are_numpys_to_the_bit() -> None:
    """Odd and even counts, one value, ties, and quantiles that fall on a value, just past one, and at the end."""
    rng = np.random.default_rng(3)
    for size in [*range(1, 40), 101, 256, 1000]:
        for values in (rng.normal(40.0, 30.0, size), rng.integers(0, 6, size).astype(np.float64),
                       np.round(rng.uniform(-5, 300, size), 1)):
            ranked = np.sort(values)
            assert sorted_median(ranked) == float(np.median(values))
            for q in (0.0, 0.1, 0.5, 0.9, 0.95, 1.0):
                assert sorted_quantile(ranked, q) == float(np.quantile(values, q)), (size, q)
    with_nan = np.sort(np.array([3.0, np.nan, 1.0]))
    assert np.isnan(sorted_median(with_nan)) and np.isnan(sorted_quantile(with_nan, 0.9))


def test_the_page_finds_the_paper_and_grid_lines_as_float_arithmetic_on_the_scan_does() -> None:
    """page_of compares gray levels with the paper's threshold without a float copy of the scan: the same
    grid columns and rows as the comparison of a float64 copy, on logs with grids and lines across."""
    for index in range(4):
        log = generate(31, index, 0.1)
        image = log.image.copy()
        image[5, :] = 0  # a line along the whole scan, and one down the track
        image[:, image.shape[1] // 3] = 10
        top, bottom = log.track
        page = page_of(ScanPixels(image), top, bottom)
        rows = image[int(np.floor(top)) : int(np.ceil(bottom)) + 1].astype(np.float64)
        threshold = page.paper[None, :] - MIN_DARKNESS
        np.testing.assert_array_equal(page.grid_cols, (rows <= threshold).mean(axis=0) >= 0.5)
        np.testing.assert_array_equal(page.grid_rows, (image.astype(np.float64) <= threshold).mean(axis=1) >= 0.5)
        assert page.grid_rows[5] and page.grid_cols[image.shape[1] // 3]


def test_a_tracks_page_is_computed_once_per_scan_and_track() -> None:
    """The tracer, the naming and a reduced scan's reading each ask for the same track's page: one answer."""
    rng = np.random.default_rng(5)
    gray = np.full((120, 400), 235, dtype=np.uint8)
    gray[60:, :] = 180  # a darker lower half: two tracks of different paper
    gray[:, ::7] = rng.integers(0, 255, size=(120, 58), dtype=np.uint8)
    scan = ScanPixels(gray)
    upper, lower = page_of(scan, 5.0, 55.0), page_of(scan, 65.0, 115.0)
    assert page_of(scan, 5.0, 55.0) is upper and page_of(scan, 65.0, 115.0) is lower
    assert not np.array_equal(upper.paper, lower.paper), "each track keeps its own page"
    fresh = page_of(ScanPixels(gray.copy()), 65.0, 115.0)
    assert all(np.array_equal(getattr(fresh, k), getattr(lower, k)) for k in ("paper", "grid_cols", "grid_rows"))
