"""Masked losses that add up across micro-batches to the loss of the whole effective batch.

Every term is a sum over one micro-batch divided by a total of the whole step (its real pixels or
its images), so summing micro-batch losses (gradient accumulation) gives exactly the step's loss:
the pixel term is the mean over the step's real pixels, the overlap term the mean over its images.
Padded pixels are multiplied by zero before any reduction and so give exactly zero gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

SMOOTH = 1.0  # keeps Dice/Tversky finite and gentle on images with no ink of a class


@dataclass(frozen=True)
class LossWeights:
    tversky_alpha: float = 0.3
    tversky_beta: float = 0.7
    pixel_weight: float = 1.0  # the per-pixel BCE / cross-entropy term beside the overlap term


def step_loss(logits: Tensor, target: Tensor, valid: Tensor, group_pixels: int, group_images: int,
              weights: LossWeights = LossWeights()) -> Tensor:
    """This micro-batch's share of the step loss. logits (N,C,H,W): C=1 binary, C>1 multiclass."""
    logits = logits.float()
    if logits.shape[1] == 1:
        return _binary(logits[:, 0], target.float(), valid, group_pixels, group_images, weights)
    return _multiclass(logits, target, valid, group_pixels, group_images, weights)


def _binary(logits: Tensor, target: Tensor, valid: Tensor, group_pixels: int, group_images: int,
            weights: LossWeights) -> Tensor:
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    pixel_term = (bce * valid).sum() / group_pixels
    prob = torch.sigmoid(logits) * valid
    inter = (prob * target).sum(dim=(1, 2))
    dice = (2 * inter + SMOOTH) / (prob.sum(dim=(1, 2)) + (target * valid).sum(dim=(1, 2)) + SMOOTH)
    return weights.pixel_weight * pixel_term + (1 - dice).sum() / group_images


def _multiclass(logits: Tensor, target: Tensor, valid: Tensor, group_pixels: int, group_images: int,
                weights: LossWeights) -> Tensor:
    ce = F.cross_entropy(logits, target, reduction="none")
    pixel_term = (ce * valid).sum() / group_pixels
    prob = torch.softmax(logits, dim=1)[:, 1:] * valid[:, None]
    onehot = F.one_hot(target, logits.shape[1]).permute(0, 3, 1, 2)[:, 1:].float() * valid[:, None]
    tp = (prob * onehot).sum(dim=(2, 3))
    fp = (prob * (1 - onehot)).sum(dim=(2, 3))
    fn = ((1 - prob) * onehot).sum(dim=(2, 3))
    tversky = (tp + SMOOTH) / (tp + weights.tversky_alpha * fp + weights.tversky_beta * fn + SMOOTH)
    return weights.pixel_weight * pixel_term + (1 - tversky).mean(dim=1).sum() / group_images


def predict_labels(logits: Tensor) -> Tensor:
    """Hard labels (N,H,W): sigmoid > 0.5 for one logit, argmax otherwise."""
    if logits.shape[1] == 1:
        return (logits[:, 0] > 0).long()
    return logits.argmax(dim=1)


class SegmentationCounts:
    """Per-class TP/FP/FN summed over a whole validation set, for IoU and Dice."""

    def __init__(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.tp = torch.zeros(num_classes, dtype=torch.float64)
        self.fp = torch.zeros(num_classes, dtype=torch.float64)
        self.fn = torch.zeros(num_classes, dtype=torch.float64)

    def update(self, labels: Tensor, target: Tensor, valid: Tensor) -> None:
        keep = valid > 0.5
        pred, true = labels[keep], target[keep]
        for c in range(self.num_classes):
            p, t = pred == c, true == c
            self.tp[c] += (p & t).sum().item()
            self.fp[c] += (p & ~t).sum().item()
            self.fn[c] += (~p & t).sum().item()

    def metrics(self, names: list[str]) -> dict[str, float]:
        out: dict[str, float] = {}
        for c, name in enumerate(names):
            tp, fp, fn = self.tp[c].item(), self.fp[c].item(), self.fn[c].item()
            out[f"iou_{name}"] = tp / (tp + fp + fn) if tp + fp + fn else 1.0
            out[f"dice_{name}"] = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0
        foreground = [out[f"iou_{n}"] for n in names[1:]]
        out["iou_fg_mean"] = sum(foreground) / len(foreground)
        return out


def class_names(num_classes: int) -> list[str]:
    return ["background", "curve"] if num_classes == 2 else ["background"] + [
        f"curve{i}" for i in range(1, num_classes)]
