"""Page layout analysis of an uploaded scan, FastAPI-free: the upload's limits, a bound on analyses running at
once in this process, and the proposal from veernet_core.digitise.layout.

The analysis runs inside the request, not as a queued job like POST /segment: it needs no model and no GPU,
takes a second or two on an ordinary page (at most about 3 s on a 2,000 x 30,000 px one on one core, see
bench/README.md), and its answer is a small JSON document the user edits at once. A queue would add a job
row, a stored upload, a worker round trip and polling to that. What it costs the API process is bounded:
at most ANALYSE_CONCURRENCY analyses run at once per process (each holds the page a few times over in
memory, some 0.3 GB for a 60 Mpx page); a request beyond that is answered 503 with Retry-After at once.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from api.errors import ServiceError
from api.segment import SegmentInputError
from api.settings import Settings
from veernet_core.digitise.layout.page import DPI_RANGE
from veernet_core.digitise.layout.proposal import propose_calibration
from veernet_core.digitise.predict import ImageRejected, ImageTooLarge

RETRY_AFTER_S = 5


class AnalysisBusy(ServiceError):
    """Every analysis slot of this API process is taken."""

    status = 503


_slots_lock = threading.Lock()
_running = 0


def check_dpi(dpi: float | None) -> float | None:
    if dpi is None:
        return None
    if not (math.isfinite(dpi) and DPI_RANGE[0] <= dpi <= DPI_RANGE[1]):
        raise SegmentInputError("dpi", f"must be the scan's resolution in dots per inch, {DPI_RANGE[0]:g} to "
                                f"{DPI_RANGE[1]:g}, got {dpi:g}")
    return dpi


def analyse_upload(data: bytes, settings: Settings, dpi: float | None) -> dict[str, Any]:
    """The proposed calibration of one uploaded page; `dpi` overrides the file's own resolution tag."""
    if len(data) > settings.max_upload_bytes:
        raise SegmentInputError("file", f"the upload is {len(data)} bytes; the limit is {settings.max_upload_bytes} "
                                "bytes (MAX_UPLOAD_BYTES)", 413)
    _take_slot(settings)
    try:
        return propose_calibration(data, settings.max_image_pixels, dpi=check_dpi(dpi))
    except ImageTooLarge as exc:
        raise SegmentInputError("file", f"{exc} (MAX_IMAGE_PIXELS)", 413) from exc
    except ImageRejected as exc:
        raise SegmentInputError("file", f"{exc}") from exc
    finally:
        _give_slot()


def _take_slot(settings: Settings) -> None:
    global _running
    with _slots_lock:
        if _running >= settings.analyse_concurrency:
            raise AnalysisBusy(f"{_running} page analyses are running in this API process, the most allowed "
                               f"(ANALYSE_CONCURRENCY); retry in {RETRY_AFTER_S} s",
                               headers={"Retry-After": str(RETRY_AFTER_S)})
        _running += 1


def _give_slot() -> None:
    global _running
    with _slots_lock:
        _running -= 1
