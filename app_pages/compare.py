"""Compare: every ranking policy on the same cached pools, at its default and at its best; other
memory systems, and every recall preset with every policy, as quality against cost."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, shared
from vxmem.workbench import views
from vxmem.workbench.views import cost_charts
from vxmem.workbench.views.systems import DASHBOARD_SYSTEMS, systems_frames

# The harness's cost columns as a reader reads them: (label, what it measures).
COST_LABELS = {"ms_per_recall": ("ms per recall", "median milliseconds of one recall"),
               "ms_per_write": ("ms per write", "median milliseconds of one write (a turn or a fact)"),
               "setup_s": ("setup (s)", "seconds to build and warm up a fresh system, summed over the conversations")}
st.title("Compare")
st.caption("The spec's blend against plain cosine, multiplicative decay, LangChain's time-weighted retriever, "
           "Generative Agents and MemoryBank, ranking the very same candidate pools. \"best\" searches each "
           "policy's own parameters for the chosen metric on some probes and is reported on the others; limit and "
           "token budget are the shared settings.")
key, convs, reps = shared.dataset()


def with_ci(frame, metrics):
    """``frame`` with each of ``metrics`` as one text cell, its mean and its bootstrap 95% interval
    ("0.917 [0.854, 0.972]"), so a table of them fits the page."""
    return frame.assign(**{m: [f"{v:.3f} [{lo:.3f}, {hi:.3f}]" for v, lo, hi in
                               zip(frame[m], frame[f"{m}_lo"], frame[f"{m}_hi"])] for m in metrics})


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
cells = with_ci(table, shown)
st.dataframe(cells[["policy", "setting", "params", *shown, "probes"]], hide_index=True, width="stretch",
             height=38 + 35 * len(cells), column_order=["policy", "setting", "params", *shown], column_config={
                 "policy": st.column_config.TextColumn(width=120), "setting": st.column_config.TextColumn(width=65),
                 "params": st.column_config.TextColumn(width=170),
                 **{m: st.column_config.TextColumn(f"{config.METRIC_LABELS[m]} [95% CI]", width=125) for m in shown}})
tuned = int(table["tuned_on"].max())
if tuned:
    st.caption(f"Each policy's best is chosen on {tuned} tune probes; both rows are reported on the other "
               f"{int(table['probes'].max())}, held out (as the Sweep page's honest tuning), so \"best\" is not "
               "judged on the probes that chose it. Each mean has its bootstrap 95% interval.")
else:
    st.caption(f"Means over {int(table['probes'].max())} probes, each with its bootstrap 95% interval (too few "
               "probes to hold some out: \"best\" is chosen and reported on the same ones).")
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
            tooltip=shared.tips("policy", "setting", "params", alt.Tooltip(f"{m}:Q", format=".3f"),
                                alt.Tooltip(f"{m}_lo:Q", title="95% CI low", format=".3f"),
                                alt.Tooltip(f"{m}_hi:Q", title="95% CI high", format=".3f"), "probes"))
        whiskers = alt.Chart(table).mark_rule(color="#333333").encode(x=x, xOffset=offset, y=alt.Y(f"{m}_lo:Q"),
                                                                      y2=alt.Y2(f"{m}_hi:Q"))
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


sys_table = None
if picked:
    with st.spinner("Replaying the dataset through each system..."):
        sys_table, front = systems(key, tuple(picked), s["limit"], s["embedder"], convs)
    quality = {c: st.column_config.NumberColumn(config.METRIC_LABELS.get(c, c), format="%.3f")
               for c in ("hit", "recall", "mrr", "ndcg", "stale_leak")}
    cost = {c: st.column_config.NumberColumn(label, format="%.2f", help=why) for c, (label, why) in COST_LABELS.items()}
    st.dataframe(sys_table.drop(columns=["error"] if sys_table["error"].isna().all() else []), hide_index=True,
                 width="stretch", column_config={**quality, **cost})
    shared.chart(cost_charts.systems_chart(front, s["limit"]))

st.header("Presets and policies: quality against cost")
st.caption("A dot per recall preset and ranking policy: the dataset replayed with the preset, without the replay "
           "cache (each recall embeds its query and runs its second stage, as a live one does), its recorded pools "
           "ranked by the policy (the blend at the replay's settings is the live recall). Milliseconds: the median "
           "time the preset's recall took in that replay; a policy re-ranks the very same pool, so it costs its "
           "preset's milliseconds (policies that also recall alike are drawn as rings around each other). Grey "
           "crosses: the systems picked above, timed by the harness. Dashed: the Pareto front, circled and labelled.")


@st.cache_data(show_spinner=False, max_entries=16)
def preset_costs(key: str, point: str, names: tuple[str, ...], _reps, _sys_table):
    return views.presets_quality_cost(_reps, _sys_table, point=json.loads(point))


preset_key, preset_reps = shared.preset_replays()
point = json.dumps({"limit": s["limit"], "token_budget": s["token_budget"]})
with st.spinner("Ranking every preset's pools with every policy..."):
    points = preset_costs(preset_key, point, tuple(picked), preset_reps, sys_table)
shared.chart(cost_charts.presets_chart(points, s["limit"], list(preset_reps)))
with st.expander("Every point"):
    st.dataframe(points[["label", "recall", "ms_per_recall", "on_front", "probes"]], hide_index=True,
                 width="stretch", column_config={
                     "label": st.column_config.TextColumn("preset, policy or system"),
                     "recall": st.column_config.NumberColumn(f"recall@{s['limit']}", format="%.3f"),
                     "ms_per_recall": st.column_config.NumberColumn(COST_LABELS["ms_per_recall"][0], format="%.2f"),
                     "on_front": st.column_config.CheckboxColumn("on the Pareto front")})


@st.cache_data(show_spinner=False, max_entries=16)
def preset_table(key: str, point: str, _reps):
    return views.presets_table(_reps, point=json.loads(point))


per_preset = preset_table(preset_key, point, preset_reps)
categories = [c for c in per_preset if c.startswith("recall · ")]
timings = {c: st.column_config.NumberColumn(label, format="%.2f", width=80)
           for c, label in (("ms_p99", "ms p99"), ("ms_per_write", "ms per write"))}
timings = {"ms_p50": st.column_config.TextColumn("ms p50 [95% CI]", width=140), **timings}
per_preset = per_preset.assign(ms_p50=[f"{v:.2f} [{lo:.2f}, {hi:.2f}]" if pd.notna(v) else "n/a" for v, lo, hi in
                                       zip(per_preset["ms_p50"], per_preset["ms_p50_lo"], per_preset["ms_p50_hi"])])
# Two tables, so neither runs off the page however many categories the dataset has.
st.dataframe(with_ci(per_preset, ["recall"])[["preset", "recall", "mrr", "coverage", "depth", *timings, "probes"]],
             hide_index=True, width="stretch", column_config={
                 "preset": st.column_config.TextColumn(width=80),
                 "recall": st.column_config.TextColumn(f"recall@{s['limit']} [95% CI]", width=170),
                 "mrr": st.column_config.NumberColumn(f"MRR@{s['limit']}", format="%.3f", width=80),
                 "coverage": st.column_config.NumberColumn("coverage@D", format="%.3f", width=90),
                 "depth": st.column_config.NumberColumn("D", width=50), **timings,
                 "probes": st.column_config.NumberColumn(width=60)})
if categories:
    st.dataframe(per_preset[["preset", *categories]], hide_index=True, width="stretch", column_config={
        "preset": st.column_config.TextColumn(width=80),
        **{c: st.column_config.NumberColumn(c, format="%.3f") for c in categories}})
st.caption(f"Each preset's quality per millisecond (as `benchmarks/bench_quality.py` prints it), from the replays "
           f"above: recall@{s['limit']} of its live recall with its bootstrap 95% interval, then per probe category; "
           f"MRR@{s['limit']}, the mean reciprocal rank of each probe's first relevant memory (how high it sits); "
           "coverage@D, the share of each probe's relevant memories within the first D candidates of the preset's "
           "recorded first stage, ordered as its second stage picks what it reads (D: how deep that stage reads, "
           "120 for late interaction, before the accurate preset's cross-encoder; fast: its top k); ms p50 and p99 "
           "per recall and the median ms per write (each turn's or fact's `remember()`). The timings come from this "
           "replay on this machine, without the replay cache: compare them with each other, not with another "
           "machine's.")
untold = views.untold_timings(preset_table(preset_key, point, preset_reps))
if untold:
    pairs = "; ".join(f"{a} and {b}" for a, b in untold)
    st.info(f"On {int(per_preset['probes'].min())} probes, which recalls faster is not known for {pairs}: the "
            "intervals of their median times overlap. Replay a larger dataset before ranking them by speed.")
shared.sample_caveat(int(per_preset["probes"].min()))
