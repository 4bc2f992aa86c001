"""A scan made ready for layout analysis: decoded (any mode, one page), its resolution, then turned upright
and deskewed, with its ink separated from the paper.

Upright means portrait with the header at the top: depth runs down the page. `turn` is how far the scan
was turned clockwise to get there; the skew is measured on the track borders, the longest straight lines
on a log, and undone by a rotation about the page's centre. Every position the analysis reports is a
pixel of this upright, deskewed page.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

from veernet_core.digitise.predict import DEFAULT_MAX_PIXELS, ImageRejected, load_image

DPI_RANGE = (50.0, 2400.0)  # a resolution outside it is a placeholder in the file, not a scanner's
MAX_SKEW_DEG = 3.0


@dataclass(frozen=True)
class Scan:
    image: np.ndarray  # uint8 (H, W), paper bright, as stored
    dpi: float | None  # from the file's own resolution tag, when it holds a plausible one


def load_scan(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Scan:
    """Decode a scan of any mode (1-bit, 8 or 16-bit gray, palette, RGB, CMYK). A file of several pages is
    refused, naming how many it holds: each page is a scan of its own."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            header = Image.open(io.BytesIO(data))
        pages = int(getattr(header, "n_frames", 1))
        dpi = header.info.get("dpi")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        pages, dpi = 1, None  # load_image below says what is wrong with it
    if pages > 1:
        raise ImageRejected(f"the file holds {pages} pages; send one page per request (split it, e.g. with "
                            "`tiffsplit`, and analyse each page)")
    return Scan(load_image(data, max_pixels), _plausible_dpi(dpi))


def _plausible_dpi(dpi: object) -> float | None:
    if not isinstance(dpi, tuple | list) or not dpi:
        return None
    try:
        value = float(dpi[0])
    except (TypeError, ValueError):
        return None
    return value if DPI_RANGE[0] <= value <= DPI_RANGE[1] else None


