"""Playground: type turns and facts into a session on a movable clock, then query, grade and correct."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, shared
from vxmem import views
from vxmem.datasets import Conversation, Event, dumps_jsonl
from vxmem.rules import RuleKeyValueJudge

state = st.session_state
state.setdefault("pg_events", [dict(e) for e in config.PLAYGROUND_SEED])
state.setdefault("pg_now", config.PLAYGROUND_NOW)
state.setdefault("pg_message", None)


def advance(seconds: float) -> None:
    state.pg_now += seconds


def add_event(event: dict, message: str) -> None:
    """Append one event if it validates; the page shows why when it does not."""
    candidate = state.pg_events + [event]
    try:
        Conversation("playground", [Event.from_dict(dict(e)) for e in candidate])
    except ValueError as exc:
        state.pg_message = ("error", f"Not added: {exc}")
        return
    state.pg_events = candidate
    state.pg_message = ("success", message)


def remember() -> None:
    text = state.pg_text.strip()
    if not text:
        state.pg_message = ("error", "Type something to remember first.")
        return
    kind = state.pg_kind
    label = views.next_label(state.pg_events)
    event = {"time": state.pg_now, "type": "turn" if kind == "turn" else "fact", "label": label,
             "session": state.pg_session or None, "text": text, "role": state.pg_role}
    if kind == "pinned fact":
        event["pinned"] = True
    add_event(event, f"Remembered {label}.")
    state.pg_text = ""


def correct() -> None:
    text = state.pg_correction.strip()
    if not state.pg_target or not text:
        state.pg_message = ("error", "Pick a memory and type the corrected text.")
        return
    label = views.next_label(state.pg_events)
    add_event({"time": state.pg_now, "type": "feedback", "label": label, "target": state.pg_target,
               "outcome": "corrected", "correction": text}, f"{label} now supersedes {state.pg_target}.")
    state.pg_correction = ""


def grade(outcome: str) -> None:
    if not state.get("pg_graded"):
        state.pg_message = ("error", "Query first, then grade one of the results.")
        return
    add_event({"time": state.pg_now, "type": "feedback", "target": state.pg_graded, "outcome": outcome},
              f"Graded {state.pg_graded} {outcome}.")


def reset() -> None:
    state.pg_events = [dict(e) for e in config.PLAYGROUND_SEED]
    state.pg_now = config.PLAYGROUND_NOW
    state.pg_message = None


@st.cache_data(show_spinner=False, max_entries=256)
def recall(events_json: str, query: str, session, now: float, settings_json: str, judge):
    return views.playground_recall(json.loads(events_json), query, session, now, json.loads(settings_json), judge)


st.title("Playground")
st.caption("A memory of your own: add turns and facts, move the clock, query it, grade what comes back, "
           "correct a memory and see the supersession chain.")

left, right = st.columns([2, 3], gap="large")
with left:
    st.markdown(f"**Clock** {pd.Timestamp(state.pg_now, unit='s', tz='UTC'):%Y-%m-%d %H:%M} UTC")
    steps = list(config.CLOCK_STEPS.items())
    for row in (steps[:2], steps[2:]):
        for col, (name, secs) in zip(st.columns(2), row):
            col.button(name, on_click=advance, args=(secs,), key=f"pg_step_{name}", width="stretch")
    st.text_input("Session", "demo", key="pg_session")
    st.text_area("Say or state something", key="pg_text", height=80,
                 placeholder="e.g. I moved to Porto last week")
    c1, c2 = st.columns(2)
    c1.radio("As a", ["turn", "fact", "pinned fact"], key="pg_kind", horizontal=True)
    c2.selectbox("Role", ["user", "assistant"], key="pg_role")
    st.button("Remember", on_click=remember, type="primary", key="pg_remember")
    judge = st.checkbox("Supersede contradicted facts with the rule-based key-value judge", key="pg_judge",
                        help="vxmem.rules.RuleKeyValueJudge: reads 'X lives in Y'-style facts; no model.")
    with st.expander("Correct a memory"):
        labels = [e["label"] for e in state.pg_events if e.get("label")]
        st.selectbox("Memory", labels, key="pg_target")
        st.text_input("Corrected text", key="pg_correction")
        st.button("Correct it", on_click=correct, key="pg_correct")
    st.button("Reset the playground", on_click=reset, key="pg_reset")
    if state.pg_message:
        kind, text = state.pg_message
        (st.error if kind == "error" else st.success)(text)

with right:
    s1, s2 = st.columns(2)
    with s1:
        settings = shared.param_sliders("pg", ("half_life_days", "recency_weight"))
    with s2:
        settings.update(shared.param_sliders("pg", ("feedback_weight", "limit")))
    query = st.text_input("Query", config.PLAYGROUND_QUERY, key="pg_query")
    out = recall(views.dumps_events(state.pg_events), query, state.pg_session or None, state.pg_now,
                 json.dumps(settings, sort_keys=True), RuleKeyValueJudge.name if judge else None)
    ranking = out["ranking"]
    if ranking.empty:
        st.info("Type a query (and remember something in this session) to see a ranking.")
    else:
        note = views.low_relevance_note(ranking, out["low_relevance"])
        if note:
            st.warning(note)
        st.dataframe(ranking[["rank", "label", "text", "score", "relevance", "relevance_norm", "recency", "feedback",
                              "age_days", "kind"]], hide_index=True, width="stretch")
        parts = out["parts"]
        bars = alt.Chart(parts).mark_bar().encode(
            x=alt.X("contribution:Q", title="score contribution"),
            y=alt.Y("label:N", sort=alt.SortField("rank"), title=None),
            color=alt.Color("part:N", sort=["relevance", "recency", "feedback"]),
            tooltip=["label", "text", "part", alt.Tooltip("contribution:Q", format=".3f")])
        shared.chart(bars.properties(height=40 + 28 * len(ranking)))
        st.caption("score = relevance_norm + recency_weight x 0.5^(age / half_life) "
                   "+ feedback_weight x clamp(feedback, +-2)")
        g1, g2, g3 = st.columns([2, 1, 1])
        g1.selectbox("Grade a result", ranking["label"].tolist(), key="pg_graded")
        g2.button("useful", on_click=grade, args=("useful",), key="pg_useful", width="stretch")
        g3.button("dead end", on_click=grade, args=("dead_end",), key="pg_dead_end", width="stretch")

    history = out["history"]
    st.subheader("Supersession chains")
    if history.empty:
        st.caption("No memory has been corrected or contradicted yet.")
    else:
        chain = st.selectbox("Chain", history["chain"].unique().tolist(), key="pg_chain")
        st.dataframe(history[history["chain"] == chain].drop(columns=["chain"]), hide_index=True, width="stretch")

with st.expander(f"All {len(out['memories'])} memories"):
    st.dataframe(out["memories"].drop(columns=["id"]), hide_index=True, width="stretch")
conv = Conversation("playground", [Event.from_dict(dict(e)) for e in state.pg_events],
                    description="typed into the vxmem workbench playground")
st.download_button("Download this session as vxmem JSONL (load it on the Replay page)", dumps_jsonl(conv),
                   file_name="playground.jsonl", key="pg_download")
