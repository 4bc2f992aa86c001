"""Every hyper-parameter of VeerNet training, in one place, each with the reason for its default.

Configs are plain dataclasses of primitives so that they travel through JSON (the job API), YAML
(the command line) and checkpoints loaded with ``torch.load(weights_only=True)``.
``from_dict`` validates every field and reports *all* bad fields at once, each with its allowed range.
Whoever runs the training may tighten a field's upper bound (a service's own limits, ``caps``): the
message then names the one range that applies, and where its maximum comes from.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veernet_core.synth_factors import exclusion_errors

Caps = Mapping[str, tuple[float, str]]  # {dotted field: (a tighter maximum, the name of what sets it)}


class ConfigError(ValueError):
    """One or more config fields are invalid; ``errors`` maps a dotted field name to what to fix."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        lines = "; ".join(f"{name}: {message}" for name, message in errors.items())
        super().__init__(f"invalid config: {lines}")


@dataclass(frozen=True)
class ModelConfig:
    """The network's shape. Saved inside every checkpoint: enough to rebuild the model for inference."""

    in_channels: int = 1  # scans are grayscale
    num_classes: int = 3  # 2 = binary (one sigmoid logit); 3 = background + two curves (softmax)
    # Channels of the stem (full resolution) and of the five stride-2 stages (a 32x downsample);
    # the last one is the transformer bottleneck width. Narrow early stages keep full-width
    # activations affordable on 12,800-px logs.
    widths: tuple[int, ...] = (16, 24, 32, 48, 64, 128)
    transformer_layers: int = 2  # long-range context along depth at 1/32 resolution
    transformer_heads: int = 4  # 128 / 4 = 32-dim heads
    transformer_ff: int = 256  # 2x the bottleneck width: the bottleneck is tiny, no need for 4x
    grad_checkpointing: bool = False  # trade ~30 % more compute for far less activation memory

    @property
    def out_channels(self) -> int:
        return 1 if self.num_classes == 2 else self.num_classes


@dataclass(frozen=True)
class DataConfig:
    """What to train on."""

    kind: str = "synth"  # "synth": generated logs; "manifest": user-labelled image/mask pairs
    dataset_size: int = 15_000  # the engagement's multiclass set; 2,000 for the binary one
    scale: float = 1.0  # shrinks every synthetic log; 1.0 = 3,200-12,800 x 480-640 px
    classes: int = 3  # 2 = binary (every curve's ink vs background); 3 = legacy order classes (synth.py)
    seed: int = 0  # data identity: the same seed gives the same logs and the same split
    val_fraction: float = 0.2  # the engagement's 80/20 split
    manifest_url: str = ""  # local folder or s3://bucket/prefix holding manifest.json (kind="manifest")
    # Synthetic factor levels never generated (synth_factors.EXCLUDABLE), e.g. ("dotted",): a
    # leave-one-out model, to measure how a model does on a kind of paper it never saw.
    exclude: tuple[str, ...] = ()
    # Share of the items cut from generated full pages (veernet_core.page_dataset: a track of a page drawn at
    # 150-400 dpi, cut out and brought to `scale` as the service reads a page); the rest are synthetic logs.
    page_share: float = 0.0

    @property
    def page_items(self) -> int:
        """How many of the `dataset_size` items are page tracks (the last ones)."""
        return round(self.dataset_size * self.page_share)


