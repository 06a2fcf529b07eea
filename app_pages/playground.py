"""Playground: type turns and facts into a session on a movable clock, then query, grade and correct.

The session is saved as vxmem JSONL under config.SESSIONS_DIR and named in the URL (?pg=...),
so a reload (or the URL in another tab) restores it; the download is the same file, which the
Replay page loads and the upload box here restores.
"""

import hashlib

import pandas as pd
import streamlit as st

from app_pages import config, shared
from vxmem.memory.rules import RuleKeyValueJudge
from vxmem.workbench import views
from vxmem.workbench.datasets import DatasetError

state = st.session_state
# What the widgets show, kept outside them: Streamlit drops a widget's state on a page that
# does not draw it, and the playground must survive a visit to another page.
KEPT = {"query": config.PLAYGROUND_QUERY, "session": "demo", "relevant": list(config.PLAYGROUND_RELEVANT),
        "judge": False}


def kept(name: str) -> str:
    """The widget key of kept value ``name``, primed with it."""
    state[f"pg_{name}"] = state.pg_kept[name]
    return f"pg_{name}"


def keep(name: str) -> None:
    changed = state.pg_kept.get(name) != state[f"pg_{name}"]
    state.pg_kept[name] = state[f"pg_{name}"]
    if name in ("session", "query"):  # another question or session: what was said about the last one goes
        state.pg_message = None
    if name == "query" and changed:  # the memories marked relevant answered the last question, not this one
        state.pg_kept["relevant"] = []


# Widgets whose value belongs to one playground: a restore or a reset starts them afresh.
FRESH = ("pg_text", "pg_correction", "pg_target", "pg_chain", "pg_kind", "pg_role")


def forget_widgets() -> None:
    for k in FRESH:
        state.pop(k, None)


def restore(text: str, with_settings: bool = False) -> None:
    """Put a saved playground back: events, clock, query, session, relevant labels, judge
    (and, from a file, the slider values it was saved with)."""
    saved = views.playground_state(text)
    state.pg_events = saved["events"]
    state.pg_now = saved["now"]
    labels = {e.get("label") for e in saved["events"]}
    state.pg_kept = {"query": saved["query"] or config.PLAYGROUND_QUERY, "session": saved["session"] or "demo",
                     "relevant": [lab for lab in saved["relevant"] if lab in labels],
                     "judge": saved["judge"] == RuleKeyValueJudge.name}
    problems: list[str] = []
    if with_settings:  # a value out of range (or unknown) stays as it is, and is named
        values, problems = views.check_settings(saved["settings"], config.RANGES, list(config.EMBEDDERS.values()),
                                                base=shared.settings())
        shared.apply_settings(values)
    forget_widgets()
    said = f"Restored a session of {len(saved['events'])} events."
    state.pg_message = ("warning", f"{said} Not restored: {'; '.join(problems)}.") if problems else ("success", said)


def _saved_path(key: str):
    return config.SESSIONS_DIR / f"playground-{key}.jsonl"


state.setdefault("pg_kept", dict(KEPT))
if "pg_restore" in state:  # a URL naming a saved session, on this session's first run
    key = state.pop("pg_restore")
    path = _saved_path(key) if key.isalnum() and len(key) <= 64 else None
    try:
        if path is None or not path.exists():
            raise FileNotFoundError
        restore(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, DatasetError):  # gone, or edited by hand into something else
        state.pg_message = ("error", f"The saved playground {views.short(key)} is not on this machine "
                                     "(or no longer reads as one); starting afresh.")
state.setdefault("pg_events", [dict(e) for e in config.PLAYGROUND_SEED])
state.setdefault("pg_now", config.PLAYGROUND_NOW)
state.setdefault("pg_message", None)


def advance(seconds: float) -> None:
    state.pg_now += seconds


def add_event(event: dict, message: str) -> None:
    """Append one event if it validates; the page shows why when it does not."""
    candidate = state.pg_events + [event]
    try:
        views.playground_conversation(candidate, "", None, state.pg_now)
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
             "session": state.pg_kept["session"] or None, "text": text, "role": state.pg_role}
    if kind == "pinned fact":
        event["pinned"] = True
    add_event(event, f"Remembered {label}.")
    state.pg_text = ""


@st.cache_data(show_spinner=False, max_entries=256)
def recall(events_json: str, query: str, session, now: float, settings_json: str, judge, embedder: str,
           relevant: tuple[str, ...]):
    import json

    return views.playground_recall(json.loads(events_json), query, session, now, json.loads(settings_json), judge,
                                   views.embedder_for(embedder), relevant)


