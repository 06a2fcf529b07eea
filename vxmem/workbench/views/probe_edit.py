"""The Import page's probes: a chat log or a vxmem JSONL dataset read from an upload, and its
probes added, edited and deleted through the functions ``vxmem probes add|delete`` uses
(:func:`~vxmem.workbench.datasets.probes.add_probe`, :func:`~vxmem.workbench.datasets.probes.remove_probe`).

Every change returns a new conversation and leaves the old one as it was, so a change that
fails validation changes nothing; the page's download is the dataset file, written as
``vxmem probes`` writes it (:meth:`~vxmem.workbench.datasets.model.Conversation.to_jsonl`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from ..datasets.chatlogs import loads_chatlog
from ..datasets.jsonl import loads_jsonl
from ..datasets.model import FORMAT, Conversation, DatasetError, Event, naming_the_format
from ..datasets.probes import add_probe, remove_probe
from .inputs import PAGE_FORMAT_HINT, check_upload

DATASET_FORMAT = "jsonl"  # the Import page's format name for a vxmem JSONL dataset (its probes edited)


def conversation_from_bytes(filename: str, data: bytes, format: str | None = None) -> Conversation:
    """An upload for the Import page: a chat log (OpenAI / ChatML JSONL, a ChatGPT export,
    CSV) or a vxmem JSONL dataset (``format="jsonl"``, or guessed from its header line), as
    one conversation. Any problem is one :class:`DatasetError` naming the file."""
    text = check_upload(filename, data)
    first = text.lstrip().split("\n", 1)[0]
    stem = os.path.splitext(os.path.basename(filename))[0] or "chatlog"
    try:
        if format == DATASET_FORMAT or (format is None and FORMAT in first):
            return loads_jsonl(text, path=filename)
        return loads_chatlog(text, format, name=stem, path=filename)
    except DatasetError as exc:  # in the page's words: its Format box, not the library's argument
        raise DatasetError(naming_the_format(str(exc), PAGE_FORMAT_HINT)) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise DatasetError(f"{filename}: cannot read it as {format or 'a chat log or a vxmem dataset'}: {exc}") \
            from None


def probe_of(conversation: Conversation, label: str) -> Event:
    """The probe labelled ``label`` (a ``KeyError`` when there is none)."""
    for e in conversation.probes:
        if e.label == label:
            return e
    raise KeyError(f"no probe labelled {label!r}")


def probe_fields(conversation: Conversation, label: str) -> dict[str, Any]:
    """What the Import page's probe form shows for probe ``label``: ``query``, ``session``,
    ``relevant`` and ``stale`` labels, ``category``."""
    p = probe_of(conversation, label)
    return {"query": p.query or "", "session": p.session, "relevant": list(p.relevant), "stale": list(p.stale),
            "category": "" if p.category is None else str(p.category)}


def write_probe(conversation: Conversation, query: str, relevant: Sequence[str], stale: Sequence[str] = (),
                session: str | None = None, category: str | None = None, *, label: str | None = None,
                after: str | None = None) -> Conversation:
    """``conversation`` with probe ``label`` written: added when there is no such probe
    (asked right after the memory labelled ``after``, or at the end), else replaced in place
    (same time and label; the grades of labels it keeps, its limit and relevant sessions
    stay). Validation is :func:`~vxmem.workbench.datasets.probes.add_probe`'s: an unknown
    label, one both relevant and stale, or one said after the probe is a ``ValueError``."""
    category = (category or "").strip() or None
    old = next((e for e in conversation.probes if e.label == label), None) if label else None
    if old is None:
        time = None
        if after is not None:
            at = {e.label: e for e in conversation.events if e.label is not None and e.creates_memory}
            if after not in at:
                raise ValueError(f"after: {after!r} is not the label of a memory in this conversation")
            time = at[after].time
        return add_probe(conversation, query, list(relevant), session, time, stale_labels=list(stale),
                         category=category, label=label)
    grades = {lab: old.relevant.get(lab, 1.0) for lab in relevant} if not isinstance(relevant, str) else relevant
    changed = add_probe(remove_probe(conversation, old.label or ""), query, grades, session, old.time,
                        stale_labels=list(stale), category=category, label=old.label, limit=old.limit)
    events = [dataclasses.replace(e, relevant_sessions=old.relevant_sessions)
              if e.type == "probe" and e.label == old.label else e for e in changed.events]
    return Conversation(name=changed.name, events=events, description=changed.description, meta=changed.meta)


def delete_probe(conversation: Conversation, label: str) -> Conversation:
    """``conversation`` without probe ``label`` (:func:`~vxmem.workbench.datasets.probes.remove_probe`)."""
    return remove_probe(conversation, label)
