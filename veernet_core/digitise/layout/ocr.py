"""Printed text read by Tesseract (Debian's `tesseract-ocr` with `tesseract-ocr-eng`), run as a program.

One run reads many crops: they are scaled to a common text height and stacked on one sheet with wide gaps,
then each word Tesseract finds is handed back to the crop it lies in, in that crop's pixels. A page's
depth numbers are a hundred small labels; one process for all of them costs a fraction of a second where
one per label would cost several seconds. Tesseract runs on one thread (OMP_THREAD_LIMIT=1): the analysis
is sized for one core.
"""

from __future__ import annotations

import csv
import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

# Where Debian, Homebrew and a source build put it. Looked up here rather than on PATH: veernet_core reads
# no environment; a caller that knows better passes its own path.
TESSERACT_PATHS = ("/usr/bin/tesseract", "/usr/local/bin/tesseract", "/opt/homebrew/bin/tesseract")
TEXT_PX = 36  # Tesseract reads best with capitals some 30-40 px tall
GAP_PX = 40
MAX_SCALE = 4.0
TIMEOUT_S = 60.0


class OcrUnavailable(RuntimeError):
    """Tesseract is not installed, or failed; the text it would have read is left empty."""


@dataclass(frozen=True)
class Word:
    text: str
    confidence: float  # Tesseract's, 0..1
    left: float  # in the crop's pixels
    top: float
    width: float
    height: float
    line: int  # Tesseract's line number within its block: words of one crop with the same line are a line


def find_tesseract(path: str | None = None) -> str | None:
    candidates = (path,) if path else TESSERACT_PATHS
    return next((c for c in candidates if c and Path(c).is_file()), None)


def read_crops(crops: list[np.ndarray], text_heights: list[float], ink_below: int, whitelist: str | None, psm: int = 6,
               tesseract: str | None = None, soft: bool = False) -> list[list[Word]]:
    """The words in each crop (uint8, paper bright), each crop first scaled so that its text, `text_heights`
    pixels tall, becomes TEXT_PX, then made black on white at the page's ink threshold: left gray, the
    paper's grain is what Tesseract reads. `whitelist` limits the characters (digits for depth numbers); it
    is best left out for words and punctuation, whose segmentation it upsets. Raises OcrUnavailable when
    Tesseract cannot be run. `soft` keeps the ink's gray edges (scaled bilinearly) instead: a second reading
    of the same text, whose errors are not the first one's."""
    program = find_tesseract(tesseract)
    if program is None:
        raise OcrUnavailable("Tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-eng)")
    if not crops:
        return []
    sheet, placed = _sheet(crops, text_heights, ink_below, soft)
    words = _run(program, sheet, whitelist, psm)
    found: list[list[Word]] = [[] for _ in crops]
    for word, key in words:
        middle = word.top + word.height / 2
        for k, (y, scale, height) in enumerate(placed):
            if y - GAP_PX / 2 <= middle < y + height + GAP_PX / 2:
                found[k].append(Word(word.text, word.confidence, (word.left - GAP_PX) / scale, (word.top - y) / scale,
                                     word.width / scale, word.height / scale, key))
                break
    return found


def read_twice(crops: list[np.ndarray], text_heights: list[float], ink_below: int, whitelist: str | None,
               tesseract: str | None = None) -> tuple[list[list[Word]], list[list[Word]]]:
    """The words in each crop read twice (`read_crops`), sharp and then `soft`: two readings whose errors are not
    each other's, a field being kept where they agree."""
    return (read_crops(crops, text_heights, ink_below, whitelist, tesseract=tesseract),
            read_crops(crops, text_heights, ink_below, whitelist, tesseract=tesseract, soft=True))


def joined(words: list[Word]) -> tuple[str, float]:
    """Words read as one: their texts joined left to right, and the least of their confidences (0 for none)."""
    return ("".join(word.text for word in sorted(words, key=lambda w: w.left)),
            min((word.confidence for word in words), default=0.0))


def _sheet(crops: list[np.ndarray], text_heights: list[float], ink_below: int,
           soft: bool = False) -> tuple[Image.Image, list[tuple[int, float, int]]]:
    """The crops scaled, thresholded and stacked; per crop its top row on the sheet, its scale and its scaled
    height."""
    scaled = []
    for crop, text in zip(crops, text_heights, strict=True):
        scale = float(np.clip(TEXT_PX / max(text, 1.0), 0.5, MAX_SCALE))
        size = (max(1, round(crop.shape[1] * scale)), max(1, round(crop.shape[0] * scale)))
        resample = Image.Resampling.BILINEAR if soft else Image.Resampling.LANCZOS
        resized = np.asarray(Image.fromarray(crop).resize(size, resample)).astype(np.float32)
        inked = np.clip(resized * np.float32(200 / max(ink_below, 1)), 0, 255) if soft else 0
        scaled.append((Image.fromarray(np.where(resized < ink_below, inked, 255).astype(np.uint8)), scale))
    width = max(image.width for image, _ in scaled) + 2 * GAP_PX
    height = sum(image.height for image, _ in scaled) + GAP_PX * (len(scaled) + 1)
    sheet = Image.new("L", (width, height), 255)
    placed, y = [], GAP_PX
    for image, scale in scaled:
        sheet.paste(image, (GAP_PX, y))
        placed.append((y, scale, image.height))
        y += image.height + GAP_PX
    return sheet, placed


def _run(program: str, sheet: Image.Image, whitelist: str | None, psm: int) -> list[tuple[Word, int]]:
    """Tesseract's words on the sheet, in sheet pixels, with a line key unique across the sheet."""
    png = io.BytesIO()
    sheet.save(png, format="PPM")  # uncompressed: encoding a PNG of the sheet took longer than reading it
    limit = ["-c", f"tessedit_char_whitelist={whitelist}"] if whitelist else []
    command = [program, "stdin", "stdout", "--psm", str(psm), "--dpi", "300", "-l", "eng", *limit, "tsv"]
    try:
        done = subprocess.run(command, input=png.getvalue(), capture_output=True, timeout=TIMEOUT_S, check=False,
                              env={"OMP_THREAD_LIMIT": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OcrUnavailable(f"Tesseract could not be run: {exc}") from exc
    if done.returncode != 0:
        raise OcrUnavailable(f"Tesseract failed: {done.stderr.decode(errors='replace').strip()[:200]}")
    try:
        return _parse_tsv(done.stdout.decode("utf-8", errors="replace"))
    except (KeyError, ValueError, TypeError) as exc:
        raise OcrUnavailable(f"Tesseract's output could not be read ({exc}); is it version 4 or later?") from exc


def _parse_tsv(text: str) -> list[tuple[Word, int]]:
    words = []
    for row in csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") != "5" or not (row.get("text") or "").strip():
            continue
        key = int(row["block_num"]) * 1_000_000 + int(row["par_num"]) * 1_000 + int(row["line_num"])
        word = Word(row["text"].strip(), max(0.0, float(row["conf"])) / 100, float(row["left"]), float(row["top"]),
                    float(row["width"]), float(row["height"]), key)
        words.append((word, key))
    return words