@dataclass(frozen=True)
class TrainConfig:
    """How to train. ``lr`` is per 16 images and scales linearly with the effective batch."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    epochs: int = 50  # the engagement's schedule for both stages
    effective_batch: int = 16  # images per optimiser step, whatever physical batch fits in memory
    lr: float = 1e-3  # AdamW at batch 16; linear scaling rule for other effective batches
    weight_decay: float = 0.01  # mild: the model is small and synthetic data is plentiful
    warmup_steps: int = 100  # linear warm-up steadies the transformer's early updates
    min_lr_ratio: float = 0.05  # cosine floor, as a fraction of the peak
    grad_clip: float = 1.0  # thin-bed spikes give occasional large gradients
    tversky_alpha: float = 0.3  # false-positive weight: foreground is sparse, so missing ink costs more
    tversky_beta: float = 0.7  # false-negative weight
    pixel_loss_weight: float = 1.0  # per-pixel BCE / cross-entropy beside Dice / Tversky: steadier early
    seed: int = 0  # model initialisation; data order is a pure function of (seed, epoch)
    device: str = "auto"  # auto = cuda if available, else cpu
    amp: str = "auto"  # auto = bf16 where supported, else fp16 with a grad scaler; CUDA only; "off"
    pixel_budget: int = 0  # padded pixels per physical batch; 0 = from the measured memory model
    max_physical_batch: int = 16  # never more images per forward pass than this
    memory_fraction: float = 0.8  # share of device memory the pixel budget may plan for
    # DataLoader workers rendering logs ahead of the step; -1 = auto: on CUDA min(4, CPUs - 1), fewer if
    # their batches would fill over a quarter of /dev/shm (an H100 trains faster than one core renders);
    # none on the CPU (they would take its cores).
    num_workers: int = -1
    pin_memory: bool = True  # only takes effect on CUDA
    prefetch_factor: int = 2  # batches each worker prepares ahead
    checkpoint_every_steps: int = 0  # 0 = only at epoch end (and on SIGTERM)
    checkpoint_every_minutes: float = 0.0  # 0 = off; bounds redone work on slow epochs
    keep_last: int = 3  # checkpoints kept besides the best one
    validate_every_epochs: int = 1  # validation metrics feed the best-checkpoint choice
    # The weights a fresh run starts from: "random" (from `seed`), or "bundled": the model shipped with the
    # package (veernet_core/assets), to fine-tune it; its network (`model`) must then be the bundled one's.
    init: str = "random"

    @property
    def scaled_lr(self) -> float:
        return self.lr * self.effective_batch / 16

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["model"]["widths"] = list(self.model.widths)
        data["data"]["exclude"] = list(self.data.exclude)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, caps: Caps | None = None) -> TrainConfig:
        """Build and validate a config; unknown keys and bad values raise one ConfigError listing all.

        ``caps`` lowers fields' maxima, e.g. ``{"epochs": (200, "MAX_EPOCHS")}``: an epochs of -1 or 500
        is then "must be from 1 to 200 (MAX_EPOCHS)", one range for both ends.
        """
        data = dict(data or {})
        errors: dict[str, str] = {}
        model = _build(ModelConfig, data.pop("model", {}), "model", errors)
        data_cfg = _build(DataConfig, data.pop("data", {}), "data", errors)
        top = _build(cls, data, "", errors, model=model, data=data_cfg)
        if top is not None:
            errors.update(validate(top, caps))
        if errors or top is None:
            raise ConfigError(errors)
        return top


RANGES: dict[str, tuple[float, float]] = {
    "model.in_channels": (1, 1),
    "model.num_classes": (2, 3),
    "model.transformer_layers": (0, 8),
    "model.transformer_heads": (1, 16),
    "model.transformer_ff": (8, 4096),
    "data.dataset_size": (2, 1_000_000),
    "data.scale": (0.01, 1.0),
    "data.classes": (2, 3),
    "data.seed": (0, 2**31 - 1),
    "data.val_fraction": (0.0, 0.5),
    "data.page_share": (0.0, 0.9),
    "epochs": (1, 1000),
    "effective_batch": (1, 1024),
    "lr": (1e-7, 1.0),
    "weight_decay": (0.0, 1.0),
    "warmup_steps": (0, 1_000_000),
    "min_lr_ratio": (0.0, 1.0),
    "grad_clip": (0.0, 1e6),
    "tversky_alpha": (0.0, 1.0),
    "tversky_beta": (0.0, 1.0),
    "pixel_loss_weight": (0.0, 10.0),
    "seed": (0, 2**31 - 1),
    "pixel_budget": (0, 10**10),
    "max_physical_batch": (1, 1024),
    "memory_fraction": (0.05, 0.98),
    "num_workers": (-1, 64),
    "prefetch_factor": (1, 64),
    "checkpoint_every_steps": (0, 10**9),
    "checkpoint_every_minutes": (0.0, 10_000.0),
    "keep_last": (1, 1000),
    "validate_every_epochs": (1, 1000),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "data.kind": ("synth", "manifest"),
    "device": ("auto", "cpu", "cuda"),
    "amp": ("auto", "bf16", "fp16", "off"),
    "init": ("random", "bundled"),
}


def allowed_range(name: str, caps: Caps | None = None) -> tuple[float, float, str]:
    """(low, high, where high comes from: "" for this module's own range) of the dotted field ``name``."""
    low, high = RANGES[name]
    cap, source = (caps or {}).get(name, (high, ""))
    return (low, cap, source) if cap <= high else (low, high, "")


def validate(config: TrainConfig, caps: Caps | None = None) -> dict[str, str]:
    """Range and consistency checks within RANGES, maxima lowered by ``caps``; returns {dotted field: what to fix}."""
    errors: dict[str, str] = {}
    for name in RANGES:
        low, high, source = allowed_range(name, caps)
        value = _get(config, name)
        if not low <= value <= high:
            errors[name] = f"must be from {low:g} to {high:g}{f' ({source})' if source else ''}, got {value!r}"
    for name, choices in CHOICES.items():
        value = _get(config, name)
        if value not in choices:
            errors[name] = f"must be one of {', '.join(choices)}, got {value!r}"
    widths = config.model.widths
    if len(widths) != 6 or any(not 4 <= w <= 1024 for w in widths):
        errors["model.widths"] = "must be 6 channel counts (stem + five stride-2 stages), each 4 to 1024"
    elif (config.model.transformer_layers and "model.transformer_heads" not in errors  # 0 heads: reported above
          and widths[-1] % config.model.transformer_heads):
        errors["model.transformer_heads"] = f"must divide the bottleneck width {widths[-1]}"
    if config.model.num_classes != config.data.classes:
        errors["model.num_classes"] = f"must equal data.classes ({config.data.classes})"
    if config.data.kind == "manifest" and not config.data.manifest_url:
        errors["data.manifest_url"] = "is required when data.kind is 'manifest'"
    errors.update(_exclude_errors(config.data))
    if config.data.page_share and config.data.kind != "synth":
        errors["data.page_share"] = "applies to generated data only (data.kind 'synth'); leave it 0"
    elif config.data.page_share and config.data.classes != 2:
        errors["data.page_share"] = "pages mark every curve's ink alike: needs data.classes 2"
    if config.init == "bundled":
        errors.update(_bundled_errors(config.model))
    if errors.keys() & {"effective_batch", "data.dataset_size", "data.val_fraction"}:
        return errors  # the rule below needs all three valid (an out-of-range fraction may not even round)
    n_train = config.data.dataset_size - round(config.data.dataset_size * config.data.val_fraction)
    if n_train < config.effective_batch:
        errors["data.dataset_size"] = (
            f"leaves {n_train} training images, fewer than effective_batch ({config.effective_batch})"
        )
    return errors


def _exclude_errors(data: DataConfig) -> dict[str, str]:
    if not data.exclude:
        return {}
    if data.kind != "synth":
        return {"data.exclude": "applies to synthetic data only (data.kind 'synth'); leave it empty"}
    problems = exclusion_errors(data.exclude)
    return {"data.exclude": "; ".join(problems)} if problems else {}


BUNDLED_RECIPE = Path(__file__).resolve().parent / "assets" / "bundled-config.json"


def _bundled_errors(model: ModelConfig) -> dict[str, str]:
    """What keeps `model` from starting from the bundled model's weights (init "bundled"): every field of
    its network must be the bundled one's (assets/bundled-config.json)."""
    recipe: dict[str, Any] = json.loads(BUNDLED_RECIPE.read_text())["model"]
    bundled = dataclasses.replace(ModelConfig(), **{**recipe, "widths": tuple(recipe["widths"])})
    return {f"model.{f.name}": f"must be the bundled model's {getattr(bundled, f.name)!r} with init 'bundled', "
            f"got {getattr(model, f.name)!r}"
            for f in dataclasses.fields(ModelConfig)
            if f.name != "grad_checkpointing" and getattr(model, f.name) != getattr(bundled, f.name)}


def _get(config: TrainConfig, dotted: str) -> Any:
    target: Any = config
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def _build(cls: type, raw: Any, prefix: str, errors: dict[str, str], **fixed: Any) -> Any:
    """Instantiate a config dataclass from a dict, recording type errors and unknown keys."""
    where = f"{prefix}." if prefix else ""
    if not isinstance(raw, dict):
        errors[prefix or "config"] = "must be an object"
        return None
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known or key in fixed:
            errors[f"{where}{key}"] = f"unknown field; allowed: {', '.join(sorted(known))}"
            continue
        coerced = _coerce(known[key].type, value)
        if coerced is _BAD:
            errors[f"{where}{key}"] = f"must be of type {known[key].type}, got {value!r}"
        else:
            kwargs[key] = coerced
    if any(v is None for v in fixed.values()):
        return None
    return cls(**kwargs, **fixed)


_BAD = object()


def _coerce(type_name: Any, value: Any) -> Any:
    """Strict JSON-ish coercion: ints accept integral numbers, floats accept ints; bools are never numbers."""
    name = str(type_name)
    if name == "bool":
        return value if isinstance(value, bool) else _BAD
    if isinstance(value, bool):
        return _BAD
    if name == "int":
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
        return _BAD
    if name == "float":
        return float(value) if isinstance(value, int | float) and value == value else _BAD
    if name == "str":
        return value if isinstance(value, str) else _BAD
    if name == "tuple[str, ...]":
        return tuple(value) if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value) else _BAD
    if name.startswith("tuple"):
        if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        return _BAD
    return _BAD