def ink_threshold(image: np.ndarray) -> int:
    """Otsu's threshold between ink and paper, from every eighth row (plenty for a histogram)."""
    counts = np.bincount(image[::8].ravel(), minlength=256).astype(np.float64)
    levels = np.arange(256, dtype=np.float64)
    weight = np.cumsum(counts)
    mass = np.cumsum(counts * levels)
    total, total_mass = weight[-1], mass[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (total_mass * weight - total * mass) ** 2 / (weight * (total - weight))
    between[~np.isfinite(between)] = 0
    return int(np.clip(int(np.argmax(between)) + 1, 40, 230))


@dataclass(frozen=True)
class Skew:
    slope: float  # columns per row a vertical line drifts in the scan
    bands: int  # bands of rows whose borders agreed on it
    residual_px: float

    @property
    def degrees(self) -> float:
        """Counter-clockwise turn of the page on the scanner."""
        return math.degrees(math.atan(self.slope))


def measure_skew(ink: np.ndarray) -> Skew | None:
    """The drift of long vertical lines down the page. Neighbouring bands of rows give a rough drift per
    band; then each band's column profile is matched, near where that drift puts it, against the most
    line-rich band's, and a straight line through the shifts gives the slope. None when there are too few
    lines to tell."""
    height, width = ink.shape
    band = int(np.clip(height // 16, 64, 1024))
    if height // band < 3:
        return None
    profiles = np.stack([_sharp_profile(ink[k * band:(k + 1) * band]) for k in range(height // band)])
    reach = int(math.tan(math.radians(MAX_SKEW_DEG)) * band) + 2
    steps = [_shift(profiles[k], profiles[k + 1], -reach, reach) for k in range(profiles.shape[0] - 1)]
    agreed = [shift for shift, strength in steps if strength >= 0.5]
    if not agreed:
        return None
    per_band = float(np.median(agreed))
    reference = int(np.argmax((profiles**2).sum(axis=1)))
    offsets = (np.arange(profiles.shape[0]) - reference).astype(np.float64)
    matched = [_shift(profiles[reference], p, round(per_band * k) - 8, round(per_band * k) + 8)
               for p, k in zip(profiles, offsets.tolist(), strict=True)]
    shifts, strengths = (np.array(values) for values in zip(*matched, strict=True))
    centres = np.array([_line_centre(ink, k * band, band, p) for k, p in enumerate(profiles)])
    return _fit_shifts(centres, shifts, strengths)


def _line_centre(ink: np.ndarray, start: int, band: int, profile: np.ndarray) -> float:
    """The mean row of a band's line ink: its middle, unless the lines start or stop inside it."""
    columns = np.flatnonzero(profile >= 0.3 * profile.max()) if profile.max() > 0 else np.arange(0)
    if columns.size == 0:
        return start + (band - 1) / 2
    weights = ink[start:start + band][:, columns].sum(axis=1, dtype=np.float64)
    total = weights.sum()
    return start + (float((np.arange(band) * weights).sum() / total) if total else (band - 1) / 2)


def _sharp_profile(rows: np.ndarray) -> np.ndarray:
    """Ink per column, less its running mean over 9 columns: lines stay, text and curves mostly go."""
    profile = rows.sum(axis=0, dtype=np.float64) / max(rows.shape[0], 1)
    kernel = np.ones(9) / 9
    return np.clip(profile - np.convolve(profile, kernel, mode="same"), 0, None)


def _shift(reference: np.ndarray, profile: np.ndarray, lo: int, hi: int) -> tuple[float, float]:
    """How far `profile` lies right of `reference` (sub-pixel), searched over lags lo..hi, and the
    normalised correlation there."""
    size = reference.size * 2
    corr = np.fft.irfft(np.fft.rfft(profile, size) * np.conj(np.fft.rfft(reference, size)), size)
    lags = np.arange(lo, hi + 1)
    values = corr[lags % size]
    best = int(np.argmax(values))
    peak, lag = float(values[best]), float(lags[best])
    left, right = corr[(lags[best] - 1) % size], corr[(lags[best] + 1) % size]
    curvature = left - 2 * peak + right
    if curvature < 0:
        lag += 0.5 * (left - right) / curvature
    norm = math.sqrt(float((reference**2).sum() * (profile**2).sum())) or 1.0
    return lag, peak / norm


def _fit_shifts(centres: np.ndarray, shifts: np.ndarray, strengths: np.ndarray) -> Skew | None:
    """A straight line through the bands' shifts, by weighted least squares, dropping bands off it by more
    than 1.5 px (headers, blank stretches) and fitting again."""
    keep = strengths >= 0.5
    for _ in range(3):
        if keep.sum() < 3:
            return None
        slope, intercept = np.polyfit(centres[keep], shifts[keep], 1, w=strengths[keep])
        residual = np.abs(shifts - (slope * centres + intercept))
        keep = keep & (residual <= max(1.5, 3 * float(np.median(residual[keep]))))
    rms = float(np.sqrt(np.mean(residual[keep] ** 2)))
    return Skew(float(slope), int(keep.sum()), rms)


def deskew(image: np.ndarray, skew: Skew, paper: int) -> np.ndarray:
    """Undo the skew by a rotation about the page's centre, same size, the corners filled with paper. Nearest
    neighbour: a line's position is measured over hundreds of rows or columns, which average its half-pixel
    steps away, and it is four times faster than bilinear on a 60 Mpx page."""
    if abs(skew.degrees) < 1e-3:
        return image
    turned = Image.fromarray(image).rotate(-skew.degrees, Image.Resampling.NEAREST, fillcolor=paper)
    return np.asarray(turned, dtype=np.uint8)


def turn_clockwise(image: np.ndarray, degrees: int) -> np.ndarray:
    return np.ascontiguousarray(np.rot90(image, -(degrees // 90) % 4)) if degrees % 360 else image


def paper_level(image: np.ndarray, threshold: int) -> int:
    """The median gray of the paper (pixels lighter than the ink threshold)."""
    sample = image[::8, ::8]
    light = sample[sample >= threshold]
    return int(np.median(light)) if light.size else 255
