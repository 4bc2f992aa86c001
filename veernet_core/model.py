"""VeerNet: a residual encoder with five stride-2 stages, a two-layer transformer on the 1/32
bottleneck, and a U-Net decoder with skip connections.

Padding never changes what the network computes for an image. Every image of a padded batch
carries its own extent (its size rounded up to 32); at each resolution the features outside that
extent are zeroed before every convolution (so a convolution at the image's edge sees exactly the
zero padding it would see alone), GroupNorm statistics are taken over the extent only, and the
transformer's attention ignores padded tokens.

How the zeroing is kept cheap: the input is masked once, and the masked GroupNorm writes exact
zeros outside the extent, so every block's output (SiLU(0) = 0, sums and upsampling of zeros,
the masked bottleneck) is already zero there and no further mask multiplication is needed.

Speed, the same arithmetic: weights and activations are channels_last (oneDNN's CPU convolutions
run about twice as fast in that layout); the masked GroupNorm, with the residual sum and SiLU that
follow it, is one autograd node with a hand-written backward instead of a dozen elementwise ones;
on CPU a large padded batch runs as a few smaller ones (see CPU_PART_PIXELS).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from veernet_core.config import ModelConfig
from veernet_core.data import CPU_PART_PIXELS, GRID, batch_parts
from veernet_core.masked_norm import MaskedGroupNorm, half_or_16, norm_silu


def _mask(x: Tensor, mask: Tensor | None) -> Tensor:
    return x if mask is None else x * mask


class ConvNormAct(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.norm = MaskedGroupNorm(half_or_16(cout), cout)

    def forward(self, x: Tensor, mask_in: Tensor | None, mask_out: Tensor | None) -> Tensor:
        """`mask_in` zeroes the input outside its extent; pass None when it already is zero there."""
        return norm_silu(self.norm, self.conv(_mask(x, mask_in)), mask_out)


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with a projected shortcut; the first may downsample by 2."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.first = ConvNormAct(cin, cout, stride)
        self.conv = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.norm = MaskedGroupNorm(half_or_16(cout), cout)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
        self.shortcut_norm = MaskedGroupNorm(half_or_16(cout), cout)

    def forward(self, x: Tensor, mask_in: Tensor | None, mask_out: Tensor | None) -> Tensor:
        """`x` is zero outside `mask_in` (a block's output always is); the output is zero outside `mask_out`."""
        shortcut = self.shortcut_norm(self._shortcut(x), mask_out)
        return norm_silu(self.norm, self.conv(self.first(x, None, mask_out)), mask_out, shortcut)

    def _shortcut(self, x: Tensor) -> Tensor:
        """`self.shortcut`; on CPU as a 1x1 convolution of every stride-th pixel (the same arithmetic):
        oneDNN's strided 1x1 backward on channels_last input corrupts memory (uxlfoundation/oneDNN#6035)."""
        if x.device.type != "cpu":
            return self.shortcut(x)  # type: ignore[no-any-return]
        stride = self.shortcut.stride
        sampled = x[:, :, ::stride[0], ::stride[1]].contiguous(memory_format=torch.channels_last)
        return F.conv2d(sampled, self.shortcut.weight)


class _Upsample2x(torch.autograd.Function):
    """Nearest-neighbour x2 upsampling whose backward sums each 2x2 block with a pooling kernel.

    Same arithmetic as F.interpolate's backward, which on a channels_last gradient slice (the
    concatenation's) makes a slow transposing copy first.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return F.interpolate(x, scale_factor=2.0, mode="nearest")

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:  # type: ignore[override]
        return F.avg_pool2d(grad, 2, divisor_override=1)


class DecoderBlock(nn.Module):
    """Upsample x2, concatenate the skip, two convolutions."""

    def __init__(self, cin: int, cskip: int, cout: int) -> None:
        super().__init__()
        self.first = ConvNormAct(cin + cskip, cout)
        self.second = ConvNormAct(cout, cout)

    def forward(self, x: Tensor, skip: Tensor, mask: Tensor | None) -> Tensor:
        """`x` and `skip` are zero outside their extents, so their concatenation is too."""
        x = torch.cat([_Upsample2x.apply(x), skip], dim=1)
        return self.second(self.first(x, None, mask), None, mask)


def sinusoid_2d(h: int, w: int, dim: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """Fixed (row, column) position codes, (h*w, dim): any width, no learned length limit."""
    quarter = dim // 4
    freq = torch.exp(torch.arange(quarter, device=device, dtype=torch.float32) * (-math.log(10_000.0) / quarter))
    ys = torch.arange(h, device=device, dtype=torch.float32)[:, None] * freq
    xs = torch.arange(w, device=device, dtype=torch.float32)[:, None] * freq
    y_code = torch.cat([ys.sin(), ys.cos()], dim=1)[:, None, :].expand(h, w, 2 * quarter)
    x_code = torch.cat([xs.sin(), xs.cos()], dim=1)[None, :, :].expand(h, w, 2 * quarter)
    code = torch.cat([y_code, x_code], dim=2).reshape(h * w, 4 * quarter)
    return F.pad(code, (0, dim - 4 * quarter)).to(dtype)


class Bottleneck(nn.Module):
    """A transformer encoder over the 1/32 feature map, attending only within each image."""

    def __init__(self, channels: int, layers: int, heads: int, ff: int) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(channels, heads, ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False) if layers else None

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        if self.encoder is None:
            return x
        n, c, h, w = x.shape
        tokens = x.flatten(2).transpose(1, 2) + sinusoid_2d(h, w, c, x.device, x.dtype)
        padding = None if mask is None else mask.flatten(1) < 0.5
        out = self.encoder(tokens, src_key_padding_mask=padding)
        return _mask(out.transpose(1, 2).reshape(n, c, h, w), mask)


def level_masks(extents: Tensor | None, height: int, width: int, device: torch.device,
                dtype: torch.dtype) -> list[Tensor | None]:
    """Validity masks (N,1,h,w) at strides 1, 2, ..., 32 from each image's (height, width) extent."""
    if extents is None:
        return [None] * 6
    masks: list[Tensor | None] = []
    for level in range(6):
        stride = 2**level
        rows = torch.arange(height // stride, device=device)[None, :, None]
        cols = torch.arange(width // stride, device=device)[None, None, :]
        valid = (rows < (extents[:, 0, None, None] // stride)) & (cols < (extents[:, 1, None, None] // stride))
        masks.append(valid[:, None].to(dtype))
    return masks


class VeerNet(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # The pixel scale of the synthetic logs the weights learned from (set when loaded from a checkpoint;
        # None: unknown). Inference brings a scan to it (veernet_core.digitise.rescale).
        self.trained_scale: float | None = None
        w = config.widths
        self.stem = ConvNormAct(config.in_channels, w[0])
        self.stages = nn.ModuleList(ResidualBlock(w[i], w[i + 1], stride=2) for i in range(5))
        self.bottleneck = Bottleneck(w[5], config.transformer_layers, config.transformer_heads,
                                     config.transformer_ff)
        self.decoder = nn.ModuleList(DecoderBlock(w[i + 1], w[i], w[i]) for i in reversed(range(5)))
        self.head = nn.Conv2d(w[0], config.out_channels, 1)
        self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def _run(self, block: nn.Module, *args: Tensor | None) -> Tensor:
        if self.config.grad_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(block, *args, use_reentrant=False)  # type: ignore[no-any-return]
        return block(*args)  # type: ignore[no-any-return]

    def forward(self, image: Tensor, extents: Tensor | None = None) -> Tensor:
        """image (N,1,H,W) with H, W multiples of 32; extents (N,2) int: each image's aligned size.

        Without extents every image fills the whole tensor. Returns logits (N, out_channels, H, W).
        """
        n, _, height, width = image.shape
        if height % GRID or width % GRID or height < GRID or width < GRID:
            raise ValueError(
                f"VeerNet input must be at least 32 px and a multiple of 32 in height and width, got "
                f"{height}x{width}; pad with veernet_core.data.pad_collate or pad_to_grid first")
        if image.device.type == "cpu" and n > 1 and n * height * width > CPU_PART_PIXELS:
            return self._forward_in_parts(image, extents)
        return self._forward(image, extents)

    def _forward_in_parts(self, image: Tensor, extents: Tensor | None) -> Tensor:
        """The batch as runs of consecutive images, each run cropped to its own largest extent.

        Nothing in VeerNet mixes images, so these are the whole batch's logits; outside an image's
        run they are the head's bias, as the whole batch gives wherever its features are zero.
        """
        n, _, height, width = image.shape
        sizes = [(height, width)] * n if extents is None else [(int(h), int(w)) for h, w in extents.tolist()]
        bias = self.head.bias if self.head.bias is not None else image.new_zeros(self.head.out_channels)
        out = bias.to(image.dtype).view(1, -1, 1, 1).expand(n, -1, height, width)
        out = out.contiguous(memory_format=torch.channels_last)
        for start, end, part_h, part_w in batch_parts(sizes, CPU_PART_PIXELS):
            fills = all(size == (part_h, part_w) for size in sizes[start:end])
            part_extents = None if extents is None or fills else extents[start:end]
            out[start:end, :, :part_h, :part_w] = self._forward(image[start:end, :, :part_h, :part_w], part_extents)
        return out

    def _forward(self, image: Tensor, extents: Tensor | None) -> Tensor:
        height, width = image.shape[-2:]
        masks = level_masks(extents, height, width, image.device, image.dtype)
        image = image.contiguous(memory_format=torch.channels_last)
        x = self._run(self.stem, image, masks[0], masks[0])
        skips = [x]
        for i, stage in enumerate(self.stages):
            x = self._run(stage, x, masks[i], masks[i + 1])
            skips.append(x)
        x = self.bottleneck(x, masks[5])
        for j, block in enumerate(self.decoder):
            level = 4 - j
            x = self._run(block, x, skips[level], masks[level])
        return self.head(x)


def build_model(config: ModelConfig) -> VeerNet:
    return VeerNet(config)
