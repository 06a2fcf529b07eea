"""vxmem workbench: remember a few lines, recall with a query, see why it ranks that way."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from vxmem import Vectrix

DAY = 86400.0
T0 = 1_700_000_000.0

DEFAULT_LINES = """-90 | I prefer dark mode in every editor
-60 | My sister's name is Ana and she lives in Lisbon
-30 | actually I switched to light mode, dark mode hurt my eyes
-3 | the build failed again because of the flaky network test
-1 | lol ok
0 | what should we cook tonight?"""


@st.cache_resource
def memory(lines: str, half_life: float, recency_weight: float, feedback_weight: float) -> Vectrix:
    db = Vectrix(half_life_days=half_life, recency_weight=recency_weight, feedback_weight=feedback_weight)
    for line in lines.strip().splitlines():
        day, _, text = line.partition("|")
        if text.strip():
            db.remember(text.strip(), session="demo", timestamp=T0 + float(day) * DAY)
    return db


st.set_page_config(page_title="vxmem workbench", layout="wide")
st.title("vxmem: why it ranks the way it does")
left, right = st.columns([1, 2])
with left:
    lines = st.text_area("Memories (days relative to now | text)", DEFAULT_LINES, height=220)
    half_life = st.slider("half_life_days", 0.5, 90.0, 7.0, 0.5)
    recency_weight = st.slider("recency_weight", 0.0, 2.0, 0.5, 0.05)
    feedback_weight = st.slider("feedback_weight", 0.0, 1.0, 0.25, 0.05)
    query = st.text_input("Query", "does the user like dark mode or light mode?")

try:
    db = memory(lines, half_life, recency_weight, feedback_weight)
    results = db.recall(query, session="demo", now=T0, limit=6) if query.strip() else []
except (ValueError, TypeError) as exc:
    st.error(f"Cannot use these memories: {exc}")
    st.stop()

with right:
    if not results:
        st.info("Type a query to recall memories.")
    else:
        frame = results.to_frame()
        frame["relevance part"] = frame["relevance_norm"]
        frame["recency part"] = recency_weight * frame["recency"]
        frame["feedback part"] = feedback_weight * frame["feedback"]
        st.dataframe(frame[["rank", "text", "score", "relevance", "relevance_norm", "recency", "feedback",
                            "age_days"]], hide_index=True, width="stretch")
        parts = frame.melt(id_vars=["rank", "text"], value_vars=["relevance part", "recency part", "feedback part"],
                           var_name="part", value_name="contribution")
        chart = alt.Chart(parts).mark_bar().encode(
            x=alt.X("contribution:Q", title="score contribution"),
            y=alt.Y("text:N", sort=alt.SortField("rank"), title=None),
            color=alt.Color("part:N"),
            tooltip=["text", "part", alt.Tooltip("contribution:Q", format=".3f")],
        )
        st.altair_chart(chart, width="stretch")
        st.caption("score = relevance_norm + recency_weight x 0.5^(age/half_life) + feedback_weight x feedback")