def ranked(events: list) -> dict:
    """The playground of ``events`` at the clock, asked the query, at the shared settings (cached)."""
    s = shared.settings()
    return recall(views.dumps_events(events), state.pg_kept["query"], state.pg_kept["session"] or None, state.pg_now,
                  views.settings_json(s), RuleKeyValueJudge.name if state.pg_kept["judge"] else None, s["embedder"],
                  tuple(state.pg_kept["relevant"]))


def newly_superseded(before: list, after: list) -> list[str]:
    """The labels of the memories that ``after`` supersedes and ``before`` did not (what a correction replaced)."""
    def fates(events):
        mem = ranked(events)["memories"]
        return dict(zip(mem["label"], mem["status"])) if "status" in mem else {}

    was = fates(before)
    return [lab for lab, fate in fates(after).items() if fate == "superseded" and was.get(lab) != "superseded"]


def correct() -> None:
    text = state.pg_correction.strip()
    target = state.pg_target
    if not target or not text:
        state.pg_message = ("error", "Pick a memory and type the corrected text.")
        return
    label = views.next_label(state.pg_events)
    before = state.pg_events
    add_event({"time": state.pg_now, "type": "feedback", "label": label, "target": target,
               "outcome": "corrected", "correction": text}, f"{label} now supersedes {target}.")
    replaced = newly_superseded(before, state.pg_events) if state.pg_events is not before else []
    if replaced and replaced != [target]:  # a correction of a corrected memory replaces its latest correction
        names = ", ".join(replaced)
        state.pg_message = ("success", f"{label} now supersedes {names}; {target} had already been replaced by "
                                       f"{names}.")
    state.pg_correction = ""


def grade(outcome: str, key: str) -> None:
    target = state.get(key)
    if not target:
        state.pg_message = ("error", "Query first, then grade one of the results.")
        return
    add_event({"time": state.pg_now, "type": "feedback", "target": target, "outcome": outcome},
              f"Graded {target} {outcome}.")


def reset() -> None:
    events, now, query, relevant = config.PLAYGROUND_DEMOS[state.get("pg_demo") or next(iter(config.PLAYGROUND_DEMOS))]
    state.pg_events = [dict(e) for e in events]
    state.pg_now = now
    state.pg_kept = dict(KEPT, query=query, relevant=list(relevant))
    state.pg_message = None
    forget_widgets()


def load_session() -> None:
    up = state.get("pg_upload")
    if up is None:
        return
    try:
        restore(views.check_upload(up.name, up.getvalue()), with_settings=True)
    except (DatasetError, ValueError, TypeError, KeyError) as exc:
        state.pg_message = ("error", f"Cannot restore {up.name}: {exc}")


st.title("Playground")
st.caption("A memory of your own: add turns and facts, move the clock, query it, grade what comes back, "
           "correct a memory and see the supersession chain. The session is kept in the URL: a reload brings "
           "it back.")

left, right = st.columns([2, 3], gap="large")
with left:
    st.markdown(f"**Clock** {pd.Timestamp(state.pg_now, unit='s', tz='UTC'):%Y-%m-%d %H:%M} UTC")
    steps = list(config.CLOCK_STEPS.items())
    for row in (steps[:2], steps[2:]):
        for col, (name, secs) in zip(st.columns(2), row):
            col.button(name, on_click=advance, args=(secs,), key=f"pg_step_{name}", width="stretch")
    st.text_input("Session", key=kept("session"), on_change=keep, args=("session",))
    st.text_area("Say or state something", key="pg_text", height=80,
                 placeholder="e.g. I moved to Porto last week")
    c1, c2 = st.columns(2)
    c1.radio("As a", ["turn", "fact", "pinned fact"], key="pg_kind", horizontal=True)
    c2.selectbox("Role", ["user", "assistant"], key="pg_role")
    st.button("Remember", on_click=remember, type="primary", key="pg_remember")
    judge = st.checkbox("Supersede contradicted facts with the rule-based key-value judge", key=kept("judge"),
                        on_change=keep, args=("judge",),
                        help="vxmem.memory.rules.RuleKeyValueJudge: reads 'X lives in Y'-style facts; no model.")
    with st.expander("Correct a memory"):
        labels = [e["label"] for e in state.pg_events if e.get("label")]
        st.selectbox("Memory", labels, key="pg_target")
        st.text_input("Corrected text", key="pg_correction")
        st.button("Correct it", on_click=correct, key="pg_correct")
    d1, d2 = st.columns([3, 2])
    d1.selectbox("Start again from", list(config.PLAYGROUND_DEMOS), key="pg_demo", label_visibility="collapsed",
                 help="A correction made with feedback(), or a plain chat where nothing says what changed.")
    d2.button("Reset the playground", on_click=reset, key="pg_reset", width="stretch")
    if state.pg_message:
        kind, text = state.pg_message
        {"error": st.error, "warning": st.warning}.get(kind, st.success)(views.plain(text, 600))

