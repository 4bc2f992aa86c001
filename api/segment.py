"""Segment jobs, FastAPI-free: check an uploaded scan and its options, pick the model, queue the job.

The scan is checked here (format, size, pixels) so that a bad upload is a 4xx at once, never a
failed job later; a calibration is checked by veernet_core's own validators: `options.calibration` (one
cropped track) by veernet_core.digitise.calibration, `options.page_calibration` (one section of a full page,
the completed proposal of POST /scans/analyse) by veernet_core.digitise.section_calibration. Storage keys
are built from the job id only: nothing a user sends becomes part of a key.
"""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError
from sqlalchemy import select
from sqlalchemy.orm import Session

from api import jobs
from api.checkpoints import get_checkpoint
from api.errors import CheckpointNotFound, FieldErrors, JobNotFound, ServiceError
from api.models import LOCAL_TENANT, MAX_ID, Checkpoint, Job, JobStatus
from api.settings import Settings
from veernet_core.digitise.calibration import Calibration, CalibrationError
from veernet_core.digitise.calibration_fields import CALIBRATION_FIELDS
from veernet_core.digitise.export import RESULT_FILES
from veernet_core.digitise.rescale import check_scan_scale
from veernet_core.digitise.section_calibration import SectionCalibration
from veernet_core.digitise.section_fields import SECTION_FIELDS

MIN_SIDE = 32


class SegmentInputError(FieldErrors):
    """Bad input; ``field`` names what to fix and ``status`` is 413 for limits, else 422."""

    def __init__(self, field: str, message: str, status: int = 422) -> None:
        self.field = field
        super().__init__({field: message}, status)


class ResultNotReady(ServiceError):
    """A segment job's result was asked for before the job succeeded."""

    status = 409


def input_key(job_id: int) -> str:
    return f"segments/{int(job_id)}/input"


def result_key(job_id: int, name: str) -> str:
    return f"segments/{int(job_id)}/{RESULT_FILES[name].file_name}"


def result_paths(job_id: int) -> dict[str, str]:
    """Where GET serves each result file: the JSON at /jobs/{id}/result, the others under their file names."""
    return {name: f"/jobs/{int(job_id)}/" + ("result" if name == "result" else file.file_name)
            for name, file in RESULT_FILES.items()}


@dataclass(frozen=True)
class Scan:
    height: int  # after orientation: depth runs along the width
    width: int


def check_scan(data: bytes, settings: Settings, rotate_portrait: bool) -> Scan:
    """Decode the upload fully (a corrupt file is caught now), within the byte and pixel limits."""
    if len(data) > settings.max_upload_bytes:
        raise SegmentInputError("file", f"the upload is {len(data)} bytes; the limit is "
                                f"{settings.max_upload_bytes} bytes (MAX_UPLOAD_BYTES)", 413)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
        width, height = image.size
        if width * height > settings.max_image_pixels:
            raise SegmentInputError("file", f"the image is {width}x{height} = {width * height} pixels; the limit "
                                    f"is {settings.max_image_pixels} pixels (MAX_IMAGE_PIXELS)", 413)
        image.load()
    except Image.DecompressionBombError as exc:
        raise SegmentInputError("file", f"the image claims more pixels than allowed: {exc}; the limit is "
                                f"{settings.max_image_pixels} pixels (MAX_IMAGE_PIXELS)", 413) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise SegmentInputError("file", f"not a readable image ({exc.__class__.__name__}); send a PNG, TIFF "
                                "or JPEG scan") from exc
    if width < MIN_SIDE or height < MIN_SIDE:
        raise SegmentInputError("file", f"the image is {width}x{height} px; both sides must be at least "
                                f"{MIN_SIDE} px")
    if rotate_portrait and height > width:
        width, height = height, width
    return Scan(height, width)


def parse_options(raw: str | None) -> dict[str, Any]:
    if not raw:
        raise SegmentInputError("options", "is required: a JSON object with at least a calibration; see "
                                "GET /docs for POST /segment")
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SegmentInputError("options", f"is not valid JSON: {exc}") from exc
    if not isinstance(options, dict):
        raise SegmentInputError("options", "must be a JSON object")
    unknown = sorted(set(options) - {"model", "calibration", "page_calibration", "rotate_portrait", "well",
                                     "scan_scale"})
    if unknown:
        raise FieldErrors({f"options.{name}": "unknown option; allowed: model, calibration, page_calibration, "
                           "rotate_portrait, scan_scale, well" for name in unknown})
    if "page_calibration" in options and "calibration" in options:
        raise SegmentInputError("options.page_calibration", "give either calibration (one cropped track) or "
                                "page_calibration (one section of a full page), not both")
    if "page_calibration" in options and options.get("rotate_portrait"):
        raise SegmentInputError("options.rotate_portrait", "must be left out with page_calibration: its "
                                "orientation.turn says how the page is turned")
    if not isinstance(options.get("rotate_portrait", False), bool):
        raise SegmentInputError("options.rotate_portrait", "must be true or false")
    if options.get("scan_scale") is not None:
        try:
            options["scan_scale"] = check_scan_scale(options["scan_scale"])
        except ValueError as exc:
            raise SegmentInputError("options.scan_scale", str(exc)) from exc
    return options


