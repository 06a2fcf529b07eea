"""A long replay (a full LoCoMo or LongMemEval file) says how long it will take before it starts,
and starts when asked: the estimate of :func:`vxmem.workbench.replay.estimate.estimate`, timed on a
sample of the dataset here, and a button."""

from __future__ import annotations

from typing import Any

import streamlit as st

from vxmem.workbench import views
from vxmem.workbench.replay.estimate import estimate, is_long

GO = "long_replay_go"  # the replays the user asked to start, by cache key


@st.cache_data(show_spinner=False, max_entries=16)
def _estimate(key: str, embedder: str, _conversations: tuple, _settings: dict[str, Any]) -> str:
    return str(estimate(list(_conversations), dict(_settings), views.embedder_for(embedder)))


def _go(key: str) -> None:
    st.session_state.setdefault(GO, set()).add(key)


def confirm(key: Any, conversations: tuple, rs: dict[str, Any], embedder: str, done: bool) -> None:
    """Before a long replay that has not run in this process (``done``): say how long it will take and
    stop the page until the user starts it (every page then uses it)."""
    if done or not is_long(conversations) or str(key) in st.session_state.get(GO, set()):
        return
    with st.spinner("Timing a sample of this dataset..."):
        told = _estimate(str(key), embedder, conversations, rs)
    n_events = sum(len(c.events) for c in conversations)
    st.info(f"Replaying these {len(conversations)} conversation(s) ({n_events:,} events) through a fresh memory "
            f"takes {told}. Every page then uses the replay; another embedder or search mode replays again.")
    st.button("Replay it now", key="long_replay_start", type="primary", on_click=_go, args=(str(key),))
    st.stop()
