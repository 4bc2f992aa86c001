"""The planner's arithmetic: layout against the real sampler, times, interruptions, Young's interval, costs, chart."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from veernet_core.config import TrainConfig
from veernet_core.data import padding_waste, split_indices
from veernet_core.memory import MemoryModel
from veernet_core.plan import (
    HOURS_PER_MONTH,
    Reliability,
    Throughput,
    Tier,
    buckets,
    expected_interruptions,
    finish_with_interruptions,
    hourly_rate,
    layout,
    make_plan,
    young_interval_s,
)
from veernet_core.plan_chart import BAR_Y, LEFT, RIGHT, WIDTH, render_svg
from veernet_core.sampler import BucketBatchSampler
from veernet_core.synth import log_size

CONFIG = TrainConfig.from_dict({"epochs": 3, "effective_batch": 4, "max_physical_batch": 4,
                                "data": {"dataset_size": 40, "scale": 0.05}})
SIZES = [log_size(0, i, 0.05) for i in range(40)]
MEMORY = MemoryModel("cpu", fixed_bytes=1e6, bytes_per_pixel=100.0, probe_pixels=(1, 2), probe_peaks=(1, 2))
SPEED = Throughput(train_px_per_s=2e5, val_px_per_s=8e5, checkpoint_s=0.5, startup_s=3.0, source="given")


def test_hourly_rate_spreads_the_monthly_rent_over_the_used_hours() -> None:
    assert hourly_rate(750, 1.0) == pytest.approx(750 / HOURS_PER_MONTH)
    assert hourly_rate(1800, 0.5) == pytest.approx(2 * 1800 / HOURS_PER_MONTH)
    with pytest.raises(ValueError, match="utilisation"):
        hourly_rate(750, 0.0)


def test_interruptions_cost_the_tax_plus_half_an_interval_each() -> None:
    assert finish_with_interruptions(1000.0, 0, 60.0, 200.0) == 1000.0
    assert finish_with_interruptions(1000.0, 3, 60.0, 200.0) == 1000.0 + 3 * (60 + 100)


def test_young_interval_balances_write_time_against_recompute() -> None:
    checkpoint_s, rate = 20.0, 1 / 3600
    tau = young_interval_s(checkpoint_s, rate)
    assert tau == pytest.approx(math.sqrt(2 * 20 * 3600))

    def waste(t: float) -> float:  # per second of work: writes, plus half an interval redone per failure
        return checkpoint_s / t + rate * t / 2

    assert tau is not None and waste(tau) < waste(tau * 1.2) and waste(tau) < waste(tau / 1.2)
    assert young_interval_s(checkpoint_s, 0.0) is None


def test_k_and_failure_rate_derive_from_each_other_over_the_compute_time() -> None:
    assert expected_interruptions(Reliability(None, 1, "", 0.5), 7200.0) == pytest.approx((1.0, 0.5 / 3600))
    assert expected_interruptions(Reliability(2.0, 1, "", None), 3600.0) == pytest.approx((2.0, 2 / 3600))
    assert expected_interruptions(Reliability(None, 1, "", None), 3600.0) == (0.0, 0.0)


def test_layout_is_the_samplers_own_plan() -> None:
    budget = 3 * 32 * 320
    lay = layout(CONFIG, SIZES, budget)
    train_idx, val_idx = split_indices(40, CONFIG.data.val_fraction, CONFIG.data.seed)
    sampler = BucketBatchSampler({i: SIZES[i] for i in train_idx}, 4, budget, 4, CONFIG.seed)
    micro = [mb for e in range(3) for s in sampler.epoch_steps(e) for mb in s.micro_batches]
    assert (lay.train_images, lay.val_images) == (len(train_idx), len(val_idx))
    assert lay.steps_per_epoch == sampler.steps_per_epoch == len(train_idx) // 4
    assert lay.micro_batches == len(micro) and lay.exact
    assert lay.padding_waste == pytest.approx(padding_waste(SIZES, micro))
    assert lay.accumulation_max >= 2  # the budget is too small for four of the larger logs at once
    assert lay.widest == max(SIZES, key=lambda hw: (hw[1], hw[0]))


def test_buckets_fit_their_largest_size_into_the_budget() -> None:
    budget = 2 * 32 * 640
    found = buckets(CONFIG, SIZES, budget, MEMORY)
    assert sum(b.images for b in found) == len(SIZES)
    for bucket in found:
        assert bucket.physical_batch == min(4, budget // (bucket.height_max * bucket.width_to))
        assert bucket.accumulation_steps == math.ceil(4 / bucket.physical_batch)
        pixels = bucket.physical_batch * bucket.height_max * bucket.width_to
        assert bucket.peak_mb == pytest.approx(MEMORY.peak_bytes(pixels) / 2**20)


def test_plan_times_follow_from_the_measured_rates() -> None:
    plan = make_plan(CONFIG, SIZES, device_class="cpu:test", memory=MEMORY, memory_bytes=2**30, memory_source="given",
                     speed=SPEED, reliability=Reliability(2.0, 30.0, "given"), window_s=600.0, utilisation=0.5,
                     tiers=(Tier("cheap", 100.0),))
    lay = layout(CONFIG, SIZES, MEMORY.pixel_budget(2**30 * CONFIG.memory_fraction))
    t = plan.time
    assert t["train_s"] == pytest.approx(lay.train_padded_px / 2e5)
    assert t["validation_s"] == pytest.approx(3 * lay.val_padded_px / 8e5)
    assert t["checkpoints"] == 3 and t["checkpoint_s"] == pytest.approx(1.5)
    assert t["compute_s"] == pytest.approx(3.0 + t["train_s"] + t["validation_s"] + 1.5)
    epoch_s = (t["train_s"] + t["validation_s"]) / 3
    assert plan.interruptions["finish_s"] == pytest.approx(t["compute_s"] + 2 * (30 + epoch_s / 2))
    assert plan.interruptions["fits_window"] == (plan.finish_s <= 600)
    assert plan.costs[2]["eur"] == pytest.approx(100 / (HOURS_PER_MONTH * 0.5) * plan.finish_s / 3600)
    assert [c["eur_per_month"] for c in plan.costs] == [750.0, 1800.0, 100.0]
    assert plan.memory["predicted_peak_mb"] == pytest.approx(MEMORY.peak_bytes(lay.largest_micro_batch_px) / 2**20)


def test_mid_epoch_checkpoints_shorten_the_interval_and_add_saves() -> None:
    config = TrainConfig.from_dict({**CONFIG.to_dict(), "checkpoint_every_steps": 2})
    plan = make_plan(config, SIZES, device_class="cpu:test", memory=MEMORY, memory_bytes=2**30, memory_source="",
                     speed=SPEED, reliability=Reliability(1.0, 0.0, ""), window_s=1e4, utilisation=1.0)
    steps = plan.data["steps_per_epoch"]
    assert plan.time["checkpoints"] == 3 * (1 + (steps - 1) // 2)
    assert plan.checkpointing["interval_s"] == pytest.approx(2 * plan.time["step_s"])


def test_a_log_wider_than_the_memory_is_reported() -> None:
    tiny = MemoryModel("cpu", fixed_bytes=0.0, bytes_per_pixel=1000.0, probe_pixels=(1, 2), probe_peaks=(1, 2))
    plan = make_plan(CONFIG, SIZES, device_class="x", memory=tiny, memory_bytes=1000.0 * 32 * 64, memory_source="",
                     speed=SPEED, reliability=Reliability(0.0, 0.0, ""), window_s=1e4, utilisation=1.0)
    assert plan.memory["widest_log"]["fits"] is False
    assert any("widest log" in w for w in plan.warnings)


def test_chart_draws_the_bar_to_scale_and_the_window_line() -> None:
    plan = make_plan(CONFIG, SIZES, device_class="cpu:<test>", memory=MEMORY, memory_bytes=2**30, memory_source="",
                     speed=SPEED, reliability=Reliability(2.0, 30.0, ""), window_s=60.0, utilisation=0.5).to_dict()
    root = ET.fromstring(render_svg(plan))  # well-formed, the device name escaped
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in root.iter(f"{ns}rect") if r.get("y") == str(BAR_Y)]
    total = sum(float(r.get("width", 0)) for r in bars)
    span_h = max(60.0, plan["interruptions"]["finish_s"]) * 1.08 / 3600
    assert total == pytest.approx(plan["interruptions"]["finish_s"] / 3600 * (WIDTH - LEFT - RIGHT) / span_h, rel=1e-3)
    window = [line for line in root.iter(f"{ns}line") if line.get("stroke-dasharray")]
    assert len(window) == 1
    expected_x = LEFT + (60 / 3600) * (WIDTH - LEFT - RIGHT) / span_h
    assert float(window[0].get("x1", 0)) == pytest.approx(expected_x, abs=0.01)
    assert "does NOT fit" in render_svg(plan)


def test_warm_ups_are_paid_once_and_the_peak_is_the_costliest_micro_batch_on_its_path() -> None:
    warm = Throughput(train_px_per_s=2e5, val_px_per_s=8e5, checkpoint_s=0.5, startup_s=3.0, source="given",
                      step_warmup_s=1.5, validation_warmup_s=0.25)
    masked = MemoryModel("cpu", fixed_bytes=1e6, bytes_per_pixel=100.0, probe_pixels=(1, 2), probe_peaks=(1, 2),
                         masked_bytes_per_pixel=50.0)
    plan = make_plan(CONFIG, SIZES, device_class="x", memory=masked, memory_bytes=2**30, memory_source="",
                     speed=warm, reliability=Reliability(0.0, 0.0, ""), window_s=1e4, utilisation=1.0)
    lay = layout(CONFIG, SIZES, masked.pixel_budget(2**30 * CONFIG.memory_fraction))
    assert plan.time["train_s"] == pytest.approx(lay.train_padded_px / 2e5 + 1.5)
    assert plan.time["validation_s"] == pytest.approx(3 * lay.val_padded_px / 8e5 + 0.25)
    assert warm.restart_s == 4.5
    peaks = {extents: masked.batch_peak_bytes(list(extents)) for extents in lay.micro_batch_extents}
    assert plan.memory["predicted_peak_mb"] == pytest.approx(max(peaks.values()) / 2**20)
    chosen = tuple(tuple(hw) for hw in plan.memory["peak_micro_batch"])
    assert chosen in peaks and peaks[chosen] == max(peaks.values())


def test_extreme_settings_keep_every_figure_finite() -> None:
    """A save 'every 1e-300 minutes' is a save after every step (the loop saves between steps), and a failure
    rate too small to tell gives no optimal interval: no infinity, so the plan is valid JSON (a fuzzer found both)."""
    import json

    config = TrainConfig.from_dict({**CONFIG.to_dict(), "checkpoint_every_minutes": 1e-300})
    plan = make_plan(config, SIZES, device_class="x", memory=MEMORY, memory_bytes=2**30, memory_source="",
                     speed=SPEED, reliability=Reliability(None, 1.0, "", 1e-320), window_s=1e-300,
                     utilisation=0.01)
    json.dumps(plan.to_dict(), allow_nan=False)
    assert plan.time is not None and plan.checkpointing is not None
    assert plan.time["checkpoints"] == 3 * plan.data["steps_per_epoch"]
    assert plan.checkpointing["interval_s"] == pytest.approx(plan.time["step_s"])
    assert plan.checkpointing["optimal_interval_s"] is None