def options_description() -> str:
    """POST /segment's `options` form field, for the OpenAPI schema: the options and every calibration field."""
    fields = "\n".join(f"- `{f.path}` ({f.summary}): {f.description}" for f in CALIBRATION_FIELDS)
    page = "\n".join(f"- `{f.path}` ({f.summary}): {f.description}" for f in SECTION_FIELDS)
    return ("JSON object: `calibration` (one cropped track, depth along the width) or `page_calibration` (one "
            "section of a full-page scan: the proposal of POST /scans/analyse completed, with `section` naming "
            "the section; one result and one LAS file hold every curve of its tracks), `model` "
            "({\"checkpoint_id\": n}, {\"job_id\": n} or omitted for the bundled model), `rotate_portrait` "
            "(calibration only), `scan_scale`, `well`. Calibration fields (docs/reference.md):\n" + fields
            + "\n\nPage calibration fields (any may be a {value, confidence, evidence} triple, read by its value; "
            "a null value is a field to fill in):\n" + page)


def check_calibration(options: dict[str, Any], scan: Scan) -> dict[str, Any]:
    """The options' calibration checked against the scan, as the job's config entry (`calibration` or
    `page_calibration`, in its plain checked form); every bad field is one entry of one 422."""
    if "page_calibration" in options:
        return {"page_calibration": _check_page_calibration(options["page_calibration"], scan)}
    return {"calibration": _check_track_calibration(options, scan)}


def _check_page_calibration(raw: Any, scan: Scan) -> dict[str, Any]:
    try:
        return SectionCalibration.from_dict(raw, scan.height, scan.width).to_dict()
    except CalibrationError as exc:
        raise FieldErrors({f"options.page_calibration.{name}": message for name, message in exc.errors.items()}
                          ) from exc


def _check_track_calibration(options: dict[str, Any], scan: Scan) -> dict[str, Any]:
    raw = options.get("calibration")
    if not isinstance(raw, dict):
        raise SegmentInputError("options.calibration", "is required: {depth: {top, bottom, unit} or "
                                "{ticks: [[col, depth], [col, depth]], unit}, curves: [{mnemonic, left, right, "
                                "...}], track_top, track_bottom, step}; see docs/reference.md")
    try:
        return Calibration.from_dict(raw, scan.height, scan.width).to_dict()
    except CalibrationError as exc:
        raise FieldErrors({f"options.calibration.{name}": message for name, message in exc.errors.items()}) from exc


def resolve_model(session: Session, raw: Any, tenant: str | None = None) -> dict[str, Any]:
    """{"checkpoint_id": n}, {"job_id": n} (its best, else newest, checkpoint) or absent (bundled).

    Only ``tenant``'s checkpoints can be named (None: any); another tenant's is not found, as if missing.
    """
    if raw is None or raw == {} or raw == "bundled":
        return {"source": "bundled", "model_id": "bundled/veernet-small"}
    name, value = next(iter(raw.items())) if isinstance(raw, dict) and len(raw) == 1 else ("", None)
    if name not in ("checkpoint_id", "job_id") or not isinstance(value, int) or isinstance(value, bool):
        raise SegmentInputError("options.model", 'must be {"checkpoint_id": n}, {"job_id": n} or omitted for '
                                "the bundled model")
    if not 1 <= value <= MAX_ID:  # no row has such an id, and the database would refuse to look
        raise JobNotFound(value) if name == "job_id" else CheckpointNotFound(value)
    if name == "checkpoint_id":
        row = get_checkpoint(session, value, tenant)  # CheckpointNotFound -> 404
        return _from_row(row, f"checkpoint/{row.id}")
    job = jobs.get_job(session, value)  # JobNotFound -> 404
    if tenant is not None and job.tenant != tenant:
        raise JobNotFound(value)
    rows = session.scalars(select(Checkpoint).where(Checkpoint.job_id == value).order_by(
        Checkpoint.is_best.desc(), Checkpoint.global_step.desc()).limit(1)).all()
    if not rows:
        raise CheckpointNotFound(f"of job {value} (it has no committed checkpoint yet)")
    return _from_row(rows[0], f"job/{value}/checkpoint/{rows[0].id}")


def _from_row(row: Checkpoint, model_id: str) -> dict[str, Any]:
    return {"source": "checkpoint", "checkpoint_id": row.id, "storage_key": row.storage_key,
            "sha256": row.sha256, "model_id": model_id}


def create_segment_job(session: Session, options: dict[str, Any], model: dict[str, Any],
                       calibration: dict[str, Any], filename: str, tenant: str = LOCAL_TENANT) -> Job:
    """`calibration`: the config entry `check_calibration` gives ({"calibration": ...} or {"page_calibration": ...})."""
    config = {"model": model, **calibration, "rotate_portrait": bool(options.get("rotate_portrait")),
              "scan_scale": options.get("scan_scale"), "well": str(options.get("well", ""))[:80],
              "scan": filename[:200]}
    return jobs.create_job(session, "segment", config, tenant)


def segment_job(session: Session, job_id: int, tenant: str | None = None) -> Job:
    """A segment job of ``tenant`` (None: any), or JobNotFound (a training job has no result)."""
    job = jobs.get_job(session, job_id)
    if job.kind != "segment" or (tenant is not None and job.tenant != tenant):
        raise JobNotFound(job_id)
    return job


def succeeded_job(session: Session, job_id: int, tenant: str | None = None) -> Job:
    """A segment job of ``tenant`` whose result can be read, or ResultNotReady saying what it is doing."""
    job = segment_job(session, job_id, tenant)
    if job.status != JobStatus.SUCCEEDED:
        hint = job.error or f"poll GET /jobs/{job_id} until it succeeds"
        raise ResultNotReady(f"segment job {job_id} is {job.status}: {hint}")
    return job


def finished(job: Job) -> bool:
    return job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
