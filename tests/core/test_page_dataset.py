"""veernet_core.page_dataset: tracks of generated full pages as training items, cut and reduced as the
service's page path reads them; mixed with the generator's logs by `data.page_share`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from veernet_core.config import ConfigError, TrainConfig
from veernet_core.digitise.ink import MIN_DARKNESS, paper_gray
from veernet_core.digitise.rescale import resampling_for
from veernet_core.page_dataset import LogsAndPages, PageCropDataset, crop_item, page_spec, track_place, upright
from veernet_core.page_synth import generate_page
from veernet_core.synth_dataset import SynthDataset
from veernet_core.train import build_dataset

SEED = 31


def test_each_items_size_is_known_from_its_pages_layout_alone_and_the_items_repeat_bit_for_bit() -> None:
    pages = PageCropDataset(4, 0.2, SEED)
    sizes = pages.sizes()
    for i in range(4):
        item = pages[i]
        assert tuple(item["image"].shape) == (1, *sizes[i]) and tuple(item["mask"].shape) == sizes[i]
        assert item["index"] == i and item["mask"].dtype == torch.int64
    again = PageCropDataset(4, 0.2, SEED)[2]
    assert torch.equal(again["image"], pages[2]["image"]) and torch.equal(again["mask"], pages[2]["mask"])
    with pytest.raises(IndexError):
        pages[4]


def test_an_item_is_the_track_as_the_service_reads_it_and_its_mask_lies_on_the_curves_ink() -> None:
    """The crop is brought to the size the service brings a page's track to (the model's scale from the
    page's dpi), the mask marks each true curve along its path where the crop shows ink, and ink the mask
    leaves out is paper."""
    for index in range(3):
        page = generate_page(SEED, index)
        place = track_place(page.spec, SEED, index)
        image, mask = crop_item(page, place, 0.2)
        assert image.shape == resampling_for(place.crop.size, 0.2, page.spec.dpi / 300).model_size
        darkness = paper_gray(image)[None, :] - image.astype(np.float64)
        assert (darkness[mask > 0] >= MIN_DARKNESS / 3).all()
        # Off the curves' paths by a few rows the same columns are mostly paper: the mask is on the curves.
        beside = np.roll(mask > 0, 6, axis=0) & ~(mask > 0)
        assert np.median(darkness[beside]) < np.median(darkness[mask > 0]) / 3
        track = page.spec.sections[place.section].tracks[place.track]
        solid = [k for k, c in enumerate(track.curves) if c.style == "solid"]
        if solid:  # a solid curve's line is inked down its whole length: the mask holds it in most columns
            assert (mask.sum(axis=0) > 0).mean() > 0.8, f"page {index}"
        assert 0 < mask.mean() < 0.1


def test_a_page_is_made_upright_as_the_analysis_makes_it() -> None:
    """A page stored turned and skewed comes back with its section's frame lines where the layout put them."""
    for index in range(6):
        page = generate_page(SEED, index)
        spec = page.spec
        whole = upright(page)
        assert whole.shape == (spec.height, spec.width)
        section = spec.sections[0]
        track = section.tracks[0]
        cols = slice(int(track.left) + 10, int(track.right) - 10)
        top = int(round(section.top))
        frame = whole[top - 1:top + 2, cols].min(axis=0)  # the frame line within a pixel
        assert (frame < np.median(whole) - 40).mean() > 0.9, f"page {index}: turn {spec.scan.turn}"


def test_the_pages_sizes_come_without_drawing_a_page() -> None:
    spec = page_spec(SEED, 5)
    assert spec == generate_page(SEED, 5).spec


def test_page_share_mixes_pages_into_the_generated_logs() -> None:
    data = {"classes": 2, "dataset_size": 10, "scale": 0.2, "page_share": 0.3}
    config = TrainConfig.from_dict({"effective_batch": 4, "model": {"num_classes": 2}, "data": data})
    dataset = build_dataset(config)
    assert isinstance(dataset, LogsAndPages) and len(dataset) == 10
    assert len(dataset.logs) == 7 and len(dataset.pages) == 3
    sizes = dataset.sizes()
    assert sizes[:7] == SynthDataset(7, 0.2, 2, 0).sizes() and sizes[7:] == PageCropDataset(3, 0.2, 0).sizes()
    page_item = dataset[8]
    assert page_item["index"] == 8 and torch.equal(page_item["image"], PageCropDataset(3, 0.2, 0)[1]["image"])
    plain = TrainConfig.from_dict({"effective_batch": 4, "model": {"num_classes": 2},
                                   "data": {"classes": 2, "dataset_size": 10}})
    assert isinstance(build_dataset(plain), SynthDataset)


@pytest.mark.parametrize(("data", "field", "says"), [
    ({"page_share": 0.95}, "data.page_share", "from 0 to 0.9"),
    ({"page_share": 0.2, "kind": "manifest", "manifest_url": "/tmp/x"}, "data.page_share", "data.kind 'synth'"),
    ({"page_share": 0.2, "classes": 3}, "data.page_share", "data.classes 2"),
])
def test_a_page_share_that_cannot_be_met_is_refused_by_name(data: dict[str, object], field: str, says: str) -> None:
    classes = data.get("classes", 2)
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"model": {"num_classes": classes}, "data": {"classes": 2, **data}})
    assert says in caught.value.errors[field]


def test_the_planner_sizes_the_pages_as_the_run_draws_them() -> None:
    from veernet_core.plan_layout import synth_sizes

    data = {"classes": 2, "dataset_size": 10, "scale": 0.2, "page_share": 0.3}
    config = TrainConfig.from_dict({"effective_batch": 4, "model": {"num_classes": 2}, "data": data})
    assert synth_sizes(config).read(range(10)) == build_dataset(config).sizes()


def test_the_page_fine_tune_recipe_in_bench_starts_from_the_bundled_model() -> None:
    """bench/models/pages-finetune-config.json, the recipe of the fine-tune measured in bench/README.md."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    recipe = json.loads((root / "bench" / "models" / "pages-finetune-config.json").read_text())
    bundled = json.loads((root / "veernet_core" / "assets" / "bundled-config.json").read_text())
    config = TrainConfig.from_dict(recipe)
    assert config.init == "bundled" and config.data.page_share == 0.3 and recipe["model"] == bundled["model"]
