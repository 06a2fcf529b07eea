"""LoCoMo (Maharana et al. 2024): long multi-session dialogues with questions on them.

A LoCoMo file is a JSON list of samples. Each sample's ``conversation`` holds
``session_<n>`` lists of turns (``speaker``, ``dia_id`` like ``"D1:3"``, ``text``) dated by
``session_<n>_date_time``; its ``qa`` items name their ``evidence`` turns by ``dia_id`` and
have a ``category`` (:data:`CATEGORIES`). LoCoMo is published by snap-research
(github.com/snap-research/locomo, CC BY-NC 4.0); no part of it ships with vxmem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .model import Conversation, Event
from .sources import TURN_GAP, load_list

MARKERS = ('"sample_id"', '"speaker_a"')  # text near the top of a file that says it is LoCoMo

_DATE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], 1)}
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_UNDATED_GAP = 3600.0  # a session with no date follows the previous one by an hour

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
# The categories a retrieval metric scores: an adversarial question asks about something never said,
# so it has no evidence to recall (LoCoMo's own retrieval evaluation leaves it out too).
RETRIEVAL_CATEGORIES = ("multi-hop", "temporal", "open-domain", "single-hop")


def check_categories(categories: Any, name: str = "categories") -> frozenset[str] | None:
    """Which LoCoMo categories to keep, as names: None is :data:`RETRIEVAL_CATEGORIES`,
    ``"all"`` every one (None returned), else names or numbers of :data:`CATEGORIES`."""
    if categories is None:
        return frozenset(RETRIEVAL_CATEGORIES)
    if isinstance(categories, str):
        if categories == "all":
            return None
        categories = [c.strip() for c in categories.split(",") if c.strip()]
    if not isinstance(categories, Iterable):
        raise TypeError(f"{name} must be 'all', names or numbers of LoCoMo categories, not "
                        f"{type(categories).__name__}")
    out = set()
    for c in categories:
        key = int(c) if isinstance(c, int) or (isinstance(c, str) and c.isdigit()) else c
        if isinstance(key, bool) or not (key in CATEGORIES or key in CATEGORIES.values()):
            raise ValueError(f"{name} has unknown LoCoMo category {c!r}; expected names or numbers of "
                             f"{', '.join(f'{k} {v}' for k, v in CATEGORIES.items())}, or 'all'")
        out.add(CATEGORIES[key] if isinstance(key, int) else key)
    return frozenset(out)


def parse_locomo_date(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` as epoch seconds (UTC)."""
    m = _DATE.match(text or "")
    if not m:
        raise ValueError(f"not a LoCoMo date like '1:56 pm on 8 May, 2023': {text!r}")
    hour, minute, ampm, day, month, year = m.groups()
    mon = _MONTHS.get(month.lower()) or next((v for k, v in _MONTHS.items() if k.startswith(month.lower()[:3])), None)
    if mon is None:
        raise ValueError(f"unknown month in LoCoMo date {text!r}")
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return datetime(int(year), mon, int(day), h, int(minute), tzinfo=UTC).timestamp()


def load_locomo(path, categories: Any = None) -> list[Conversation]:
    """LoCoMo (a JSON list of samples) as one conversation per sample.

    Each turn is stored as memory systems store it: ``"Speaker: text"`` (a shared photo's
    caption appended as ``" [shares a photo: caption]"``), role = the speaker, in session
    ``"<sample_id>:S<n>"`` dated from its ``session_<n>_date_time``, one minute apart (a
    session with no date follows the previous one by an hour). Each QA becomes a probe across
    sessions at the end of the conversation: relevant = its evidence turns, ``category`` its
    name (:data:`CATEGORIES`; the number is in ``meta["category_number"]``). Malformed
    evidence strings (``"D8:6; D9:17"``) are split and what parses is used; the rest is
    counted in ``meta["stats"]``.

    :param categories: the questions to turn into probes: None (default) the four retrieval
        categories, leaving adversarial questions out (they have no evidence to recall);
        ``"all"``; or names or numbers, e.g. ``["temporal", 5]``.
    """
    keep = check_categories(categories)
    return load_list(path, "a LoCoMo file is a JSON list of samples", "sample", "sample_id",
                     lambda sample: _sample(sample, keep))


_KEYS = ("sample_id", "conversation", "qa")


