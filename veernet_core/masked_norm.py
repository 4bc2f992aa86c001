"""GroupNorm over the valid pixels of a padded batch, fused with the residual sum and SiLU that follow it.

Every image of a padded batch carries a (N, 1, H, W) 0/1 validity mask. Statistics are taken over
the valid pixels only and the output is exactly zero outside them, so padding never changes what
VeerNet computes for an image (see veernet_core/model.py). On the CPU, where memory traffic and not
arithmetic bounds these layers, the whole "normalise, + shortcut, SiLU" is one autograd node with a
hand-written backward instead of a dozen elementwise ones.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def half_or_16(channels: int) -> int:
    """GroupNorm group count: half the channels, at most 16, and always a divisor of `channels`.

    Two channels per group at the narrow full-resolution layers keeps statistics per-feature-ish
    where images are widest; 16 groups at wider layers is GroupNorm's usual operating point.
    """
    groups = max(1, min(16, channels // 2))
    while channels % groups:
        groups -= 1
    return groups


def _group_sum(per_channel: Tensor, groups: int) -> Tensor:
    """(N, C) -> (N, G): sum the channels of each group."""
    n, c = per_channel.shape
    return per_channel.view(n, groups, c // groups).sum(dim=2)


def _per_channel(per_group: Tensor, channels: int) -> Tensor:
    """(N, G) -> (N, C, 1, 1): each group's value for each of its channels."""
    n, g = per_group.shape
    return per_group.repeat_interleave(channels // g, dim=1).view(n, channels, 1, 1)


def _channel_dots(a: Tensor, b: Tensor) -> Tensor:
    """(N, C): sum over pixels of a * b, channel by channel.

    On CPU, the diagonal of a batched Gram matrix: one read of each input and no (N, C, H, W)
    temporary (a fresh temporary of that size costs more in page faults than the arithmetic); the
    C x C product does C times the needed multiply-adds, still cheap next to the memory traffic.
    """
    if a.device.type != "cpu":  # caching allocators make the temporary cheap; keep full fp32 precision
        return (a * b).sum(dim=(2, 3))
    n, c, h, w = a.shape
    if a.is_contiguous(memory_format=torch.channels_last) and not a.is_contiguous():
        a_, b_ = (t.permute(0, 2, 3, 1).reshape(n, h * w, c) for t in (a, b))
        return torch.bmm(a_.transpose(1, 2), b_).diagonal(dim1=1, dim2=2)
    a_, b_ = (t.reshape(n, c, h * w) for t in (a, b))
    return torch.bmm(a_, b_.transpose(1, 2)).diagonal(dim1=1, dim2=2)


class _MaskedGroupNormFunction(torch.autograd.Function):
    """GroupNorm over the pixels where mask == 1, then optionally + residual and SiLU, in one node.

    Statistics are two-pass (the mean, then the sum of squared deviations from it), as stable as
    nn.GroupNorm's. The output is exactly zero outside the mask (the residual must be too).
    Saved for backward: d = (x - mean) * mask, the mask, 1/std, the affine parameters and the
    residual; the pre-activation is recomputed from them rather than kept. Large tensors are
    allocated only where a result must live (d, y, dx); everything else works in place.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, mask: Tensor, weight: Tensor, bias: Tensor, residual: Tensor | None,
                groups: int, eps: float, silu: bool) -> Tensor:
        c = x.shape[1]
        count = mask.sum(dim=(1, 2, 3)).clamp_min(1).unsqueeze(1) * (c // groups)  # (N, 1)
        d = x * mask
        mean = _group_sum(d.sum(dim=(2, 3)), groups) / count
        d.addcmul_(mask, _per_channel(-mean, c))
        rstd = torch.rsqrt(_group_sum(_channel_dots(d, d), groups) / count + eps)  # (N, G)
        y = _affine(d, mask, rstd, weight, bias, residual)
        if silu:
            F.silu(y, inplace=True)
        ctx.groups, ctx.silu = groups, silu
        ctx.save_for_backward(d, mask, rstd, weight, bias, count, residual if silu else None)
        return y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        d, mask, rstd, weight, bias, count, residual = ctx.saved_tensors
        n, c = d.shape[:2]
        groups = ctx.groups
        dresidual = None
        if ctx.silu:
            z = _affine(d, mask, rstd, weight, bias, residual)  # the pre-activation, recomputed
            dz = torch.ops.aten.silu_backward.grad_input(dy, z, grad_input=z)
            dresidual = dz if ctx.needs_input_grad[4] else None
            dx = dz * mask if dresidual is not None else dz.mul_(mask)
        else:
            dresidual = dy if ctx.needs_input_grad[4] else None
            dx = dy * mask  # the incoming gradient may be shared with another branch: never modify it
        sum_dy = dx.sum(dim=(2, 3))  # (N, C) over valid pixels
        sum_dy_d = _channel_dots(dx, d)
        rstd_c = _per_channel(rstd, c).view(n, c)
        dweight = (sum_dy_d * rstd_c).sum(dim=0)
        dbias = sum_dy.sum(dim=0)
        mean_dyhat = _group_sum(sum_dy * weight, groups) / count  # mean of dy * w over the group
        mean_dyhat_xhat = _group_sum(sum_dy_d * weight, groups) * rstd / count
        # dx = rstd * (dy * w - mean(dy * w) - xhat * mean(dy * w * xhat)) on valid pixels, 0 elsewhere
        dx.mul_((rstd_c * weight).view(n, c, 1, 1))
        dx.addcmul_(d, _per_channel(-rstd * rstd * mean_dyhat_xhat, c))
        dx.addcmul_(mask, _per_channel(-rstd * mean_dyhat, c))
        return dx, None, dweight, dbias, dresidual, None, None, None


def _affine(d: Tensor, mask: Tensor, rstd: Tensor, weight: Tensor, bias: Tensor, residual: Tensor | None) -> Tensor:
    """d * (rstd * weight) + bias inside the mask (+ residual): a new tensor, zero outside the mask."""
    c = d.shape[1]
    y = (d * (_per_channel(rstd, c) * weight.view(1, c, 1, 1))).addcmul_(mask, bias.view(1, c, 1, 1))
    return y if residual is None else y.add_(residual)


class MaskedGroupNorm(nn.GroupNorm):
    """GroupNorm whose statistics cover only the valid region given by a (N, 1, H, W) 0/1 mask.

    With a mask the output is exactly zero outside it. Without one it is nn.GroupNorm.
    `residual` and `silu` fold the block's "+ shortcut, then SiLU" into the same autograd node
    (fewer full-size passes); `self(x, mask)` alone is plain GroupNorm.
    """

    def forward(self, x: Tensor, mask: Tensor | None = None,  # type: ignore[override]
                residual: Tensor | None = None, silu: bool = False) -> Tensor:
        if mask is None:
            y = super().forward(x)
            y = y if residual is None else y + residual
            return F.silu(y) if silu else y
        if not self.affine:
            raise ValueError("MaskedGroupNorm with a mask needs affine=True")
        if x.device.type == "cuda" and torch.is_autocast_enabled("cuda"):
            # Like nn.GroupNorm under autocast: normalise in float32 (the next convolution casts back).
            with torch.autocast("cuda", enabled=False):
                return self(x.float(), mask, None if residual is None else residual.float(), silu)
        return _MaskedGroupNormFunction.apply(  # type: ignore[no-any-return]
            x, mask.to(x.dtype), self.weight.to(x.dtype), self.bias.to(x.dtype), residual, self.num_groups,
            self.eps, silu)


def norm_silu(norm: nn.Module, x: Tensor, mask: Tensor | None, residual: Tensor | None = None) -> Tensor:
    """SiLU(norm(x, mask) + residual), fused when `norm` is a MaskedGroupNorm (a stand-in module works too)."""
    if isinstance(norm, MaskedGroupNorm):
        return norm(x, mask, residual, silu=True)  # type: ignore[no-any-return]
    y = norm(x, mask)
    return F.silu(y if residual is None else y + residual)
