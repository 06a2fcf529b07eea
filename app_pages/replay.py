"""Replay: the conversation on its timeline, and what recall returned at each probe, and why."""

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, report_box, shared
from vxmem.workbench import views

st.title("Replay")
st.caption("The dataset replayed through a fresh memory on a simulated clock. At a probe, the ranking is "
           "the cached candidate pool ranked at the shared settings, which is exactly what `recall()` "
           "returns with them (at the defaults: what the replay's own `recall()` returned).")
key, convs, reps = shared.dataset()


@st.cache_data(show_spinner=False, max_entries=64)
def timeline(key: str, ri: int, _rep):
    return views.memory_timeline(_rep)


@st.cache_data(show_spinner=False, max_entries=128)
def probe_frames(key: str, ri: int, point: str, _rep):
    import json

    per = views.probe_metrics_at([_rep], json.loads(point))
    recorded = views.probe_metrics(_rep)
    return recorded[["probe", "label", "time", "query", "session", "category"]].join(
        per[["hit", "rr", "ndcg", "stale_leak"]].reset_index(drop=True))


@st.cache_data(show_spinner=False, max_entries=256)
def explain(key: str, ri: int, probe: int, point: str, _rep, _conv):
    import json

    return views.explain(_rep, probe, json.loads(point), _conv)


st.dataframe(views.conversation_summary(convs), hide_index=True, width="stretch",
             column_config={"description": st.column_config.TextColumn(width="large")})
if len(reps) > 1:
    ri = st.selectbox("Conversation", list(range(len(reps))), format_func=lambda i: reps[i].name, key="replay_conv",
                      on_change=lambda: st.session_state.pop("replay_probe", None))  # its probes start at the first
else:
    ri = 0
rep = reps[ri]
mem = timeline(key, ri, rep)
with st.expander("Ranking parameters (shared by every page)"):
    shared.param_sliders(columns=3)
point = views.settings_json(shared.point())
probes = probe_frames(key, ri, point, rep)

st.subheader("Memories by session and kind")
fates = ["live", "summary", "superseded", "expired", "consolidated", "forgotten", "deleted"]
status_colors = alt.Scale(domain=fates, range=["#4c78a8", "#54a24b", "#e45756", "#f58518", "#b279a2", "#9d755d",
                                               "#bab0ac"])
lanes = mem["lane"].nunique()
# Room for the spread within a lane, and a chart at least MIN_TIMELINE_PX tall: one lane was 70 px of plot.
lane_px = max(90 if lanes <= 2 else 48, -(-config.MIN_TIMELINE_PX // max(lanes, 1)))
when = alt.Axis(format=views.time_format(mem["created"]), labelOverlap=True)  # every tick with its year
# Each memory sits at its own height in its lane (a fixed spread, not random), small and half
# transparent, so memories made at one moment do not hide each other; its bar runs at the same height.
spread = alt.YOffset("jitter:Q", scale=alt.Scale(domain=[-0.5, 0.5], range=[6, lane_px - 6]), title=None)
base = alt.Chart(mem)
spans = base.transform_filter("isValid(datum.end)").mark_rule(opacity=0.3, strokeWidth=1.5).encode(
    x=alt.X("created:T"), x2=alt.X2("end:T"), y=alt.Y("lane:N"), yOffset=spread,
    color=alt.Color("status:N", scale=status_colors, legend=None))
dots = base.mark_point(filled=True, size=28, opacity=0.65).encode(
    x=alt.X("created:T", title="time", axis=when), y=alt.Y("lane:N", title="session / kind"), yOffset=spread,
    color=alt.Color("status:N", scale=status_colors, title="fate",
                    legend=alt.Legend(orient="bottom", direction="horizontal", columns=7)),
    shape=alt.Shape("kind:N", title="kind", legend=alt.Legend(orient="bottom", direction="horizontal")),
    tooltip=shared.tips("label", "kind", "status", "text", "created:T", "end:T", "tokens"))
ticks = alt.Chart(probes).mark_rule(color="gray", strokeDash=[2, 3], opacity=0.5).encode(
    x=alt.X("time:T"), tooltip=shared.tips("label", "query", "hit", "ndcg"))
# The spans' colour legend off and the legends resolved apart, so the dots' fate legend shows (below the
# chart, where a long one is not clipped) beside the kind legend.
shared.chart((ticks + spans + dots).resolve_legend(color="independent").properties(
    height=alt.Step(lane_px) if lanes else 200))
counts = mem["status"].value_counts()
st.caption("Dotted lines: probes. A faint bar runs from a memory's creation to the moment it was superseded, "
           "expired, consolidated or forgotten (by the event that did it). "
           + ", ".join(f"{v} {k}" for k, v in counts.items()) + ".")

st.subheader("What recall returned at a probe")
if probes.empty:
    st.info("This conversation has no probes.")
    st.stop()
pi = st.select_slider("Probe, in time order (drag to move along the timeline)", list(range(len(probes))),
                      key="replay_probe",
                      format_func=lambda i: f"{probes.iloc[i]['label']} ({probes.iloc[i]['time']:%Y-%m-%d %H:%M})")
row = probes.iloc[pi]
st.markdown(f"**{views.plain(row['query'], 300)}** ({views.plain(views.session_text(row['session']))})")
cols = st.columns(4)
for col, m in zip(cols, ("hit", "rr", "ndcg", "stale_leak")):
    col.metric({"rr": "reciprocal rank"}.get(m, config.METRIC_LABELS.get(m, m)) + " (this probe)",
               "n/a" if pd.isna(row[m]) else f"{row[m]:.3f}")
shared.intervals_caption(views.metric_intervals(probes, config.HEADLINE_METRICS),
                         "Means over this conversation's probes at these settings")
conv = convs[ri] if len(convs) == len(reps) else None
why = explain(key, ri, pi, point, rep, conv)
results = views.returned(why)
shared.ranking_table(results, key="replay_results")
best = why["relevance"].max() if why["relevance"].notna().any() else None
shared.relevance_warning(best, rep.meta.get("low_relevance"), rep.mode, rep.rerank,
                         views.replay_match_probability(rep, pi, shared.point()["limit"]), results)
if not results.empty:
    shared.score_bars(results, shared.settings())
missed = views.missed_at(why)
if not missed.empty:
    st.markdown("**Relevant memories that existed but were not returned**, and why")
    st.dataframe(missed, hide_index=True, width="stretch", column_config=shared.RESULT_COLUMNS)
st.subheader("Why (not) recalled")
st.caption("Every memory that existed at this probe, with the reason it was or was not returned "
           "(vxmem.workbench.analysis.why.why_recalled): its rank and score parts, or what cut it.")
shared.why_table(why, key="replay_why")
with st.expander("Every probe's metrics at these settings"):
    st.dataframe(probes, hide_index=True, width="stretch")


@st.cache_data(show_spinner=False, max_entries=64)
def by_category(key: str, point: str, _reps):
    import json

    return views.category_table(_reps, json.loads(point))


if len(reps) > 1 or any(p.get("category") is not None for r in reps for p in r.probes):
    limit = shared.point()["limit"]
    st.subheader(f"recall@{limit} by category and conversation")
    st.dataframe(by_category(key, point, reps), hide_index=True, width="stretch")
    st.caption(f"The table papers print (as `vxmem replay` does): recall@{limit} at the shared settings over every "
               "conversation of the dataset, each cell its mean and bootstrap 95% interval over the probes.")

report_box.report_section(key, reps)
