"""Quality against cost, drawn: recall@k against ms per recall with the Pareto front marked.

The Compare page and ``vxmem compare --chart`` draw the same two charts from the same frames:
:func:`systems_chart` from :func:`vxmem.workbench.systems.compare.quality_cost`'s frame (one dot per
compared system) and :func:`presets_chart` from
:func:`vxmem.workbench.views.presets_quality_cost`'s (every recall preset crossed with every
ranking policy, the systems beside them). Altair (the ``app`` extra) draws them; this module is
imported only where a chart is drawn, so the library itself does not need it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

from ..sweep.policies import POLICIES
from .charts import spot_labels, spot_sizes

__all__ = ["FRONT_WORDS", "LEGEND", "front_words", "quality_cost_chart", "systems_chart", "presets_chart"]

# The presets chart: a colour per policy (none the front's), a shape per preset; the systems grey crosses.
POLICY_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#72b7b2", "#9d755d", "#666666"]
PRESET_SHAPES = ["circle", "square", "diamond", "cross"]
LEGEND = alt.Legend(symbolSize=90, symbolStrokeWidth=0)  # the dots' own look, not their white outline


# A legend says where a dot stands in words, not "true" and "false".
FRONT_WORDS = {"on the front": True, "behind it": False}


def front_words(on_front: pd.Series) -> pd.Series:
    """``on_front`` (booleans) as a legend says it: "on the front" or "behind it"."""
    return on_front.fillna(False).astype(bool).map({True: "on the front", False: "behind it"})


def quality_cost_chart(points: pd.DataFrame, k: int, name: str, front_colour: str, log: bool = False,
                       labels: pd.DataFrame | None = None, **marks: Any) -> alt.LayerChart:
    """Recall@k against ms per recall, a dot per row of ``points`` (``on_front`` marked), the
    front circled and joined by a dashed line; ``labels`` (:func:`~vxmem.workbench.views.charts.spot_labels`)
    written up-left or down-right of their spots, else each dot's ``name`` beside it.
    ``marks``: the dots' colour (shape, size) encodings."""
    x = alt.X("ms_per_recall:Q", title=f"ms per recall (median{', log scale' if log else ''}; lower is better)",
              scale=alt.Scale(type="log") if log else alt.Scale(zero=True))
    y = alt.Y("recall:Q", title=f"recall@{k} (higher is better)", scale=alt.Scale(domain=[0, 1]))
    base = alt.Chart(points).encode(x=x, y=y, tooltip=[alt.Tooltip(name), alt.Tooltip("recall:Q", format=".3f"),
                                                       alt.Tooltip("ms_per_recall:Q", format=".2f")])
    dots = base.mark_point(filled=True, size=90, opacity=1, stroke="white", strokeWidth=1).encode(**marks)
    front = alt.Chart(points[points["on_front"]].sort_values("ms_per_recall")).encode(x=x, y=y)
    ring = front.mark_point(size=320, color=front_colour, strokeWidth=1.5)
    if "size" in points:  # dots of their own sizes: each ring a size round its dot
        ring = ring.transform_calculate(ring="datum.size + 230").encode(size=alt.Size("ring:Q", scale=None))
    line = front.mark_line(color=front_colour, strokeDash=[4, 3])
    if labels is None:
        beside = base.mark_text(align="left", dx=10, dy=-8).encode(text=alt.Text(name))
        return (line + ring + dots + beside).properties(height=340)
    written = alt.Chart(labels).encode(x=x, y=y, text=alt.Text("text:N"))
    above = written.transform_filter("datum.above").mark_text(align="right", dx=-12, dy=-10)
    below = written.transform_filter("!datum.above").mark_text(align="left", dx=12, dy=14)
    return (line + ring + dots + above + below).properties(height=340)


def systems_chart(front: pd.DataFrame, k: int) -> alt.LayerChart:
    """One dot per compared system (``system``, ``recall``, ``ms_per_recall``, ``on_front``),
    the front's in red."""
    front = front.assign(front=front_words(front["on_front"]))
    on_front = alt.Color("front:N", title="Pareto front", legend=LEGEND,
                         scale=alt.Scale(domain=list(FRONT_WORDS), range=["#e45756", "#9ecae9"]))
    return quality_cost_chart(front, k, "system", "#e45756", color=on_front)


def presets_chart(points: pd.DataFrame, k: int, presets: Sequence[str]) -> alt.LayerChart:
    """One dot per (preset, policy) and per system of ``points`` (the frame of
    :func:`~vxmem.workbench.views.presets_quality_cost`): a colour per policy, a shape per preset,
    the systems grey crosses, ms on a log scale, the front's spots labelled once each."""
    points = points.assign(colour=points["policy"].fillna("system"), shape=points["preset"].fillna("system"),
                           size=spot_sizes(points))
    colour = alt.Color("colour:N", title="policy", legend=LEGEND,
                       scale=alt.Scale(domain=[*POLICIES, "system"], range=POLICY_COLOURS))
    shape = alt.Shape("shape:N", title="preset", legend=LEGEND,
                      scale=alt.Scale(domain=[*presets, "system"], range=PRESET_SHAPES))
    return quality_cost_chart(points, k, "label", "#333333", log=True, labels=spot_labels(points),
                              color=colour, shape=shape, size=alt.Size("size:Q", scale=None, legend=None))
