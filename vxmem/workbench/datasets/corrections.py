"""Corrections in an imported chat: nothing in a chat log says that a turn corrects another, so a judge
finds them, or the user marks them, and the dataset then replays them as the library records a
correction (``feedback(old, "corrected", correction=new)``).

- :func:`find_corrections`: each user turn asked of a judge (``judge(new_text, [earlier texts])``,
  the library's judge contract: the rule-based one or an LLM endpoint's) against the earlier user
  turns of its session nearest to it: ``(corrected label, correcting label)`` pairs.
- :func:`mark_correction`: the conversation with one turn replayed as the correction of another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...models.embed import check_embedder
from .model import Conversation, DatasetError, Event

__all__ = ["find_corrections", "mark_correction", "correction_pairs", "CANDIDATES"]

CANDIDATES = 5  # earlier turns a judge reads per turn, the nearest first (as the memory's judge does)


def correction_pairs(conv: Conversation) -> list[tuple[str, str]]:
    """The corrections ``conv`` already replays: ``(corrected label, correcting label)`` of each feedback
    event that carries a correction."""
    return [(str(e.target), str(e.label)) for e in conv.events
            if e.type == "feedback" and e.correction is not None and e.label is not None]


def _said(conv: Conversation, roles: Sequence[str]) -> list[Event]:
    return [e for e in conv.events if e.type in ("turn", "fact") and e.label and e.text and e.role in roles]


def find_corrections(conv: Conversation, judge: Callable[[str, list[str]], Sequence[bool]], embedder: Any,
                     candidates: int = CANDIDATES, roles: Sequence[str] = ("user",)) -> list[tuple[str, str]]:
    """Each turn (of ``roles``) the ``judge`` says contradicts an earlier one of its session: the
    ``(corrected label, correcting label)`` pairs, in time order. A turn is read against the
    ``candidates`` earlier live turns nearest to it by ``embedder``'s cosine (a name, a callable, or
    None: the default); it corrects the
    nearest the judge names, which then is no longer a candidate (it has been replaced)."""
    said = _said(conv, roles)
    if len(said) < 2:
        return []
    vecs = np.asarray(check_embedder(embedder)([str(e.text) for e in said]), dtype=np.float64)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    retired: set[int] = set()
    pairs = []
    for i, ev in enumerate(said):
        earlier = [j for j in range(i) if said[j].session == ev.session and j not in retired
                   and said[j].time <= ev.time]
        if not earlier:
            continue
        nearest = sorted(earlier, key=lambda j: -float(vecs[j] @ vecs[i]))[:candidates]
        verdicts = list(judge(str(ev.text), [str(said[j].text) for j in nearest]))
        if len(verdicts) != len(nearest):
            raise ValueError(f"the judge answered {len(verdicts)} verdicts for {len(nearest)} earlier turns")
        hit = next((j for j, v in zip(nearest, verdicts) if v), None)
        if hit is not None:
            retired.add(hit)
            pairs.append((str(said[hit].label), str(ev.label)))
    return pairs


def mark_correction(conv: Conversation, corrected: str, correcting: str) -> Conversation:
    """``conv`` with the turn ``correcting`` replayed as the correction of the earlier ``corrected``:
    a ``feedback`` event (outcome ``corrected``, the turn's text as the correction, its label kept,
    so probes that name it still do). ``DatasetError`` names what cannot be marked."""
    by_label = {e.label: (i, e) for i, e in enumerate(conv.events) if e.label}
    for lab in (corrected, correcting):
        if lab not in by_label:
            raise DatasetError(f"no memory labelled {lab!r} in {conv.name!r}")
    (i_old, old), (i_new, new) = by_label[corrected], by_label[correcting]
    if corrected == correcting:
        raise DatasetError("a turn cannot correct itself")
    if new.type not in ("turn", "fact") or not new.text:
        raise DatasetError(f"{correcting!r} is a {new.type} event, not a turn or a fact: only what was said corrects")
    if not old.creates_memory:
        raise DatasetError(f"{corrected!r} stores no memory to correct")
    if i_old >= i_new or old.time > new.time:
        raise DatasetError(f"{correcting!r} comes before {corrected!r}: a correction follows what it corrects")
    fixed = Event(time=new.time, type="feedback", label=new.label, session=new.session, target=corrected,
                  outcome="corrected", correction=new.text, meta=dict(new.meta))
    events = [*conv.events[:i_new], fixed, *conv.events[i_new + 1:]]
    return dataclasses.replace(conv, events=events)
