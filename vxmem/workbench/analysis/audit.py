"""Supersession audit: did each correction and contradiction retire the right memory?

A conversation says which memories should be retired, and by what, in three ways:

- a ``feedback`` event with a ``correction`` retires its ``target`` (the correction does);
- a memory event whose ``meta`` has ``"supersedes": [labels]`` retires those labels, and
  ``"restates": [labels]`` says it repeats them: they must stay live;
- a probe that lists a label as stale while a newer label it names (relevant, or stale but
  newer) was said: the old one has been replaced (a stale label with no newer one is stale
  for another reason, a TTL, and is not counted).

:func:`audit` replays the conversation once per judge (the rule-based one, none, or a
caller's callable) and compares what was superseded with that: each memory that should
have been retired and was, by a memory that replaces it (``retired``), should have been and
was not (``missed``), was retired without cause or by the wrong memory (``wrongful``), or was
restated and rightly kept (``kept``). :func:`audit_summary` gives one row per judge: the
counts, precision, recall and their F1 (the judge's one metric).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from ...memory.rules import JUDGES
from ...models.embed import EmbedderArg
from ..datasets.model import Conversation, Event
from ..plugins import load_object
from ..replay.run import replay

OUTCOMES = ("retired", "missed", "wrongful", "kept")
AUDIT_COLUMNS = ("judge", "conversation", "label", "text", "outcome", "expected_by", "retired_by", "source")
JudgeArg = str | Callable[[str, list[str]], Sequence[bool]] | None
_DAY = 86400.0


def judge_named(spec: str) -> tuple[str, Any]:
    """``(name, judge)`` for a ``--judge`` value: ``rules`` (the rule-based key-value judge), ``none``,
    a name of :data:`vxmem.memory.rules.JUDGES`, or ``package.module:callable`` (a class is built
    with no arguments). ``ValueError`` names what is known."""
    if spec in ("rules", "rule"):
        return "rules", JUDGES["rule_key_value"]
    if spec == "none":
        return "none", None
    if spec in JUDGES:
        return spec, JUDGES[spec]
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"unknown judge {spec!r}; known: rules, none, {', '.join(JUDGES)}, "
                         "or package.module:callable")
    obj = load_object(spec, "judge")
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"judge {spec!r} is not callable: a judge is judge(new_text, old_texts) -> list[bool]")
    return spec, obj


def _stale_successors(ev: Event, said: Mapping[str, Event]) -> dict[str, set[str]]:
    """Of a probe: each stale label that a newer label the probe names replaced, with those labels."""
    named = [lab for lab in (*ev.relevant, *ev.stale) if lab in said]
    out: dict[str, set[str]] = {}
    for old in ev.stale:
        if old not in said:
            continue
        newer = {lab for lab in named if said[lab].time > said[old].time}
        ttl = said[old].ttl_days
        if newer and (ttl is None or said[old].time + ttl * _DAY > ev.time):
            out[old] = newer
    return out


def expected(conv: Conversation) -> tuple[dict[str, set[str]], dict[str, str], set[str]]:
    """What ``conv`` says should be retired: old label -> the labels that may retire it, the
    source of each (``correction``, ``meta`` or ``probe``), and the restated labels to keep.
    A label a ``meta`` names is judged by the meta alone, not by what probes imply."""
    said: dict[str, Event] = {}
    want: dict[str, set[str]] = {}
    source: dict[str, str] = {}
    keep: set[str] = set()
    implied: dict[str, set[str]] = {}
    for ev in conv.events:
        if ev.creates_memory and ev.label is not None:
            said[ev.label] = ev
        if ev.type == "feedback" and ev.correction is not None and ev.label is not None:
            want.setdefault(str(ev.target), set()).add(ev.label)
            source.setdefault(str(ev.target), "correction")
        for old in (ev.meta.get("supersedes") or ()) if ev.label is not None else ():
            want.setdefault(old, set()).add(str(ev.label))
            source.setdefault(old, "meta")
        keep.update(ev.meta.get("restates") or ())
        if ev.type == "probe":
            for old, newer in _stale_successors(ev, said).items():
                implied.setdefault(old, set()).update(newer)
    for old, newer in implied.items():
        if old not in source and old not in keep:
            want[old], source[old] = newer, "probe"
    return want, source, keep - set(want)


def _without_probes(conv: Conversation) -> Conversation:
    return Conversation(name=conv.name, events=[e for e in conv.events if e.type != "probe"],
                        description=conv.description, meta=dict(conv.meta))


def audit_one(conv: Conversation, judge: JudgeArg = "rules", embedder: EmbedderArg = None,
              name: str | None = None) -> pd.DataFrame:
    """One row per memory the audit speaks of (see the module's docstring), for ``conv``
    replayed with ``judge`` (a ``--judge`` value or a callable; ``name``: its name in the table)."""
    if isinstance(judge, str):
        given, judge = judge_named(judge)
        name = name or given
    name = name or getattr(judge, "name", type(judge).__name__)
    want, source, keep = expected(conv)
    rep = replay(_without_probes(conv), {"judge": judge}, embedder, cache=False)
    labels = {m["id"]: m["labels"] for m in rep.memories}
    rows = []
    for m in rep.memories:
        by = labels.get(m["superseded_by"] or "", [])
        for lab in m["labels"]:
            retired = m["superseded_by"] is not None
            if lab in want and not retired:
                outcome = "missed"
            elif lab in want and set(by) & want[lab]:
                outcome = "retired"
            elif retired:  # without cause, or by a memory that does not replace it
                outcome = "wrongful"
            elif lab in keep:
                outcome = "kept"
            else:
                continue
            rows.append({"judge": name, "conversation": conv.name, "label": lab, "text": m["text"],
                         "outcome": outcome, "expected_by": ",".join(sorted(want.get(lab, ()))),
                         "retired_by": ",".join(by), "source": source.get(lab, "restated" if lab in keep else "")})
    return pd.DataFrame(rows, columns=list(AUDIT_COLUMNS))


def audit(conversations: Conversation | Sequence[Conversation], judges: Sequence[JudgeArg] = ("rules",),
          embedder: EmbedderArg = None, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Every conversation audited under every judge, as one frame (see :func:`audit_one`);
    ``names``: the judges' names in the table (default: ``--judge`` values, or a callable's ``name``)."""
    convs = [conversations] if isinstance(conversations, Conversation) else list(conversations)
    if not convs or not all(isinstance(c, Conversation) for c in convs):
        raise TypeError("conversations must be a Conversation or a non-empty list of Conversations")
    named = [judge_named(j) if isinstance(j, str) else (getattr(j, "name", type(j).__name__), j) for j in judges]
    if names is not None:
        named = [(n, j) for n, (_, j) in zip(names, named)]
    frames = [audit_one(c, j, embedder, name=n) for n, j in named for c in convs]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(AUDIT_COLUMNS))


def audit_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per judge: how many retired, missed, wrongful and kept; precision (retired over
    everything it retired), recall (retired over everything it should have) and F1."""
    out = []
    for judge, g in rows.groupby("judge", sort=False):
        n = {o: int((g["outcome"] == o).sum()) for o in OUTCOMES}
        p = n["retired"] / (n["retired"] + n["wrongful"]) if n["retired"] + n["wrongful"] else float("nan")
        r = n["retired"] / (n["retired"] + n["missed"]) if n["retired"] + n["missed"] else float("nan")
        if n["retired"]:
            f1 = 2 * p * r / (p + r)
        else:  # nothing retired rightly: 0 if there was anything to do or undo, else nothing to say
            f1 = 0.0 if n["missed"] + n["wrongful"] else float("nan")
        out.append({"judge": judge, **n, "precision": p, "recall": r, "f1": f1})
    return pd.DataFrame(out, columns=["judge", *OUTCOMES, "precision", "recall", "f1"])
