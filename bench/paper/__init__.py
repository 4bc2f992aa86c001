"""An evaluation renderer of paper well logs whose drawing code is independent of veernet_core.synth:
`render(seed, index, scale)` gives a log in the truth format of `veernet_core.synth_truth`."""

from .render import render

__all__ = ["render"]
