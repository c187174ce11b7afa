"""Bar charts as inline SVG, drawn here in Python: no front-end code, readable without
JavaScript. Each bar carries a ``<title>`` with its label and value (a browser shows it on
hover); the page repeats the numbers in a table for screen readers, so the drawing itself is
one image with a summary for its accessible name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 720
HEIGHT = 200
TOP = 30  # room for the scale's label
BOTTOM = 32  # room for the axis labels
LEFT = 4
# The labels' size is the stylesheet's: drawn larger at phone width, where the drawing is shown
# at about half its width, so that they read at 11 px or more; there is room for them here.


@dataclass(frozen=True, slots=True)
class Bar:
    label: str  # its title: "2026-11-25 14:00 UTC"
    tick: str  # under the axis, where one is shown ("14h"); "" for none
    value: float


def bar_chart(
    title: str, bars: Sequence[Bar], show: Callable[[float], str], *, css_class: str = ""
) -> str:
    """An SVG bar chart of ``bars``, left to right, each value shown by ``show``: markup with
    every text escaped here, for a template's ``| safe``."""
    peak = max((bar.value for bar in bars), default=0.0)
    total = sum(bar.value for bar in bars)
    summary = f"{title}: {show(total)} in all"
    if peak > 0:
        busiest = max(bars, key=lambda bar: bar.value)
        summary += f"; the most, {show(peak)}, {busiest.label}"
    slot = (WIDTH - LEFT) / max(len(bars), 1)
    gap = max(1.0, slot * 0.15)
    area = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg class="chart {escape(css_class)}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(summary)}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f'<text class="scale" x="{LEFT}" y="{TOP - 7}">max {escape(show(peak))}</text>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP + area}" x2="{WIDTH}" y2="{TOP + area}"/>',
    ]
    for index, bar in enumerate(bars):
        x = LEFT + index * slot + gap / 2
        height = 0.0 if peak <= 0 else area * bar.value / peak
        if bar.value > 0:
            height = max(height, 1.0)  # a small value stays visible
        y = TOP + area - height
        label = f"{bar.label}: {show(bar.value)}"
        # The whole column answers the hover, however short its bar.
        parts.append(
            f'<g class="bar"><title>{escape(label)}</title>'
            f'<rect class="hit" x="{x:.1f}" y="{TOP}" width="{slot - gap:.1f}" height="{area}"/>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot - gap:.1f}" height="{height:.1f}"/></g>'
        )
        if bar.tick:  # centred under its bar; the last one ends at the chart's right edge
            last = index == len(bars) - 1
            tick_x = x + (slot - gap) if last else x + (slot - gap) / 2
            parts.append(
                f'<text class="tick" x="{tick_x:.1f}" y="{HEIGHT - 6}" '
                f'text-anchor="{"end" if last else "middle"}">{escape(bar.tick)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
