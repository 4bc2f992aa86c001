"""A plan at a glance, as SVG written by hand (no plotting library): one horizontal bar of hours.

The bar stacks the compute (start-up, training, validation, checkpoint saves), then what the
expected interruptions cost on top (resume tax, redone work); a vertical line marks the window.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 760, 230
LEFT, RIGHT, BAR_Y, BAR_H = 20, 20, 70, 44
SEGMENTS = (  # (label, colour, how to read the seconds from a plan dict)
    ("start-up", "#9ecae1", lambda p: p["time"]["startup_s"]),
    ("training", "#3182bd", lambda p: p["time"]["train_s"]),
    ("validation", "#6baed6", lambda p: p["time"]["validation_s"]),
    ("checkpoints", "#08519c", lambda p: p["time"]["checkpoint_s"]),
    ("resume tax", "#e6550d", lambda p: p["interruptions"]["k"] * p["interruptions"]["resume_tax_s"]),
    ("redone work", "#fdae6b", lambda p: p["interruptions"]["k"] * p["interruptions"]["redone_work_s_each"]),
)


def _nice_step(span_h: float) -> float:
    """A tick spacing of 1, 2 or 5 times a power of ten giving 4 to 10 ticks."""
    step = 10 ** int(f"{span_h / 5:e}".split("e")[1])
    for factor in (1, 2, 5, 10):
        if span_h / (step * factor) <= 10:
            return step * factor
    return step * 10


def render_svg(plan: dict[str, Any]) -> str:
    """The SVG document of a plan (``Plan.to_dict()`` or the API's JSON); one with no times says why instead."""
    if plan.get("time") is None:
        return _no_times_svg(plan)
    window_h = plan["window_s"] / 3600
    finish_h = plan["interruptions"]["finish_s"] / 3600
    span_h = max(window_h, finish_h) * 1.08 or 1.0
    scale = (WIDTH - LEFT - RIGHT) / span_h

    def x(hours: float) -> float:
        return LEFT + hours * scale

    fits = plan["interruptions"]["fits_window"]
    estimate = (plan.get("throughput") or {}).get("source") == "gpu_table_estimate"
    title = (f"{'ESTIMATE (GPU table) ' if estimate else ''}{plan['device_class']}: {finish_h:.2f} h with "
             f"{plan['interruptions']['k']:.2g} interruptions, window {window_h:g} h: "
             f"{'fits' if fits else 'does NOT fit'}")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{LEFT}" y="24" font-size="14" font-weight="bold">{escape(title)}</text>']
    start = 0.0
    for label, colour, seconds in SEGMENTS:
        hours = max(0.0, float(seconds(plan))) / 3600
        parts.append(f'<rect x="{x(start):.2f}" y="{BAR_Y}" width="{hours * scale:.2f}" height="{BAR_H}" '
                     f'fill="{colour}"><title>{escape(label)}: {hours:.3f} h</title></rect>')
        start += hours
    step = _nice_step(span_h)
    tick = 0.0
    while tick <= span_h:
        parts.append(f'<line x1="{x(tick):.2f}" y1="{BAR_Y + BAR_H}" x2="{x(tick):.2f}" y2="{BAR_Y + BAR_H + 5}" '
                     'stroke="#444"/>')
        parts.append(f'<text x="{x(tick):.2f}" y="{BAR_Y + BAR_H + 18}" text-anchor="middle">{tick:g} h</text>')
        tick += step
    colour = "#2ca02c" if fits else "#d62728"
    parts.append(f'<line x1="{x(window_h):.2f}" y1="{BAR_Y - 16}" x2="{x(window_h):.2f}" y2="{BAR_Y + BAR_H + 8}" '
                 f'stroke="{colour}" stroke-width="2" stroke-dasharray="6,3"/>')
    parts.append(f'<text x="{x(window_h):.2f}" y="{BAR_Y - 20}" text-anchor="middle" fill="{colour}">'
                 f'window {window_h:g} h</text>')
    for i, (label, colour, _) in enumerate(SEGMENTS):
        lx = LEFT + (i % 3) * 200
        ly = BAR_Y + BAR_H + 42 + (i // 3) * 20
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 18}" y="{ly}">{escape(label)}</text>')
    costs = ", ".join(f"{c['tier']}: {c['eur']:.2f} EUR" for c in plan["costs"])
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 12}">{escape(costs)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _no_times_svg(plan: dict[str, Any]) -> str:
    """A plan nothing could time yet (no throughput measured or estimated): its device and why, as text."""
    why = (plan.get("measurement") or {}).get("message") or "no throughput measured or estimated for this device"
    lines = [why[i:i + 110] for i in range(0, min(len(why), 660), 110)]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{LEFT}" y="24" font-size="14" font-weight="bold">'
             f'{escape(str(plan["device_class"]))}: no times yet</text>']
    parts += [f'<text x="{LEFT}" y="{54 + 18 * i}">{escape(line)}</text>' for i, line in enumerate(lines)]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
