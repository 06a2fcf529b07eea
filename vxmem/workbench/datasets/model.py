"""The workbench's data model: a conversation is a validated timeline of events.

A :class:`Conversation` is an ordered list of timestamped :class:`Event` objects: turns,
facts (plain or pinned), feedback on an earlier memory, forget / expire / consolidate
operations, and **probes**: a query at a moment naming the earlier events a good recall
returns (graded) and those it must not return (stale: superseded or expired). Events refer
to each other by labels, never by memory ids, so a file means the same thing in every run.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...core.clock import to_epoch
from ...core.keys import KINDS, OUTCOMES

FORMAT = "vxmem-conversation/1"
EVENT_TYPES = ("turn", "fact", "feedback", "forget", "expire", "consolidate", "probe")
MEMORY_EVENTS = ("turn", "fact", "feedback")  # feedback creates a memory only with a correction

HEADER_KEYS = frozenset({"format", "name", "description", "generator", "seed", "regenerate", "judge",
                         "summarizer", "settings", "source", "stats"})
_FIELDS = {
    "turn": {"session", "role", "text", "ttl_days"},
    "fact": {"session", "text", "pinned", "ttl_days", "role"},
    "feedback": {"target", "outcome", "correction"},
    "forget": {"targets", "session", "kinds", "older_than", "superseded"},
    "expire": set(),
    "consolidate": {"session", "keep_recent", "older_than", "batch_turns"},
    "probe": {"query", "session", "relevant", "stale", "category", "relevant_sessions", "limit"},
}
_COMMON = {"time", "type", "label", "meta"}
# The order fields are written in, so a saved file reads the same way every time.
_FIELD_ORDER = ["session", "role", "text", "pinned", "ttl_days", "target", "outcome", "correction",
                "targets", "kinds", "older_than", "superseded", "keep_recent", "batch_turns", "query",
                "relevant", "stale", "category", "relevant_sessions", "limit"]
# session=None is meaningful for these types (no session / across sessions), so it is always written.
_SESSION_ALWAYS = ("turn", "fact", "probe", "consolidate")


# What an error says to do when a file's format cannot be told; a front end names its own way
# of giving the format instead (:func:`naming_the_format`).
FORMAT_HINT = "pass format="


def naming_the_format(message: str, how: str) -> str:
    """``message`` with the loaders' :data:`FORMAT_HINT` said as ``how`` (a CLI's ``pass
    --format``, a page's "pick it in the Format box")."""
    return message.replace(FORMAT_HINT, how)


