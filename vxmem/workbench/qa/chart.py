"""Answer-level accuracy drawn: a bar per system and category with its bootstrap 95% interval.

The QA page draws :func:`accuracy_chart` from :func:`vxmem.workbench.qa.summarize`'s frame (one
row per system and category, "all" last). Altair (the ``app`` extra) draws it; this module is
imported only where the chart is drawn.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .report import ALL

__all__ = ["accuracy_chart"]


def accuracy_chart(summary: pd.DataFrame, k: int) -> alt.LayerChart:
    """Accuracy per category (the categories in order, "all" last), a bar per system beside the
    others, the black whisker its bootstrap 95% interval; the tooltip adds the questions behind
    it and recall@``k`` of the same questions."""
    cats = sorted(c for c in summary["category"].unique() if c != ALL) + [ALL]
    systems = list(dict.fromkeys(summary["system"]))
    x = alt.X("category:N", title=None, sort=cats, axis=alt.Axis(labelAngle=0, labelLimit=160))
    offset = alt.XOffset("system:N", sort=systems)
    y = alt.Y("accuracy:Q", title="accuracy (higher is better)", scale=alt.Scale(domain=[0, 1]))
    tooltip = [alt.Tooltip("system"), alt.Tooltip("category"), alt.Tooltip("accuracy:Q", format=".3f"),
               alt.Tooltip("accuracy_lo:Q", title="95% CI low", format=".3f"),
               alt.Tooltip("accuracy_hi:Q", title="95% CI high", format=".3f"), alt.Tooltip("questions"),
               alt.Tooltip("recall:Q", title=f"recall@{k}", format=".3f")]
    bars = alt.Chart(summary).mark_bar().encode(
        x=x, xOffset=offset, y=y, tooltip=tooltip,
        color=alt.Color("system:N", sort=systems, title="system", legend=alt.Legend(orient="right")))
    whiskers = alt.Chart(summary).mark_rule(color="#333333").encode(x=x, xOffset=offset, y=alt.Y("accuracy_lo:Q"),
                                                                   y2=alt.Y2("accuracy_hi:Q"))
    return (bars + whiskers).properties(height=320)
