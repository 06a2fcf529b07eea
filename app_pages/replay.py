"""Replay: the conversation on its timeline, and what recall returned at each probe."""

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, shared
from vxmem import views

st.title("Replay")
st.caption("The dataset replayed through a fresh memory on a simulated clock, at the memory's default "
           "settings. Pick a conversation and a probe to see what `recall()` returned at that moment.")
key, convs, reps = shared.dataset()


@st.cache_data(show_spinner=False, max_entries=64)
def timeline(key: str, ri: int, _rep):
    return views.memory_timeline(_rep)


@st.cache_data(show_spinner=False, max_entries=64)
def probe_frames(key: str, ri: int, _rep):
    return views.probe_metrics(_rep)


st.dataframe(views.conversation_summary(convs), hide_index=True, width="stretch")
if len(reps) > 1:
    ri = st.selectbox("Conversation", list(range(len(reps))), format_func=lambda i: reps[i].name, key="replay_conv")
else:
    ri = 0
rep = reps[ri]
mem = timeline(key, ri, rep)
probes = probe_frames(key, ri, rep)

st.subheader("Memories by session and kind")
status_colors = alt.Scale(domain=["live", "summary", "superseded", "expired", "consolidated", "forgotten", "deleted"],
                          range=["#4c78a8", "#54a24b", "#e45756", "#f58518", "#b279a2", "#9d755d", "#bab0ac"])
base = alt.Chart(mem)
spans = base.transform_filter("isValid(datum.end)").mark_rule(opacity=0.35).encode(
    x="created:T", x2="end:T", y=alt.Y("lane:N"), color=alt.Color("status:N", scale=status_colors))
dots = base.mark_point(filled=True, size=45, opacity=0.8).encode(
    x=alt.X("created:T", title="time"), y=alt.Y("lane:N", title="session / kind"),
    color=alt.Color("status:N", scale=status_colors, title="fate"),
    shape=alt.Shape("kind:N", title="kind"),
    tooltip=["label", "kind", "status", "text", "created:T", "end:T", "tokens"])
ticks = alt.Chart(probes).mark_rule(color="gray", strokeDash=[2, 3]).encode(
    x="time:T", tooltip=["label", "query", "hit", "ndcg"])
shared.chart((ticks + spans + dots).properties(height=max(260, 30 * mem["lane"].nunique())))
counts = mem["status"].value_counts()
st.caption("Dotted lines: probes. A faint bar runs from a memory's creation to the moment it was superseded, "
           "expired, consolidated or forgotten. " + ", ".join(f"{v} {k}" for k, v in counts.items()) + ".")

st.subheader("What recall returned at a probe")
if probes.empty:
    st.info("This conversation has no probes.")
    st.stop()
pi = st.select_slider("Probe, in time order (drag to move along the timeline)", list(range(len(probes))),
                      key="replay_probe",
                      format_func=lambda i: f"{probes.iloc[i]['label']} ({probes.iloc[i]['time']:%Y-%m-%d %H:%M})")
st.markdown(f"**{probes.iloc[pi]['query']}** (session `{probes.iloc[pi]['session']}`)")
row = probes.iloc[pi]
cols = st.columns(4)
for col, m in zip(cols, ("hit", "rr", "ndcg", "stale_leak")):
    col.metric({"rr": "reciprocal rank"}.get(m, config.METRIC_LABELS.get(m, m)),
               "n/a" if pd.isna(row[m]) else f"{row[m]:.3f}")
results = views.probe_results(rep, pi)
st.dataframe(results, hide_index=True, width="stretch",
             column_config={"relevant": st.column_config.CheckboxColumn(), "stale": st.column_config.CheckboxColumn()})
missed = views.missed_relevant(rep, pi)
if not missed.empty:
    st.markdown("**Relevant memories that existed but were not returned**")
    st.dataframe(missed, hide_index=True, width="stretch")
with st.expander("Every probe's metrics"):
    st.dataframe(probes, hide_index=True, width="stretch")
