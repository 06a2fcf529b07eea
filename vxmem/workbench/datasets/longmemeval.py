"""LongMemEval (Wu et al. 2024): one question over a haystack of dated chat sessions.

A LongMemEval file is a JSON list of instances. Each has ``haystack_sessions`` (lists of
``role`` / ``content`` turns, the answering ones flagged ``has_answer``) with parallel
``haystack_dates`` and ``haystack_session_ids``, and one ``question`` at ``question_date``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from .model import Conversation, Event
from .sources import TURN_GAP, load_list

MARKERS = ('"question_id"', '"haystack_sessions"')  # text near the top of a file that says it is LongMemEval

_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$")


def parse_longmemeval_date(text: str) -> float:
    """``"2023/05/30 (Tue) 23:40"`` as epoch seconds (UTC)."""
    m = _DATE.match(text or "")
    if not m:
        raise ValueError(f"not a LongMemEval date like '2023/05/30 (Tue) 23:40': {text!r}")
    y, mo, d, h, mi = (int(x) for x in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=UTC).timestamp()


def load_longmemeval(path) -> list[Conversation]:
    """LongMemEval (a JSON list of instances) as one conversation per instance.

    Haystack sessions, in date order, become memory sessions named by their ids; each turn
    is labelled ``"<session_id>:<i>"``. The question is one probe across sessions at
    ``question_date`` whose relevant events are the ``has_answer`` turns and whose
    ``relevant_sessions`` are the answer sessions; the category is the question type,
    and abstention questions (id ending ``_abs``) are flagged in the probe's meta.
    """
    return load_list(path, "a LongMemEval file is a JSON list of instances", "instance", "question_id",
                     _instance)


_KEYS = ("question_id", "question", "question_date", "haystack_sessions", "haystack_dates", "haystack_session_ids")


def _instance(inst: Any) -> Conversation:
    if not isinstance(inst, dict):
        raise ValueError("an instance must be an object")
    missing = [k for k in _KEYS if k not in inst]
    if missing:
        hint = " (this looks like LoCoMo: use load_locomo)" if "conversation" in inst and "qa" in inst else ""
        raise ValueError(f"not a LongMemEval instance: expected keys {', '.join(_KEYS)}; missing "
                         f"{', '.join(missing)}{hint}")
    qid = str(inst["question_id"])
    sessions, dates, ids = inst["haystack_sessions"], inst["haystack_dates"], inst["haystack_session_ids"]
    if not (isinstance(sessions, list) and isinstance(dates, list) and isinstance(ids, list)):
        raise ValueError("haystack_sessions, haystack_dates and haystack_session_ids must be lists")
    if not len(sessions) == len(dates) == len(ids):
        raise ValueError(f"haystack_sessions, haystack_dates and haystack_session_ids differ in length "
                         f"({len(sessions)}, {len(dates)}, {len(ids)})")
    events, relevant = _haystack(sessions, dates, ids)
    tq = parse_longmemeval_date(inst["question_date"])
    if events and tq < events[-1].time:
        tq = events[-1].time
    qtype = inst.get("question_type")
    question = inst["question"]
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"'question' must be a non-empty string, got {question!r}")
    answer_sessions = inst.get("answer_session_ids") or []
    if not isinstance(answer_sessions, list):
        raise ValueError(f"'answer_session_ids' must be a list of session ids, got {answer_sessions!r}")
    events.append(Event(time=tq, type="probe", label="q", query=question, session=None,
                        relevant=relevant, category=None if qtype is None else str(qtype),
                        relevant_sessions=tuple(str(s) for s in answer_sessions),
                        meta={"answer": inst.get("answer"), "abstention": qid.endswith("_abs")}))
    return Conversation(name=qid, events=events, description=f"LongMemEval {qtype} question {qid}",
                        meta={"source": "longmemeval",
                              "stats": {"sessions": len(sessions), "turns": len(events) - 1,
                                        "evidence_turns": len(relevant)}})


def _haystack(sessions: list[Any], dates: list[Any], ids: list[Any]) -> tuple[list[Event], dict[str, float]]:
    """Every haystack turn as a turn event (sessions in date order, turns a minute apart),
    and the labels of the ``has_answer`` turns as relevant."""
    order = sorted(range(len(sessions)), key=lambda i: parse_longmemeval_date(dates[i]))
    events: list[Event] = []
    relevant: dict[str, float] = {}
    for i in order:
        t0 = parse_longmemeval_date(dates[i])
        if events and t0 <= events[-1].time:
            t0 = events[-1].time + TURN_GAP
        sess = str(ids[i])
        if not isinstance(sessions[i], list):
            raise ValueError(f"haystack session {sess!r} must be a list of turns")
        for j, turn in enumerate(sessions[i]):
            if not isinstance(turn, dict) or not isinstance(turn.get("content"), str):
                raise ValueError(f"session {sess!r} turn {j} needs 'role' and 'content'")
            if not turn["content"].strip():
                continue
            label = f"{sess}:{j}"
            if turn.get("has_answer"):
                relevant[label] = 1.0
            events.append(Event(time=t0 + j * TURN_GAP, type="turn", label=label, session=sess,
                                role=str(turn.get("role") or "user"), text=turn["content"]))
    return events, relevant
