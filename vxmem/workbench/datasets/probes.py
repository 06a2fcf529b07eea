"""Probes written into a conversation: a question asked at a moment, with the memories a good
recall returns and those it must not (the chat logs' importer writes them; so can anyone)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ...core.clock import to_epoch
from .chatlogs import TURN_GAP
from .model import Conversation, Event


def add_probe(conversation: Conversation, query: str, relevant_labels, session: str | None = None,
              time=None, *, stale_labels: Sequence[str] = (), category: str | None = None,
              label: str | None = None, limit: int | None = None, answer: str | None = None) -> Conversation:
    """A new conversation with one more probe: ``query`` asked at ``time`` in ``session``.

    ``relevant_labels`` lists the turns a good recall returns (or maps them to grades > 0),
    ``stale_labels`` those it must not. ``session=None`` asks across every session;
    ``time`` defaults to :data:`~vxmem.workbench.datasets.chatlogs.TURN_GAP` after the last
    event, and an earlier time places the probe at that moment of the timeline. ``label``
    defaults to the first free ``q<n>``. ``answer``: the gold answer ``vxmem qa`` grades against
    (kept as ``meta["answer"]``). The original conversation is left unchanged.
    """
    if not isinstance(conversation, Conversation):
        raise TypeError(f"conversation must be a Conversation, not {type(conversation).__name__}")
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, not {type(query).__name__}")
    if not query.strip():
        raise ValueError("query must be a non-empty string")
    relevant = _check_labels(relevant_labels, "relevant_labels", graded=True)
    stale = tuple(_check_labels(stale_labels, "stale_labels", graded=False))
    both = sorted(set(relevant) & set(stale))
    if both:
        raise ValueError(f"label {both[0]!r} is in both relevant_labels and stale_labels")
    events = conversation.events
    _check_session(events, session)
    if time is None:
        t = (events[-1].time if events else 0.0) + TURN_GAP
    else:
        t = to_epoch(time, "time")
    at = {e.label: e for e in events if e.label is not None}
    for what, labels in (("relevant_labels", relevant), ("stale_labels", stale)):
        for lab in labels:
            ev = at.get(lab)
            if ev is None or not ev.creates_memory:
                raise ValueError(f"{what}: {lab!r} is not the label of a memory in this conversation")
            if ev.time > t:
                raise ValueError(f"{what}: {lab!r} is said after the probe's time")
    label = _probe_label(conversation, at, label)
    if category is not None and not isinstance(category, str):
        raise TypeError(f"category must be a str or None, not {type(category).__name__}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an int >= 1 or None, got {limit!r}")
    if answer is not None and (not isinstance(answer, str) or not answer.strip()):
        raise ValueError(f"answer must be a non-empty str or None, got {answer!r}")
    probe = Event(time=t, type="probe", label=label, query=query, session=session, relevant=relevant,
                  stale=stale, category=category, limit=limit, meta={} if answer is None else {"answer": answer})
    # After every event at or before its time: a probe sees what was said up to then.
    pos = next((i for i, e in enumerate(events) if e.time > t), len(events))
    return Conversation(name=conversation.name, events=[*events[:pos], probe, *events[pos:]],
                        description=conversation.description, meta=dict(conversation.meta))


def remove_probe(conversation: Conversation, label: str) -> Conversation:
    """A new conversation without the probe labelled ``label`` (a ``KeyError`` names the
    probes there are when there is no such probe). The original is left unchanged."""
    if not isinstance(conversation, Conversation):
        raise TypeError(f"conversation must be a Conversation, not {type(conversation).__name__}")
    probes = [e.label for e in conversation.events if e.type == "probe"]
    if label not in probes:
        raise KeyError(f"no probe labelled {label!r}; probes: {', '.join(str(p) for p in probes) or '(none)'}")
    events = [e for e in conversation.events if not (e.type == "probe" and e.label == label)]
    return Conversation(name=conversation.name, events=events, description=conversation.description,
                        meta=dict(conversation.meta))


def _check_session(events: Sequence[Event], session: str | None) -> None:
    """A probe's ``session``: None, or one that has memories among ``events``."""
    sessions = {e.session for e in events if e.creates_memory}
    if session is not None:
        if not isinstance(session, str):
            raise TypeError(f"session must be a str or None, not {type(session).__name__}")
        if session not in sessions:
            raise ValueError(f"session {session!r} has no memories in this conversation; "
                             f"sessions: {', '.join(sorted(s for s in sessions if s is not None)) or '(none)'}")


def _probe_label(conversation: Conversation, at: Mapping[str, Event], label: str | None) -> str:
    """``label``, checked unused (``at``: the conversation's events by label), or the first free ``q<n>``."""
    if label is None:
        n = len(conversation.probes) + 1
        while f"q{n}" in at:
            n += 1
        return f"q{n}"
    if not isinstance(label, str) or not label:
        raise ValueError(f"label must be a non-empty string, got {label!r}")
    if label in at:
        raise ValueError(f"label {label!r} is already used in this conversation")
    return label


def _check_labels(labels, name: str, graded: bool) -> dict[str, float]:
    if isinstance(labels, str):
        raise TypeError(f"{name} must be a list of labels, not a single string")
    if isinstance(labels, Mapping):
        if not graded:
            raise TypeError(f"{name} must be a list of labels")
        items = list(labels.items())
    else:
        try:
            items = [(lab, 1.0) for lab in labels]
        except TypeError:
            raise TypeError(f"{name} must be a list of labels, not {type(labels).__name__}") from None
    out: dict[str, float] = {}
    for lab, grade in items:
        if not isinstance(lab, str) or not lab:
            raise ValueError(f"{name} must hold non-empty string labels, got {lab!r}")
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or not math.isfinite(grade) or grade <= 0:
            raise ValueError(f"{name}: the grade of {lab!r} must be a number > 0, got {grade!r}")
        out[lab] = float(grade)
    return out
