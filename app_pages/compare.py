"""Compare: every ranking policy on the same cached pools, at its default and at its best."""

import json

import altair as alt
import streamlit as st

from app_pages import config, shared
from vxmem.workbench import views

st.title("Compare")
st.caption("The spec's blend against plain cosine, multiplicative decay, LangChain's time-weighted retriever, "
           "Generative Agents and MemoryBank, ranking the very same candidate pools. \"best\" searches each "
           "policy's own parameters for the chosen metric; limit and token budget are the shared settings.")
key, convs, reps = shared.dataset()


@st.cache_data(show_spinner=False, max_entries=64)
def compare(key: str, metric: str, point: str, _reps):
    return views.compare_policies(_reps, metric, point=json.loads(point))


c1, c2 = st.columns(2)
metric = c1.selectbox("Pick each policy's best point by", config.PICK_METRICS,
                      key="compare_metric", format_func=lambda m: config.METRIC_LABELS[m])
with c2:
    shared.param_sliders(("limit",))
s = shared.settings()
with st.spinner("Sweeping every policy..."):
    table = compare(key, metric, json.dumps({"limit": s["limit"], "token_budget": s["token_budget"]}), reps)
shown = [m for m in config.HEADLINE_METRICS if m in table]
st.dataframe(table[["policy", "setting", "params", *shown]], hide_index=True, width="stretch",
             column_config={m: st.column_config.NumberColumn(config.METRIC_LABELS[m], format="%.3f")
                            for m in config.HEADLINE_METRICS})
order = list(table["policy"].unique())
cols = st.columns(2)
for j, m in enumerate(shown):
    higher = "lower is better" if m == "stale_leak" else "higher is better"
    bars = alt.Chart(table).mark_bar().encode(
        x=alt.X("policy:N", title=None, sort=order, axis=alt.Axis(labelAngle=-30, labelOverlap=False)),
        xOffset=alt.XOffset("setting:N", sort=["default", "best"]),
        y=alt.Y(f"{m}:Q", title=f"{config.METRIC_LABELS[m]} ({higher})",
                scale=alt.Scale(domain=[0, 1]) if m != "stale_leak" else alt.Scale(zero=True)),
        color=alt.Color("setting:N", sort=["default", "best"], title="setting",
                        scale=alt.Scale(domain=["default", "best"], range=["#9ecae9", "#4c78a8"]),
                        legend=alt.Legend(orient="right")),
        tooltip=["policy", "setting", "params", alt.Tooltip(f"{m}:Q", format=".3f")]).properties(height=300)
    with cols[j % 2]:
        shared.chart(bars)
with st.expander("What each policy computes"):
    st.dataframe(table[table["setting"] == "default"][["policy", "description"]], hide_index=True, width="stretch")