def _sample(sample: Any, keep: frozenset[str] | None) -> Conversation:
    if not isinstance(sample, dict):
        raise ValueError("a sample must be an object")
    if "sample_id" not in sample or "conversation" not in sample:
        hint = " (this looks like LongMemEval: use load_longmemeval)" if "haystack_sessions" in sample else ""
        raise ValueError(f"not a LoCoMo sample: expected keys {', '.join(_KEYS)}, got "
                         f"{', '.join(sorted(map(str, sample))[:8]) or 'none'}{hint}")
    sid = str(sample["sample_id"])
    conv = sample["conversation"]
    if not isinstance(conv, dict):
        raise ValueError("'conversation' must be an object")
    nums = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    stats = {"sessions": 0, "turns": 0, "undated_sessions": 0, "dates_without_session": 0, "qa": 0,
             "qa_left_out": 0, "evidence": 0, "evidence_malformed": 0, "evidence_unparsed": 0,
             "evidence_unresolved": 0}
    stats["dates_without_session"] = sum(
        1 for k in conv if (m := re.fullmatch(r"session_(\d+)_date_time", k)) and int(m.group(1)) not in nums)
    events: list[Event] = []
    t_prev: float | None = None
    for n in nums:
        turns = conv[f"session_{n}"]
        if not isinstance(turns, list):
            raise ValueError(f"session_{n} must be a list of turns")
        date = conv.get(f"session_{n}_date_time")
        if date is not None and not isinstance(date, str):
            raise ValueError(f"session_{n}_date_time must be a date like '1:56 pm on 8 May, 2023', got {date!r}")
        t0 = _session_start(date, t_prev, stats)
        events += _session_turns(sid, n, turns, t0, stats)
        t_prev = events[-1].time if events else t0
    labels = {e.label for e in events if e.label is not None}
    t_end = (events[-1].time if events else 0.0) + TURN_GAP
    qas = sample.get("qa")
    if qas is not None and not isinstance(qas, list):
        raise ValueError("'qa' must be a list of question objects")
    for qi, qa in enumerate(qas or []):
        probe = _qa_probe(qi, qa, t_end, labels, stats)
        if keep is None or probe.category in keep:
            events.append(probe)
        else:
            stats["qa_left_out"] += 1
    return Conversation(name=sid, events=events, description=f"LoCoMo sample {sid}",
                        meta={"source": "locomo", "stats": stats})


def _session_start(date: str | None, t_prev: float | None, stats: dict[str, int]) -> float:
    """When a session begins: its date, never before the previous session ended."""
    stats["sessions"] += 1
    if not date:
        stats["undated_sessions"] += 1
        return (t_prev + _UNDATED_GAP) if t_prev is not None else 0.0
    t0 = parse_locomo_date(date)
    if t_prev is not None and t0 < t_prev:
        t0 = t_prev + TURN_GAP
    return t0


def _session_turns(sid: str, n: int, turns: list[Any], t0: float, stats: dict[str, int]) -> list[Event]:
    """Session ``n``'s turns as turn events a minute apart; a photo's caption joins its text."""
    events = []
    for j, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("text"), str) \
                or not isinstance(turn.get("dia_id"), str) or not turn["dia_id"].strip():
            raise ValueError(f"session_{n} turn {j} needs a 'dia_id' and a 'text' (strings; a 'speaker' too, "
                             "usually)")
        text = turn["text"].strip()
        if turn.get("blip_caption"):
            text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
        if not text:
            continue
        speaker = str(turn.get("speaker") or "").strip()
        if speaker:  # who said it is part of what was said: "Caroline: I went to ..."
            text = f"{speaker}: {text}"
        meta = {"dia_id": turn.get("dia_id"), "locomo_session": n}
        if turn.get("img_url"):
            meta["img_url"] = turn["img_url"]
        events.append(Event(time=t0 + j * TURN_GAP, type="turn", label=str(turn["dia_id"]),
                            session=f"{sid}:S{n}", role=str(turn.get("speaker") or "user"),
                            text=text, meta=meta))
        stats["turns"] += 1
    return events


def _qa_probe(qi: int, qa: Any, t: float, labels: set[str], stats: dict[str, int]) -> Event:
    """QA item ``qi`` as a probe across sessions at ``t``, its evidence turns relevant."""
    if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
        raise ValueError(f"qa {qi} needs a 'question'")
    relevant = _evidence(qa.get("evidence") or [], labels, stats)
    answer = qa.get("answer", qa.get("adversarial_answer"))
    cat = qa.get("category")
    number = int(cat) if isinstance(cat, int) or (isinstance(cat, str) and cat.isdigit()) else None
    name = None if cat is None else CATEGORIES[number] if number in CATEGORIES else str(cat)
    stats["qa"] += 1
    return Event(time=t, type="probe", label=f"q{qi}", query=qa["question"], session=None,
                 relevant=relevant, category=name,
                 meta={"answer": answer, "adversarial": "answer" not in qa, "category_number": number})


def _evidence(evidence: list[Any], labels: set[str], stats: dict[str, int]) -> dict[str, float]:
    """The turns that evidence strings name; malformed, unparsed and unknown ones are counted."""
    relevant = {}
    for ev in evidence:
        stats["evidence"] += 1
        pieces = [p for p in re.split(r"[;,\s]+", str(ev)) if p]
        if len(pieces) != 1 or not _DIA_ID.match(pieces[0]):
            stats["evidence_malformed"] += 1
        for p in pieces:
            if not _DIA_ID.match(p):
                stats["evidence_unparsed"] += 1
            elif p not in labels:
                stats["evidence_unresolved"] += 1
            else:
                relevant[p] = 1.0
    return relevant
