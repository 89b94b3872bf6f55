"""The cohort's dot chart: per candidate, each reviewer's total as a dot on a 0–100 axis
and the range between the lowest and the highest as a bar.

Geometry only; `templates/reviewer/partials/dot_chart.html` draws it as inline SVG with
presentation attributes (no stylesheet, no script), so the page and the offline report show
the same chart. Reviewers are told apart by marker shape as well as colour, and every row
carries its figures as text for screen readers and as a tooltip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reviewer.cohort.cohort import Candidate

LABEL_WIDTH = 190
AXIS_WIDTH = 420
ROW_HEIGHT = 24
LEGEND_ROW = 18
LEGEND_PER_ROW = 4
LEGEND_STEP = 150
TICKS = (0, 25, 50, 75, 100)
# Colour-blind-safe (Okabe–Ito), each with its own marker.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MARKERS = ("circle", "square", "diamond", "triangle")


@dataclass
class Marker:
    reviewer: str
    colour: str
    shape: str


def _x(total: float) -> float:
    return round(LABEL_WIDTH + max(0.0, min(100.0, total)) / 100 * AXIS_WIDTH, 1)


def _points(points: Sequence[tuple[float, float]]) -> str:
    return "M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in points) + "z"


def _shape_path(shape: str, x: float, y: float, r: float = 4.5) -> str:
    if shape == "square":
        return _points([(x - r, y - r), (x + r, y - r), (x + r, y + r), (x - r, y + r)])
    if shape == "diamond":
        k = r + 1
        return _points([(x, y - k), (x + k, y), (x, y + k), (x - k, y)])
    if shape == "triangle":
        k = r + 1
        return _points([(x, y - k), (x + k, y + r), (x - k, y + r)])
    # A circle as a path: one element kind for every marker.
    arc = f"a{r:.1f},{r:.1f} 0 1,0"
    return f"M{x - r:.1f},{y:.1f}{arc} {2 * r:.1f},0{arc} {-2 * r:.1f},0"


def markers(reviewers: Sequence[str]) -> dict[str, Marker]:
    """Each reviewer's colour and marker, stable for a given list of reviewers."""
    return {
        name: Marker(name, COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)])
        for i, name in enumerate(reviewers)
    }


def dot_chart(candidates: Sequence[Candidate], reviewers: Sequence[str]) -> dict:
    """What the dot-chart partial draws for these candidates (one row each, in order)."""
    legend = markers(reviewers)
    legend_rows = -(-len(legend) // LEGEND_PER_ROW)
    top = legend_rows * LEGEND_ROW + 30  # the legend, then the axis labels
    rows = []
    for i, c in enumerate(candidates):
        y = top + i * ROW_HEIGHT + ROW_HEIGHT / 2
        scored = [(n, t) for n, t in sorted(c.totals.items()) if t is not None and n in legend]
        # Each reviewer a little above or below the next, so equal totals stay visible.
        step = min(7.0, 14 / (len(scored) - 1)) if len(scored) > 1 else 0.0
        dots = [
            {
                "d": _shape_path(
                    legend[name].shape, _x(total), y + (j - (len(scored) - 1) / 2) * step
                ),
                "colour": legend[name].colour,
                "title": f"{name}: {total}",
            }
            for j, (name, total) in enumerate(scored)
        ]
        said = ", ".join(d["title"] for d in dots)
        if not dots:
            summary = f"{c.name}: not scored"
        elif len(dots) == 1:
            summary = f"{c.name}: {said}"
        else:
            summary = f"{c.name}: {said}; range {c.low} to {c.high}"
        if c.flagged:
            summary += "; reviewers disagree"
        rows.append(
            {
                "label": c.name,
                "label_y": round(y + 4, 1),
                "y": round(y, 1),
                "bar": (
                    {
                        "x": _x(c.low or 0.0),
                        "width": round(_x(c.high or 0.0) - _x(c.low or 0.0), 1),
                        "y": round(y - 3, 1),
                    }
                    if len(dots) >= 2
                    else None
                ),
                "dots": dots,
                "summary": summary,
                "flagged": c.flagged,
                "unscored": not dots,
            }
        )
    height = top + max(1, len(rows)) * ROW_HEIGHT + 6
    keys = []
    for j, m in enumerate(legend.values()):
        x = 10 + (j % LEGEND_PER_ROW) * LEGEND_STEP
        y = 10 + (j // LEGEND_PER_ROW) * LEGEND_ROW
        keys.append(
            {
                "d": _shape_path(m.shape, x, y),
                "colour": m.colour,
                "x": x + 10,
                "y": y + 4,
                "name": m.reviewer,
            }
        )
    return {
        "rows": rows,
        "legend": keys,
        "ticks": [{"x": _x(t), "label": t, "y": top - 12} for t in TICKS],
        "width": LABEL_WIDTH + AXIS_WIDTH + 30,
        "height": height,
        "axis_top": top - 6,
        "axis_bottom": height - 4,
        "unscored_x": LABEL_WIDTH + 4,
    }
