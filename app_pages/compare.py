"""Compare: every ranking policy on the same cached pools, at its default and at its best."""

import json

import altair as alt
import streamlit as st

from app_pages import config, shared
from vxmem.workbench import views
from vxmem.workbench.views.systems import DASHBOARD_SYSTEMS, systems_frames

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
# Each metric with its bootstrap 95% interval, in one column ("0.917 [0.854, 0.972]") so the table fits the page.
cells = table.assign(**{m: [f"{v:.3f} [{lo:.3f}, {hi:.3f}]" for v, lo, hi in
                            zip(table[m], table[f"{m}_lo"], table[f"{m}_hi"])] for m in shown})
st.dataframe(cells[["policy", "setting", "params", *shown, "probes"]], hide_index=True, width="stretch",
             height=38 + 35 * len(cells), column_order=["policy", "setting", "params", *shown], column_config={
                 "policy": st.column_config.TextColumn(width=120), "setting": st.column_config.TextColumn(width=65),
                 "params": st.column_config.TextColumn(width=170),
                 **{m: st.column_config.TextColumn(f"{config.METRIC_LABELS[m]} [95% CI]", width=125) for m in shown}})
st.caption(f"Means over {int(table['probes'].max())} probes, each with its bootstrap 95% interval.")
shared.sample_caveat(int(table["probes"].min()))
order = list(table["policy"].unique())
cols = st.columns(2)
for j, m in enumerate(shown):
    higher = "lower is better" if m == "stale_leak" else "higher is better"
    with cols[j % 2]:
        if shared.flat_note(table[m], f"{config.METRIC_LABELS[m]} ({higher})"):
            continue
        x = alt.X("policy:N", title=None, sort=order, axis=alt.Axis(labelAngle=-30, labelOverlap=False))
        offset = alt.XOffset("setting:N", sort=["default", "best"])
        y = alt.Y(f"{m}:Q", title=f"{config.METRIC_LABELS[m]} ({higher})",
                  scale=alt.Scale(domain=[0, 1]) if m != "stale_leak" else alt.Scale(zero=True))
        bars = alt.Chart(table).mark_bar().encode(
            x=x, xOffset=offset, y=y,
            color=alt.Color("setting:N", sort=["default", "best"], title="setting",
                            scale=alt.Scale(domain=["default", "best"], range=["#9ecae9", "#4c78a8"]),
                            legend=alt.Legend(orient="right")),
            tooltip=["policy", "setting", "params", alt.Tooltip(f"{m}:Q", format=".3f"),
                     alt.Tooltip(f"{m}_lo:Q", title="95% CI low", format=".3f"),
                     alt.Tooltip(f"{m}_hi:Q", title="95% CI high", format=".3f"), "probes"])
        whiskers = alt.Chart(table).mark_rule(color="#333333").encode(x=x, xOffset=offset, y=f"{m}_lo:Q",
                                                                      y2=f"{m}_hi:Q")
        shared.chart((bars + whiskers).properties(height=300))
st.caption("Bars: means over the probes; the black whiskers their bootstrap 95% intervals.")
with st.expander("What each policy computes"):
    st.dataframe(table[table["setting"] == "default"][["policy", "description"]], hide_index=True, width="stretch")

st.header("Other memory systems: quality against cost")
st.caption("The neutral harness (`vxmem compare`): each system is given the same turns, corrections and "
           "probes and answers with the turns it would recall; recall@k against the median milliseconds per "
           "recall, the Pareto front circled (no other system is both better and faster).")
picked = st.multiselect("Systems", list(DASHBOARD_SYSTEMS), default=["vxmem", "vxmem:fast", "bm25"],
                        key="compare_systems")


@st.cache_data(show_spinner=False, max_entries=16)
def systems(key: str, names: tuple[str, ...], k: int, embedder: str, _convs):
    return systems_frames(_convs, names, k=k, embedder=None if embedder == "default" else embedder)


if picked:
    with st.spinner("Replaying the dataset through each system..."):
        sys_table, front = systems(key, tuple(picked), s["limit"], s["embedder"], convs)
    quality = {c: st.column_config.NumberColumn(format="%.3f") for c in ("hit", "recall", "mrr", "ndcg", "stale_leak")}
    cost = {c: st.column_config.NumberColumn(format="%.2f") for c in ("ms_per_recall", "ms_per_write", "setup_s")}
    st.dataframe(sys_table.drop(columns=["error"] if sys_table["error"].isna().all() else []), hide_index=True,
                 width="stretch", column_config={**quality, **cost})
    base = alt.Chart(front).encode(
        x=alt.X("ms_per_recall:Q", title="ms per recall (median; lower is better)", scale=alt.Scale(zero=True)),
        y=alt.Y("recall:Q", title=f"recall@{s['limit']} (higher is better)", scale=alt.Scale(domain=[0, 1])),
        tooltip=["system", alt.Tooltip("recall:Q", format=".3f"), alt.Tooltip("ms_per_recall:Q", format=".2f"),
                 "on_front"])
    points = base.mark_point(filled=True, size=90).encode(
        color=alt.Color("on_front:N", title="on the front", scale=alt.Scale(domain=[True, False],
                                                                            range=["#e45756", "#9ecae9"])))
    labels = base.mark_text(align="left", dx=8, dy=-6).encode(text="system")
    line = alt.Chart(front[front["on_front"]].sort_values("ms_per_recall")).mark_line(
        color="#e45756", strokeDash=[4, 3]).encode(x="ms_per_recall:Q", y="recall:Q")
    shared.chart((line + points + labels).properties(height=320))
