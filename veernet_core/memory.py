"""A measured memory model: peak training memory as a linear function of padded pixels.

Two probe sizes are run through one forward and backward pass on the real device; the peak bytes
of each fit ``peak = fixed + per_pixel * pixels``. On CUDA the peak is the allocator's own
``max_memory_allocated``; on CPU it is the peak of the tensor allocations the profiler records
(the CPU allocator keeps no statistics). The training loop's pixel budget and the planner both
come from this model.

The network takes one of two paths per pass (``veernet_core.data.model_extents``): images that all
fill the padded tensor run unmasked, a micro-batch of mixed sizes runs the masked path, whose fused
norm keeps fewer tensors for backward (about a fifth less per pixel). A third probe, two images of
the larger size with one a column narrower, measures the masked path's slope against the same
fixed part. The pixel budget uses the larger slope, so it fits either path; the planner predicts a
micro-batch's peak from the path (and, on CPU, the runs of ``VeerNet._forward_in_parts``) it takes.

The probes, which run the network, are in ``veernet_core.memory_probe``; this module is arithmetic only,
so that the planner in the API process does without torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from veernet_core.data import CPU_PART_PIXELS, batch_parts


@dataclass(frozen=True)
class MemoryModel:
    device: str
    fixed_bytes: float  # weights, gradients and what does not grow with the image
    bytes_per_pixel: float  # activations kept for backward and transient buffers, per padded pixel
    probe_pixels: tuple[int, int]
    probe_peaks: tuple[int, int]
    masked_bytes_per_pixel: float | None = None  # the masked path's slope (mixed sizes); None: not probed

    def peak_bytes(self, pixels: int) -> float:
        """The peak of a pass over `pixels` padded pixels on the path that keeps more (the budget's bound)."""
        return self.fixed_bytes + max(self.bytes_per_pixel, self.masked_bytes_per_pixel or 0.0) * pixels

    def pixel_budget(self, available_bytes: float) -> int:
        """The most padded pixels per physical batch that keep the peak within `available_bytes`."""
        slope = max(self.bytes_per_pixel, self.masked_bytes_per_pixel or 0.0)
        return max(0, int((available_bytes - self.fixed_bytes) / slope))

    def batch_peak_bytes(self, extents: list[tuple[int, int]]) -> float:
        """The peak of one micro-batch of images with these aligned (height, width), on the path it takes.

        As ``VeerNet.forward`` runs it: on CPU a batch of more than CPU_PART_PIXELS runs as runs of
        consecutive images, each cropped to its own largest extent, and all runs' activations are kept
        for backward; a run (or the batch) whose images all fill it is unmasked, else masked.
        """
        height, width = max(h for h, _ in extents), max(w for _, w in extents)
        runs = [(0, len(extents), height, width)]
        if self.device == "cpu" and len(extents) > 1 and len(extents) * height * width > CPU_PART_PIXELS:
            runs = batch_parts(extents, CPU_PART_PIXELS)
        total = self.fixed_bytes
        for start, end, run_h, run_w in runs:
            fills = all(size == (run_h, run_w) for size in extents[start:end])
            slope = self.bytes_per_pixel if fills else (self.masked_bytes_per_pixel or self.bytes_per_pixel)
            total += slope * (end - start) * run_h * run_w
        return total

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
