"""Command line: ``python -m veernet_core train|synth|digitise``. No services needed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veernet_core.checkpoint import LocalStore
from veernet_core.config import ConfigError, TrainConfig
from veernet_core.digitise.predict import DEFAULT_MAX_PIXELS, DEFAULT_OVERLAP, DEFAULT_TILE_WIDTH
from veernet_core.progress import Progress, TrainCallbacks

if TYPE_CHECKING:
    from veernet_core.model import VeerNet


class ProgressBar(TrainCallbacks):
    """A tqdm bar over all optimiser steps: epoch, step, images/s, loss and ETA."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=0, unit="step", dynamic_ncols=True, file=sys.stderr)

    def on_progress(self, p: Progress) -> None:
        self.bar.total = p.total_steps
        self.bar.n = p.global_step
        eta = f"{p.eta_s:.0f}s" if p.eta_s is not None else "?"
        self.bar.set_postfix_str(f"epoch {min(p.epoch + 1, p.epochs)}/{p.epochs} step {p.step}/{p.steps_per_epoch} "
                                 f"{p.images_per_s:.1f} img/s loss {p.loss:.4f} {p.phase} eta {eta}")

    def on_resume(self, ref: Any, skipped: list[Any]) -> None:
        for bad, why in skipped:
            self.bar.write(f"skipped checkpoint {bad.key}: {why}", file=sys.stderr)
        self.bar.write(f"resumed from {ref.key} (epoch {ref.epoch}, step {ref.step})", file=sys.stderr)

    def on_checkpoint(self, ref: Any) -> None:
        self.bar.write(f"checkpoint {ref.key} ({ref.size} bytes, sha256 {ref.sha256[:12]}...)", file=sys.stderr)


def _config(args: argparse.Namespace) -> TrainConfig:
    raw: dict[str, Any] = {}
    if args.config:
        text = Path(args.config).read_text()
        if args.config.endswith((".yaml", ".yml")):
            import yaml

            raw = yaml.safe_load(text) or {}
        else:
            raw = json.loads(text)
    data = raw.setdefault("data", {})
    model = raw.setdefault("model", {})
    overrides = {"epochs": args.epochs, "seed": args.seed, "device": args.device,
                 "checkpoint_every_steps": args.checkpoint_every_steps,
                 "effective_batch": args.effective_batch}
    raw.update({k: v for k, v in overrides.items() if v is not None})
    data.update({k: v for k, v in {"dataset_size": args.dataset_size, "scale": args.scale,
                                   "classes": args.classes}.items() if v is not None})
    if "classes" in data:
        model.setdefault("num_classes", data["classes"])
    return TrainConfig.from_dict(raw)


def cmd_train(args: argparse.Namespace) -> int:
    from veernet_core.train import train

    config = _config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    result = train(config, LocalStore(out), ProgressBar())
    print(json.dumps({"status": result.status, "reason": result.reason, "epoch": result.epoch,
                      "global_step": result.global_step, "best_metric": result.best_metric,
                      "last_checkpoint": result.last_checkpoint.key if result.last_checkpoint else None,
                      "history": result.history}))
    return 0 if result.status == "completed" else 3


def cmd_synth(args: argparse.Namespace) -> int:
    from veernet_core.synth import write_samples

    paths = write_samples(Path(args.out), args.n, seed=args.seed, scale=args.scale, classes=args.classes,
                          exclude=tuple(args.exclude))
    print(f"wrote {len(paths)} files to {args.out}")
    return 0