with right:
    s1, s2 = st.columns(2)
    with s1:
        shared.param_sliders(("half_life_days", "recency_weight"))
    with s2:
        shared.param_sliders(("feedback_weight", "limit"))
    settings = shared.settings()
    st.text_input("Query", key=kept("query"), on_change=keep, args=("query",))
    query = state.pg_kept["query"]
    session = state.pg_kept["session"] or None
    out = ranked(state.pg_events)
    ranking = out["ranking"]
    if ranking.empty:
        st.info("Type a query (and remember something in this session) to see a ranking.")
    else:
        # Half the page wide: the memory and its score; the bars below split the score into its parts.
        shared.ranking_table(ranking, order=("rank", "label", "text", "score", "relevance"), text_width=200)
        asking = ranking["asks_only"].fillna(False).astype(bool) if "asks_only" in ranking else None
        if asking is not None and asking.any():
            st.caption(f"{', '.join(ranking.loc[asking, 'label'].astype(str))} only asks (every sentence a "
                       "question), so its relevance sits at the pool's floor: a question states nothing that "
                       "answers the query.")
        shared.relevance_warning(float(ranking["relevance"].max()), out["low_relevance"], out["mode"],
                                 out.get("rerank"), out.get("match_probability"), ranking)
        shared.score_bars(ranking, settings)
        g1, g2, g3 = st.columns([2, 1, 1])
        # Keyed by what was ranked: another query, session, clock or memory offers a fresh choice.
        graded = "pg_graded:" + hashlib.sha256(f"{query}\x00{session}\x00{state.pg_now}\x00"
                                               f"{views.dumps_events(state.pg_events)}".encode()).hexdigest()[:12]
        g1.selectbox("Grade a result", ranking["label"].tolist(), key=graded)
        g2.button("useful", on_click=grade, args=("useful", graded), key="pg_useful", width="stretch")
        g3.button("dead end", on_click=grade, args=("dead_end", graded), key="pg_dead_end", width="stretch")

    history = out["history"]
    st.subheader("Supersession chains")
    if history.empty:
        st.caption("No memory has been corrected or contradicted yet.")
    else:
        chain = st.selectbox("Chain", history["chain"].unique().tolist(), key="pg_chain")
        st.dataframe(history[history["chain"] == chain].drop(columns=["chain"]), hide_index=True, width="stretch",
                     column_config={"label": st.column_config.TextColumn(width=50),
                                    "text": st.column_config.TextColumn(width=170),
                                    "kind": st.column_config.TextColumn(width=45),
                                    "live": st.column_config.CheckboxColumn(width=45),
                                    "ts": st.column_config.DatetimeColumn("made", format="YYYY-MM-DD", width=95),
                                    "superseded_at": st.column_config.DatetimeColumn("superseded", width=95,
                                                                                     format="YYYY-MM-DD")})

if not out["why"].empty:
    st.subheader("Why (not) recalled")
    st.caption("Every memory of the playground and why this recall did or did not return it "
               "(vxmem.workbench.analysis.why.why_recalled_live, the same reasons as the Replay page's).")
    shared.why_table(out["why"], key="pg_why")
with st.expander(f"All {len(out['memories'])} memories"):
    st.dataframe(out["memories"], hide_index=True, width="stretch",
                 column_order=("label", "status", "kind", "session", "created", "end", "tokens", "text"),
                 column_config={"text": st.column_config.TextColumn(width="large")})

labels = [e["label"] for e in state.pg_events if e.get("label")]
state.pg_kept["relevant"] = [lab for lab in state.pg_kept["relevant"] if lab in labels]
st.multiselect("Memories this query should return (the probe's relevant labels in the download)", labels,
               key=kept("relevant"), on_change=keep, args=("relevant",))
text = views.playground_jsonl(state.pg_events, state.pg_now, query, session, settings,
                              RuleKeyValueJudge.name if judge else None, state.pg_kept["relevant"])
key = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
if state.get("pg_saved") != key:
    try:
        config.SESSIONS_DIR.mkdir(parents=True, exist_ok=True)
        path = _saved_path(key)
        if not path.exists():
            path.write_text(text, encoding="utf-8")
        state.pg_saved = key
    except OSError as exc:  # a read-only home: the download still works
        st.caption(f"Not kept for a reload ({exc.strerror or exc}); download it instead.")
shared.publish_settings()
d1, d2 = st.columns(2)
d1.download_button("Download this session as vxmem JSONL (the Replay page loads it)", text,
                   file_name="playground.jsonl", key="pg_download", disabled=not query.strip(),
                   help="The events, the query as a probe at the clock's time with the relevant labels above, "
                        "the judge and the slider values.")
d2.file_uploader("Restore a downloaded session", type=["jsonl"], key="pg_upload", on_change=load_session)