class DatasetError(ValueError):
    """Bad conversation input; ``line`` is the 1-based line (or event number) at fault."""

    def __init__(self, message: str, line: int | None = None, path: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
        if line is not None:
            where = f"{where} line {line}" if where else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.line = line
        self.path = path


@dataclass
class Event:
    """One moment of a conversation. Which fields matter depends on ``type``.

    - ``turn``: ``text``, ``session``, ``role``; optional ``ttl_days``.
    - ``fact``: ``text``, ``session``, ``pinned``; optional ``ttl_days``.
    - ``feedback``: ``target`` (label of an earlier memory), ``outcome`` (useful, dead_end,
      corrected) and, for corrected, optional ``correction`` text stored as a new memory
      under this event's ``label``.
    - ``forget``: ``targets`` (labels) or a selection by ``session``/``kinds``/``older_than``/``superseded``.
    - ``expire``: delete everything past its TTL.
    - ``consolidate``: ``session``, ``keep_recent``, ``older_than``, ``batch_turns``.
    - ``probe``: ``query`` in ``session`` (None: across sessions), ``relevant`` labels with
      grades, ``stale`` labels, optional ``category`` and ``relevant_sessions``.
    """

    time: float
    type: str
    label: str | None = None
    session: str | None = None
    role: str = "user"
    text: str | None = None
    pinned: bool = False
    ttl_days: float | None = None
    target: str | None = None
    outcome: str | None = None
    correction: str | None = None
    targets: tuple[str, ...] = ()
    kinds: tuple[str, ...] | None = None
    older_than: float | None = None
    superseded: bool = False
    keep_recent: int = 6
    batch_turns: int = 40
    query: str | None = None
    relevant: dict[str, float] = field(default_factory=dict)
    stale: tuple[str, ...] = ()
    category: str | None = None
    relevant_sessions: tuple[str, ...] = ()
    limit: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        # Built in code, events take lists as readily as tuples, and relevant labels as a list.
        if self.type not in EVENT_TYPES:
            raise DatasetError(f"event type must be one of {', '.join(EVENT_TYPES)}; got {self.type!r}")
        if isinstance(self.relevant, (list, tuple, set)):
            self.relevant = {lab: 1.0 for lab in self.relevant}
        self.relevant = {k: float(v) for k, v in self.relevant.items()}
        for name in ("targets", "stale", "relevant_sessions"):
            value = getattr(self, name)
            setattr(self, name, (value,) if isinstance(value, str) else tuple(value))
        if self.kinds is not None:
            self.kinds = (self.kinds,) if isinstance(self.kinds, str) else tuple(self.kinds)
        self.time = float(self.time)
        if not math.isfinite(self.time):
            raise DatasetError(f"an event's time must be finite, got {self.time!r}")
        if self.type == "probe":
            _check_probe(self)

    @property
    def creates_memory(self) -> bool:
        """Whether replaying this event stores a memory (that its label then names)."""
        return self.type in ("turn", "fact") or (self.type == "feedback" and self.correction is not None)

    def to_dict(self) -> dict[str, Any]:
        """The event as one JSONL object: only the fields its type uses, defaults left out."""
        out: dict[str, Any] = {"time": format_time(self.time), "type": self.type}
        if self.label is not None:
            out["label"] = self.label
        defaults = Event(0.0, self.type)
        for name in sorted(_FIELDS[self.type], key=_FIELD_ORDER.index):
            value = getattr(self, name)
            if name == "session" and self.type in _SESSION_ALWAYS:
                out[name] = value
                continue
            if value == getattr(defaults, name):
                continue
            if isinstance(value, tuple):
                value = list(value)
            if name == "relevant":
                value = {k: (int(v) if float(v).is_integer() else v) for k, v in value.items()}
            out[name] = value
        if self.meta:
            out["meta"] = self.meta
        return out

    @classmethod
    def from_dict(cls, obj: Any) -> Event:
        """Validate one JSON object and build the event; ``ValueError`` says what is wrong."""
        if not isinstance(obj, dict):
            raise ValueError(f"an event must be a JSON object, not {type(obj).__name__}")
        etype = obj.get("type")
        if etype not in EVENT_TYPES:
            raise ValueError(f"'type' must be one of {', '.join(EVENT_TYPES)}; got {etype!r}")
        unknown = set(obj) - _COMMON - _FIELDS[etype]
        if unknown:
            raise ValueError(f"a {etype} event has no field {sorted(unknown)[0]!r} "
                             f"(allowed: {', '.join(sorted(_COMMON | _FIELDS[etype]))})")
        if obj.get("time") is None:  # to_epoch reads None as the wall clock: a replay would not repeat
            raise ValueError("every event needs a 'time' (ISO-8601 or epoch seconds)")
        try:
            t = to_epoch(obj["time"], "time")
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        ev = cls(time=t, type=etype)
        ev.label = _opt_str(obj, "label")
        if "meta" in obj:
            if not isinstance(obj["meta"], dict):
                raise ValueError("'meta' must be a JSON object")
            ev.meta = dict(obj["meta"])
        _READERS[etype](ev, obj)
        return ev


def _check_probe(ev: Event) -> None:
    """What a probe built in code gets wrong that its reader also refuses: a grade that is
    not a positive number, a label both relevant and stale, a limit below 1, an empty query
    (one not given yet is the reader's to fill; a conversation refuses a probe without one)."""
    for k, g in ev.relevant.items():
        if not math.isfinite(g) or g <= 0:
            raise DatasetError(f"grade of relevant label {k!r} must be a finite number > 0, got {g!r}")
    overlap = set(ev.relevant) & set(ev.stale)
    if overlap:
        raise DatasetError(f"label {sorted(overlap)[0]!r} is both relevant and stale")
    if ev.limit is not None and (isinstance(ev.limit, bool) or not isinstance(ev.limit, int) or ev.limit < 1):
        raise DatasetError(f"a probe's limit must be an integer >= 1 or None, got {ev.limit!r}")
    if ev.query is not None and (not isinstance(ev.query, str) or not ev.query.strip()):
        raise DatasetError(f"a probe's query must be a non-empty string, got {ev.query!r}")


# ---------------------------------------------------------------------------- reading one event's fields
# Each reader fills the fields of its event type from a JSON object, in the order a person
# would check them, and raises ValueError naming the first field that is wrong.


def _read_memory(ev: Event, obj: dict[str, Any]) -> None:
    ev.text = _text(obj, "text")
    ev.session = _opt_str(obj, "session")
    ev.role = _opt_str(obj, "role") or "user"
    ev.ttl_days = _opt_pos(obj, "ttl_days")
    if ev.type == "fact":
        ev.pinned = _bool(obj, "pinned", False)


def _read_feedback(ev: Event, obj: dict[str, Any]) -> None:
    ev.target = _text(obj, "target")
    ev.outcome = obj.get("outcome")
    if ev.outcome not in OUTCOMES:
        raise ValueError(f"'outcome' must be one of {', '.join(OUTCOMES)}; got {ev.outcome!r}")
    if "correction" in obj:
        if ev.outcome != "corrected":
            raise ValueError("'correction' goes with outcome 'corrected' only")
        ev.correction = _text(obj, "correction")
    elif ev.label is not None:
        raise ValueError("a feedback event has a 'label' only when it carries a 'correction'")


def _read_forget(ev: Event, obj: dict[str, Any]) -> None:
    ev.targets = _str_list(obj, "targets")
    ev.session = _opt_str(obj, "session")
    if "kinds" in obj:
        kinds = _str_list(obj, "kinds")
        if not kinds or any(k not in KINDS for k in kinds):
            raise ValueError(f"'kinds' must list some of {', '.join(KINDS)}")
        ev.kinds = kinds
    ev.older_than = _opt_nonneg(obj, "older_than")
    ev.superseded = _bool(obj, "superseded", False)


def _read_nothing(ev: Event, obj: dict[str, Any]) -> None:
    """``expire`` has no fields of its own."""


def _read_consolidate(ev: Event, obj: dict[str, Any]) -> None:
    ev.session = _opt_str(obj, "session")
    ev.keep_recent = _int(obj, "keep_recent", 6, minimum=0)
    ev.batch_turns = _int(obj, "batch_turns", 40, minimum=1)
    ev.older_than = _opt_nonneg(obj, "older_than")


def _read_probe(ev: Event, obj: dict[str, Any]) -> None:
    ev.query = _text(obj, "query")
    ev.session = _opt_str(obj, "session")
    ev.relevant = _grades(obj.get("relevant", {}))
    ev.stale = _str_list(obj, "stale")
    _check_probe(ev)  # a label both relevant and stale, as for a probe built in code
    category = obj.get("category")
    if category is not None and not isinstance(category, (str, int)):
        raise ValueError("'category' must be a string or an integer")
    ev.category = None if category is None else str(category)
    ev.relevant_sessions = _str_list(obj, "relevant_sessions")
    if "limit" in obj:
        ev.limit = _int(obj, "limit", None, minimum=1)


_READERS: dict[str, Callable[[Event, dict[str, Any]], None]] = {
    "turn": _read_memory, "fact": _read_memory, "feedback": _read_feedback, "forget": _read_forget,
    "expire": _read_nothing, "consolidate": _read_consolidate, "probe": _read_probe,
}


def _opt_str(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    if v is not None and (not isinstance(v, str) or not v):
        raise ValueError(f"'{key}' must be a non-empty string or null, got {v!r}")
    return v


def _text(obj: dict[str, Any], key: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"'{key}' must be a non-empty string, got {v!r}")
    return v


def _bool(obj: dict[str, Any], key: str, default: bool) -> bool:
    v = obj.get(key, default)
    if not isinstance(v, bool):
        raise ValueError(f"'{key}' must be true or false, got {v!r}")
    return v


def _number(v: Any, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"'{key}' must be a finite number, got {v!r}")
    return float(v)


def _opt_pos(obj: dict[str, Any], key: str) -> float | None:
    if obj.get(key) is None:
        return None
    v = _number(obj[key], key)
    if v <= 0:
        raise ValueError(f"'{key}' must be > 0, got {v!r}")
    return v


def _opt_nonneg(obj: dict[str, Any], key: str) -> float | None:
    if obj.get(key) is None:
        return None
    v = _number(obj[key], key)
    if v < 0:
        raise ValueError(f"'{key}' must be >= 0, got {v!r}")
    return v


def _int(obj: dict[str, Any], key: str, default: Any, minimum: int = 0) -> Any:
    if key not in obj:
        return default
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"'{key}' must be an integer >= {minimum}, got {v!r}")
    return v


def _str_list(obj: dict[str, Any], key: str) -> tuple[str, ...]:
    v = obj.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ValueError(f"'{key}' must be a list of non-empty strings")
    return tuple(v)


def _grades(v: Any) -> dict[str, float]:
    """Relevant labels: a list (grade 1 each) or an object of label -> grade > 0."""
    if isinstance(v, list):
        if not all(isinstance(x, str) and x for x in v):
            raise ValueError("'relevant' must list labels (strings) or map labels to grades")
        return {x: 1.0 for x in v}
    if isinstance(v, dict):
        out = {}
        for k, g in v.items():
            grade = _number(g, f"relevant[{k!r}]")
            if grade <= 0:
                raise ValueError(f"grade of relevant label {k!r} must be > 0, got {grade!r}")
            out[k] = grade
        return out
    raise ValueError("'relevant' must be a list of labels or an object of label -> grade")


def format_time(t: float) -> str:
    """Epoch seconds as ISO-8601 UTC with a ``Z``; whole seconds unless the time has a fraction."""
    dt = datetime.fromtimestamp(t, tz=UTC)
    spec = "seconds" if float(t).is_integer() else "microseconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


# ---------------------------------------------------------------------------- the conversation


@dataclass
class Conversation:
    """A named, validated timeline of events.

    ``meta`` holds the header's other fields: ``generator``, ``seed``, ``regenerate`` (the
    command that rebuilds the file), ``judge`` / ``summarizer`` (names of the rule-based
    helpers in :mod:`vxmem.memory.rules` that replay uses by default), ``settings`` (suggested
    memory settings) and, for loaded benchmarks, ``source`` and ``stats``.
    """

    name: str
    events: list[Event]
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise DatasetError("a conversation needs a non-empty name")
        problems = check_events(self.events)
        if problems:
            i, msg = problems[0]
            raise DatasetError(f"event {i}: {msg}")

    @property
    def probes(self) -> list[Event]:
        """The probe events, in time order: the moments recall is scored at."""
        return [e for e in self.events if e.type == "probe"]

    @property
    def header(self) -> dict[str, Any]:
        """The JSONL header line: format, name, description and the header fields of ``meta``."""
        head = {"format": FORMAT, "name": self.name, "description": self.description}
        head.update({k: v for k, v in self.meta.items() if k in HEADER_KEYS})
        return head

    def to_frame(self):
        """One row per event, the fields its type uses as columns."""
        import pandas as pd

        rows = []
        for i, e in enumerate(self.events):
            d = e.to_dict()
            d["time"] = pd.Timestamp(e.time, unit="s", tz="UTC")
            d["index"] = i
            for k in ("relevant", "stale", "targets", "kinds", "relevant_sessions", "meta"):
                if k in d:
                    d[k] = json.dumps(d[k])
            rows.append(d)
        cols = ["index", "time", "type", "label", "session", "role", "text", "query"]
        frame = pd.DataFrame(rows)
        return frame[[c for c in cols if c in frame] + [c for c in frame if c not in cols]]

    def to_jsonl(self) -> str:
        """The conversation as JSON Lines text: the header, then one event per line."""
        lines = [json.dumps(self.header, ensure_ascii=False)]
        lines += [json.dumps(e.to_dict(), ensure_ascii=False) for e in self.events]
        return "\n".join(lines) + "\n"

    def save(self, path) -> None:
        """Write the conversation as JSONL (header line first).

        The file is written beside its final name and moved into place, so a reader never
        sees half a conversation; a file it replaces keeps its permissions, and a read-only
        one is refused (:class:`DatasetError`), as an editor would.
        """
        path = os.fspath(path)
        old = os.stat(path) if os.path.exists(path) else None
        if old is not None and not old.st_mode & stat.S_IWUSR:
            raise DatasetError("the file is read-only: make it writable to save over it", path=path)
        tmp = f"{path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(self.to_jsonl())
            if old is not None:
                os.chmod(tmp, stat.S_IMODE(old.st_mode))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for e in self.events:
            counts[e.type] = counts.get(e.type, 0) + 1
        return f"Conversation({self.name!r}, {len(self.events)} events: {counts})"


def _references(e: Event) -> Sequence[tuple[str, str | None]]:
    """The labels ``e`` refers to, each with what it is called in an error message."""
    if e.type == "feedback":
        return [("feedback target", e.target)]
    if e.type == "forget":
        return [("forget target", t) for t in e.targets]
    if e.type == "probe":
        return [("relevant label", t) for t in e.relevant] + [("stale label", t) for t in e.stale]
    return []


def check_events(events: Sequence[Event], where: Callable[[int], str] | None = None) -> list[tuple[int, str]]:
    """Cross-event problems as ``(event index, message)``: time order, labels, references.
    ``where(i)`` names event ``i`` in a message (default ``"event i"``; a file's reader says
    its line)."""
    where = where or (lambda i: f"event {i}")
    problems: list[tuple[int, str]] = []
    seen: dict[str, tuple[int, Event]] = {}
    last = -math.inf
    for i, e in enumerate(events):
        if not isinstance(e, Event):
            problems.append((i, f"expected an Event, got {type(e).__name__}"))
            continue
        if e.type == "probe" and e.query is None:
            problems.append((i, "a probe needs a query"))
        if e.time < last:
            problems.append((i, f"time goes backwards ({format_time(e.time)} after {format_time(last)})"))
        last = max(last, e.time)
        for what, ref in _references(e):
            if ref not in seen:
                problems.append((i, f"{what} {ref!r} names no earlier event"))
            elif not seen[ref][1].creates_memory:
                problems.append((i, f"{what} {ref!r} names a {seen[ref][1].type} event, which stores no memory"))
        if e.label is not None:
            if e.label in seen:
                problems.append((i, f"label {e.label!r} is already used by {where(seen[e.label][0])}"))
            else:
                seen[e.label] = (i, e)
    return problems