def cmd_digitise(args: argparse.Namespace) -> int:
    from veernet_core.digitise.export import RESULT_FILES, result_warnings
    from veernet_core.digitise.pipeline import ScanOptions, digitise_scan
    from veernet_core.digitise.predict import bundled_model_path, load_model, read_checkpoint

    def model() -> tuple[VeerNet, str]:
        data, sha256 = read_checkpoint(args.checkpoint or bundled_model_path())
        return load_model(data)[0], sha256

    options = ScanOptions(scan_scale=args.scan_scale, rotate_portrait=args.rotate_portrait,
                          scan_name=Path(args.scan).name, max_pixels=args.max_pixels, tile_width=args.tile_width,
                          overlap=args.overlap)
    model_id = "file/" + Path(args.checkpoint).name if args.checkpoint else "bundled/veernet-small"
    result = digitise_scan(Path(args.scan).read_bytes(), _calibration_file(Path(args.calibration)), model,
                           model_id, options)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in result.files.items():
        (out / RESULT_FILES[name].file_name).write_bytes(data)
    curves = result.curves
    print(json.dumps({"out": str(out), "model_sha256": result.model_sha256, "samples": int(curves.depth.size),
                      "inference": result.resampling.to_dict(),
                      "found": {c.mnemonic: round(float((c.values == c.values).mean()), 4) for c in curves.curves},
                      "identity": {c.mnemonic: c.identity for c in curves.curves},
                      "warnings": result_warnings(curves)}))
    return 0


def _calibration_file(path: Path) -> dict[str, Any]:
    """A calibration from JSON or YAML; a file of whole POST /segment options (examples/) gives its calibration."""
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    return data["calibration"] if isinstance(data, dict) and "calibration" in data else data


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m veernet_core", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train into a directory, resuming if it holds checkpoints")
    t.add_argument("--out", required=True, help="directory for checkpoints")
    t.add_argument("--config", help="JSON or YAML training config (see veernet_core/config.py)")
    t.add_argument("--epochs", type=int)
    t.add_argument("--dataset-size", type=int)
    t.add_argument("--scale", type=float, help="shrinks the synthetic logs (1.0 = full size)")
    t.add_argument("--classes", type=int, choices=(2, 3))
    t.add_argument("--seed", type=int)
    t.add_argument("--device", choices=("auto", "cpu", "cuda"))
    t.add_argument("--effective-batch", type=int)
    t.add_argument("--checkpoint-every-steps", type=int)
    t.set_defaults(run=cmd_train)
    s = sub.add_parser("synth", help="write synthetic logs, masks and ground truth to look at")
    s.add_argument("--n", type=int, default=8)
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--scale", type=float, default=1.0)
    s.add_argument("--classes", type=int, default=2, choices=(2, 3),
                   help="2: every curve's ink is 1; 3: legacy order classes (first curve 1, the others 2)")
    s.add_argument("--exclude", nargs="*", default=[], metavar="LEVEL",
                   help="factor levels never drawn (see veernet_core/synth_factors.py EXCLUDABLE), e.g. dotted bilevel")
    s.set_defaults(run=cmd_synth)
    d = sub.add_parser("digitise", help="digitise a scanned log into JSON, CSV, LAS 2.0, a mask and an overlay")
    d.add_argument("scan", help="PNG, TIFF or JPEG scan; depth along the width")
    d.add_argument("--calibration", required=True,
                   help="JSON or YAML: depth {top, bottom, unit} or {ticks, unit}; curves [{mnemonic, left, right, "
                        "...}]; track_top, track_bottom, step (every field: docs/reference.md), or whole POST "
                        "/segment options holding it")
    d.add_argument("--out", required=True, help="directory for result.json/.csv/.las, mask.png, overlay.png")
    d.add_argument("--checkpoint", help="checkpoint file (default: the bundled model)")
    d.add_argument("--rotate-portrait", action="store_true", help="turn a portrait scan so depth runs along the width")
    d.add_argument("--scan-scale", type=float, help="the scan's pixel scale relative to full-resolution logs (1.0 = "
                   "480-640 px tall, about 300 dpi); default: its height over 560 px")
    d.add_argument("--max-pixels", type=int, default=DEFAULT_MAX_PIXELS,
                   help="the most pixels a scan may have; enlarging it for the model stops there too")
    d.add_argument("--tile-width", type=int, default=DEFAULT_TILE_WIDTH)
    d.add_argument("--overlap", type=int, default=DEFAULT_OVERLAP)
    d.set_defaults(run=cmd_digitise)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
