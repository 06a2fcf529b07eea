"""Compare: every ranking policy on the same cached pools, at its default and at its best."""

import altair as alt
import streamlit as st

from app_pages import config, shared
from vxmem import views

st.title("Compare")
st.caption("The spec's blend against plain cosine, multiplicative decay, LangChain's time-weighted retriever, "
           "Generative Agents and MemoryBank, ranking the very same candidate pools. \"best\" searches each "
           "policy's own parameters for the chosen metric.")
key, convs, reps = shared.dataset()


@st.cache_data(show_spinner=False, max_entries=64)
def compare(key: str, metric: str, limit: int, _reps):
    return views.compare_policies(_reps, metric, point={"limit": limit})


c1, c2 = st.columns(2)
metric = c1.selectbox("Pick each policy's best point by", config.PICK_METRICS,
                      key="compare_metric", format_func=lambda m: config.METRIC_LABELS[m])
limit = c2.slider("limit (k)", 1, views.MAX_LIMIT, config.DEFAULT_LIMIT, key="compare_limit")
with st.spinner("Sweeping every policy..."):
    table = compare(key, metric, limit, reps)
shown = [m for m in config.HEADLINE_METRICS if m in table]
st.dataframe(table[["policy", "setting", "params", *shown]], hide_index=True, width="stretch",
             column_config={m: st.column_config.NumberColumn(config.METRIC_LABELS[m], format="%.3f")
                            for m in config.HEADLINE_METRICS})
long = table.melt(id_vars=["policy", "setting", "params"], value_vars=list(config.HEADLINE_METRICS),
                  var_name="metric", value_name="value")
long["metric"] = long["metric"].map(config.METRIC_LABELS)
bars = alt.Chart(long).mark_bar().encode(
    x=alt.X("policy:N", title=None, sort=list(table["policy"].unique())),
    xOffset=alt.XOffset("setting:N", sort=["default", "best"]),
    y=alt.Y("value:Q", title=None),
    color=alt.Color("setting:N", sort=["default", "best"]),
    column=alt.Column("metric:N", title=None, sort=[config.METRIC_LABELS[m] for m in config.HEADLINE_METRICS]),
    tooltip=["policy", "setting", "params", alt.Tooltip("value:Q", format=".3f")]).properties(width=170, height=260)
st.altair_chart(bars)
with st.expander("What each policy computes"):
    st.dataframe(table[table["setting"] == "default"][["policy", "description"]], hide_index=True, width="stretch")
