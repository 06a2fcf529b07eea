"""Conversations on a timeline: the workbench's data model, its JSONL format and loaders.

A :class:`Conversation` is an ordered list of timestamped :class:`Event` objects: turns,
facts (plain or pinned), feedback on an earlier memory, forget / expire / consolidate
operations, and **probes**: a query at a moment naming the earlier events a good recall
returns (graded) and those it must not return (stale: superseded or expired). Events refer
to each other by labels, never by memory ids, so a file means the same thing in every run.

On disk a conversation is JSON Lines: a header line, then one event per line (see
``datasets/README.md``). Loading validates every line first and raises
:class:`DatasetError` naming the line; nothing is half-loaded.

Two real benchmark formats load into the same model: LoCoMo (:func:`load_locomo`) and
LongMemEval (:func:`load_longmemeval`).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .clock import to_epoch
from .keys import KINDS, OUTCOMES

FORMAT = "vxmem-conversation/1"
EVENT_TYPES = ("turn", "fact", "feedback", "forget", "expire", "consolidate", "probe")
MEMORY_EVENTS = ("turn", "fact", "feedback")  # feedback creates a memory only with a correction
FORMATS = ("jsonl", "locomo", "longmemeval")

_HEADER_KEYS = {"format", "name", "description", "generator", "seed", "regenerate", "judge",
                "summarizer", "settings", "source", "stats"}
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


class DatasetError(ValueError):
    """Bad conversation input; ``line`` is the 1-based line (or event number) at fault."""

    def __init__(self, message: str, line: Optional[int] = None, path: Optional[str] = None):
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
    label: Optional[str] = None
    session: Optional[str] = None
    role: str = "user"
    text: Optional[str] = None
    pinned: bool = False
    ttl_days: Optional[float] = None
    target: Optional[str] = None
    outcome: Optional[str] = None
    correction: Optional[str] = None
    targets: Tuple[str, ...] = ()
    kinds: Optional[Tuple[str, ...]] = None
    older_than: Optional[float] = None
    superseded: bool = False
    keep_recent: int = 6
    batch_turns: int = 40
    query: Optional[str] = None
    relevant: Dict[str, float] = field(default_factory=dict)
    stale: Tuple[str, ...] = ()
    category: Optional[str] = None
    relevant_sessions: Tuple[str, ...] = ()
    limit: Optional[int] = None
    meta: Dict[str, Any] = field(default_factory=dict)

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

    @property
    def creates_memory(self) -> bool:
        """Whether replaying this event stores a memory (that its label then names)."""
        return self.type in ("turn", "fact") or (self.type == "feedback" and self.correction is not None)

    def to_dict(self) -> Dict[str, Any]:
        """The event as one JSONL object: only the fields its type uses, defaults left out."""
        out: Dict[str, Any] = {"time": format_time(self.time), "type": self.type}
        if self.label is not None:
            out["label"] = self.label
        defaults = Event(0.0, self.type)
        for name in sorted(_FIELDS[self.type], key=_FIELD_ORDER.index):
            value = getattr(self, name)
            if name == "session" and self.type in ("turn", "fact", "probe", "consolidate"):
                out[name] = value  # session=None is meaningful (no session / across sessions)
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
    def from_dict(cls, obj: Any) -> "Event":
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
        if "time" not in obj:
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
        if etype in ("turn", "fact"):
            ev.text = _text(obj, "text")
            ev.session = _opt_str(obj, "session")
            ev.role = _opt_str(obj, "role") or "user"
            ev.ttl_days = _opt_pos(obj, "ttl_days")
            if etype == "fact":
                ev.pinned = _bool(obj, "pinned", False)
        elif etype == "feedback":
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
        elif etype == "forget":
            ev.targets = _str_list(obj, "targets")
            ev.session = _opt_str(obj, "session")
            if "kinds" in obj:
                kinds = _str_list(obj, "kinds")
                bad = [k for k in kinds if k not in KINDS]
                if bad or not kinds:
                    raise ValueError(f"'kinds' must list some of {', '.join(KINDS)}")
                ev.kinds = kinds
            ev.older_than = _opt_nonneg(obj, "older_than")
            ev.superseded = _bool(obj, "superseded", False)
        elif etype == "consolidate":
            ev.session = _opt_str(obj, "session")
            ev.keep_recent = _int(obj, "keep_recent", 6, minimum=0)
            ev.batch_turns = _int(obj, "batch_turns", 40, minimum=1)
            ev.older_than = _opt_nonneg(obj, "older_than")
        elif etype == "probe":
            ev.query = _text(obj, "query")
            ev.session = _opt_str(obj, "session")
            ev.relevant = _grades(obj.get("relevant", {}))
            ev.stale = _str_list(obj, "stale")
            overlap = set(ev.relevant) & set(ev.stale)
            if overlap:
                raise ValueError(f"label {sorted(overlap)[0]!r} is both relevant and stale")
            cat = obj.get("category")
            if cat is not None and not isinstance(cat, (str, int)):
                raise ValueError("'category' must be a string or an integer")
            ev.category = None if cat is None else str(cat)
            ev.relevant_sessions = _str_list(obj, "relevant_sessions")
            if "limit" in obj:
                ev.limit = _int(obj, "limit", None, minimum=1)
        return ev


_FIELD_ORDER = ["session", "role", "text", "pinned", "ttl_days", "target", "outcome", "correction",
                "targets", "kinds", "older_than", "superseded", "keep_recent", "batch_turns", "query",
                "relevant", "stale", "category", "relevant_sessions", "limit"]


def _opt_str(obj, key) -> Optional[str]:
    v = obj.get(key)
    if v is not None and (not isinstance(v, str) or not v):
        raise ValueError(f"'{key}' must be a non-empty string or null, got {v!r}")
    return v


def _text(obj, key) -> str:
    v = obj.get(key)
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"'{key}' must be a non-empty string, got {v!r}")
    return v


def _bool(obj, key, default) -> bool:
    v = obj.get(key, default)
    if not isinstance(v, bool):
        raise ValueError(f"'{key}' must be true or false, got {v!r}")
    return v


def _number(v, key) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"'{key}' must be a finite number, got {v!r}")
    return float(v)


def _opt_pos(obj, key) -> Optional[float]:
    if obj.get(key) is None:
        return None
    v = _number(obj[key], key)
    if v <= 0:
        raise ValueError(f"'{key}' must be > 0, got {v!r}")
    return v


def _opt_nonneg(obj, key) -> Optional[float]:
    if obj.get(key) is None:
        return None
    v = _number(obj[key], key)
    if v < 0:
        raise ValueError(f"'{key}' must be >= 0, got {v!r}")
    return v


def _int(obj, key, default, minimum=0):
    if key not in obj:
        return default
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"'{key}' must be an integer >= {minimum}, got {v!r}")
    return v


def _str_list(obj, key) -> Tuple[str, ...]:
    v = obj.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ValueError(f"'{key}' must be a list of non-empty strings")
    return tuple(v)


def _grades(v) -> Dict[str, float]:
    """Relevant labels: a list (grade 1 each) or an object of label -> grade > 0."""
    if isinstance(v, list):
        if not all(isinstance(x, str) and x for x in v):
            raise ValueError("'relevant' must list labels (strings) or map labels to grades")
        return {x: 1.0 for x in v}
    if isinstance(v, dict):
        out = {}
        for k, g in v.items():
            g = _number(g, f"relevant[{k!r}]")
            if g <= 0:
                raise ValueError(f"grade of relevant label {k!r} must be > 0, got {g!r}")
            out[k] = g
        return out
    raise ValueError("'relevant' must be a list of labels or an object of label -> grade")


def format_time(t: float) -> str:
    """Epoch seconds as ISO-8601 UTC with a ``Z``; whole seconds unless the time has a fraction."""
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    spec = "seconds" if float(t).is_integer() else "microseconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


@dataclass
class Conversation:
    """A named, validated timeline of events.

    ``meta`` holds the header's other fields: ``generator``, ``seed``, ``regenerate`` (the
    command that rebuilds the file), ``judge`` / ``summarizer`` (names of the rule-based
    helpers in :mod:`vxmem.synth` that replay uses by default), ``settings`` (suggested
    memory settings) and, for loaded benchmarks, ``source`` and ``stats``.
    """

    name: str
    events: List[Event]
    description: str = ""
    meta: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise DatasetError("a conversation needs a non-empty name")
        problems = check_events(self.events)
        if problems:
            i, msg = problems[0]
            raise DatasetError(f"event {i}: {msg}")

    @property
    def probes(self) -> List[Event]:
        return [e for e in self.events if e.type == "probe"]

    @property
    def header(self) -> Dict[str, Any]:
        head = {"format": FORMAT, "name": self.name, "description": self.description}
        head.update({k: v for k, v in self.meta.items() if k in _HEADER_KEYS})
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

    def save(self, path) -> None:
        """Write the conversation as JSONL (header line first)."""
        save_jsonl(self, path)

    def __repr__(self) -> str:
        counts: Dict[str, int] = {}
        for e in self.events:
            counts[e.type] = counts.get(e.type, 0) + 1
        return f"Conversation({self.name!r}, {len(self.events)} events: {counts})"


def check_events(events: Sequence[Event]) -> List[Tuple[int, str]]:
    """Cross-event problems as ``(event index, message)``: time order, labels, references."""
    problems: List[Tuple[int, str]] = []
    seen: Dict[str, Tuple[int, Event]] = {}
    last = -math.inf
    for i, e in enumerate(events):
        if not isinstance(e, Event):
            problems.append((i, f"expected an Event, got {type(e).__name__}"))
            continue
        if e.time < last:
            problems.append((i, f"time goes backwards ({format_time(e.time)} after {format_time(last)})"))
        last = max(last, e.time)
        refs: List[Tuple[str, str]] = []
        if e.type == "feedback":
            refs.append(("feedback target", e.target))
        elif e.type == "forget":
            refs += [("forget target", t) for t in e.targets]
        elif e.type == "probe":
            refs += [("relevant label", t) for t in e.relevant] + [("stale label", t) for t in e.stale]
        for what, ref in refs:
            if ref not in seen:
                problems.append((i, f"{what} {ref!r} names no earlier event"))
            elif not seen[ref][1].creates_memory:
                problems.append((i, f"{what} {ref!r} names a {seen[ref][1].type} event, which stores no memory"))
        if e.label is not None:
            if e.label in seen:
                problems.append((i, f"label {e.label!r} is already used by event {seen[e.label][0]}"))
            else:
                seen[e.label] = (i, e)
    return problems


# ---------------------------------------------------------------------------- JSONL


def save_jsonl(conversation: Conversation, path) -> None:
    """Write ``conversation`` as JSON Lines: the header, then one event per line."""
    lines = [json.dumps(conversation.header, ensure_ascii=False)]
    lines += [json.dumps(e.to_dict(), ensure_ascii=False) for e in conversation.events]
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def dumps_jsonl(conversation: Conversation) -> str:
    lines = [json.dumps(conversation.header, ensure_ascii=False)]
    lines += [json.dumps(e.to_dict(), ensure_ascii=False) for e in conversation.events]
    return "\n".join(lines) + "\n"


def load_jsonl(path) -> Conversation:
    """Read and validate a JSONL conversation; :class:`DatasetError` names the bad line."""
    spath = os.fspath(path)
    try:
        with open(spath, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise DatasetError(f"cannot read conversation file: {exc.strerror or exc}", path=spath) from None
    except UnicodeDecodeError:
        raise DatasetError("not UTF-8 text", path=spath) from None
    return loads_jsonl(text, path=spath)


def loads_jsonl(text: str, path: Optional[str] = None) -> Conversation:
    """Parse a JSONL conversation from a string (see :func:`load_jsonl`)."""
    raw = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not raw:
        raise DatasetError("empty file: expected a header line, then one event per line", path=path)
    n0, first = raw[0]
    header = _parse_line(first, n0, path)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise DatasetError(f"the first line must be a header object with \"format\": \"{FORMAT}\"",
                           line=n0, path=path)
    unknown = set(header) - _HEADER_KEYS
    if unknown:
        raise DatasetError(f"unknown header field {sorted(unknown)[0]!r}", line=n0, path=path)
    name = header.get("name")
    if not isinstance(name, str) or not name:
        raise DatasetError("the header needs a non-empty 'name'", line=n0, path=path)
    events, lines = [], []
    for n, line in raw[1:]:
        obj = _parse_line(line, n, path)
        try:
            events.append(Event.from_dict(obj))
        except ValueError as exc:
            raise DatasetError(str(exc), line=n, path=path) from None
        lines.append(n)
    problems = check_events(events)
    if problems:
        i, msg = problems[0]
        raise DatasetError(msg, line=lines[i], path=path)
    meta = {k: v for k, v in header.items() if k not in ("format", "name", "description")}
    return Conversation(name=name, events=events, description=str(header.get("description") or ""), meta=meta)


def _parse_line(line: str, n: int, path):
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"not valid JSON ({exc.msg} at column {exc.colno})", line=n, path=path) from None


# ---------------------------------------------------------------------------- benchmark loaders


def _read_json(path):
    spath = os.fspath(path)
    try:
        with open(spath, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise DatasetError(f"cannot read file: {exc.strerror or exc}", path=spath) from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                           path=spath) from None
    except UnicodeDecodeError:
        raise DatasetError("not UTF-8 text", path=spath) from None


_LOCOMO_DATE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], 1)}
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_TURN_GAP = 60.0  # seconds between consecutive turns of one session


def parse_locomo_date(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` as epoch seconds (UTC)."""
    m = _LOCOMO_DATE.match(text or "")
    if not m:
        raise ValueError(f"not a LoCoMo date like '1:56 pm on 8 May, 2023': {text!r}")
    hour, minute, ampm, day, month, year = m.groups()
    mon = _MONTHS.get(month.lower()) or next((v for k, v in _MONTHS.items() if k.startswith(month.lower()[:3])), None)
    if mon is None:
        raise ValueError(f"unknown month in LoCoMo date {text!r}")
    hour = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return datetime(int(year), mon, int(day), hour, int(minute), tzinfo=timezone.utc).timestamp()


def load_locomo(path) -> List[Conversation]:
    """LoCoMo (a JSON list of samples) as one conversation per sample.

    Each session's turns are memories of session ``"<sample_id>:S<n>"`` dated from its
    ``session_<n>_date_time`` one minute apart (a session with no date follows the previous
    one by an hour). Each QA becomes a probe across sessions at the end of the conversation:
    relevant = its evidence turns, category kept. Malformed evidence strings (``"D8:6; D9:17"``)
    are split and what parses is used; the rest is counted in ``meta["stats"]``.
    """
    return _load_list(path, "a LoCoMo file is a JSON list of samples", "sample", "sample_id", _locomo_sample)


def _load_list(path, shape: str, item: str, id_key: str, convert) -> List[Conversation]:
    """Convert each item of a JSON list file; a bad item's error names it and its id."""
    spath = os.fspath(path)
    data = _read_json(spath)
    if not isinstance(data, list):
        raise DatasetError(shape, path=spath)
    out = []
    for i, obj in enumerate(data):
        try:
            out.append(convert(obj))
        except (ValueError, KeyError, TypeError) as exc:
            msg = exc.args[0] if exc.args else str(exc)
            oid = obj.get(id_key) if isinstance(obj, dict) else None
            raise DatasetError(f"{item} {i} ({oid!r}): {msg}", path=spath) from None
    return out


def _locomo_sample(sample) -> Conversation:
    if not isinstance(sample, dict):
        raise ValueError("a sample must be an object")
    sid = str(sample["sample_id"])
    conv = sample["conversation"]
    if not isinstance(conv, dict):
        raise ValueError("'conversation' must be an object")
    nums = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    stats = {"sessions": 0, "turns": 0, "undated_sessions": 0, "dates_without_session": 0, "qa": 0,
             "evidence": 0, "evidence_malformed": 0, "evidence_unparsed": 0,
             "evidence_unresolved": 0}
    stats["dates_without_session"] = sum(
        1 for k in conv if (m := re.fullmatch(r"session_(\d+)_date_time", k)) and int(m.group(1)) not in nums)
    events: List[Event] = []
    t_prev = None
    for n in nums:
        turns = conv[f"session_{n}"]
        if not isinstance(turns, list):
            raise ValueError(f"session_{n} must be a list of turns")
        date = conv.get(f"session_{n}_date_time")
        if date:
            t0 = parse_locomo_date(date)
            if t_prev is not None and t0 < t_prev:
                t0 = t_prev + _TURN_GAP
        else:
            stats["undated_sessions"] += 1
            t0 = (t_prev + 3600.0) if t_prev is not None else 0.0
        stats["sessions"] += 1
        for j, turn in enumerate(turns):
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                raise ValueError(f"session_{n} turn {j} needs 'speaker', 'dia_id' and 'text'")
            text = turn["text"].strip()
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
            if not text:
                continue
            meta = {"dia_id": turn.get("dia_id"), "locomo_session": n}
            if turn.get("img_url"):
                meta["img_url"] = turn["img_url"]
            events.append(Event(time=t0 + j * _TURN_GAP, type="turn", label=str(turn["dia_id"]),
                                session=f"{sid}:S{n}", role=str(turn.get("speaker") or "user"),
                                text=text, meta=meta))
            stats["turns"] += 1
        t_prev = (events[-1].time if events else t0)
    labels = {e.label for e in events}
    t_end = (events[-1].time if events else 0.0) + _TURN_GAP
    for qi, qa in enumerate(sample.get("qa") or []):
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
            raise ValueError(f"qa {qi} needs a 'question'")
        relevant = {}
        for ev in qa.get("evidence") or []:
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
        answer = qa.get("answer", qa.get("adversarial_answer"))
        cat = qa.get("category")
        events.append(Event(time=t_end, type="probe", label=f"q{qi}", query=qa["question"], session=None,
                            relevant=relevant, category=None if cat is None else str(cat),
                            meta={"answer": answer, "adversarial": "answer" not in qa}))
        stats["qa"] += 1
    return Conversation(name=sid, events=events, description=f"LoCoMo sample {sid}",
                        meta={"source": "locomo", "stats": stats})


_LME_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$")


def parse_longmemeval_date(text: str) -> float:
    """``"2023/05/30 (Tue) 23:40"`` as epoch seconds (UTC)."""
    m = _LME_DATE.match(text or "")
    if not m:
        raise ValueError(f"not a LongMemEval date like '2023/05/30 (Tue) 23:40': {text!r}")
    y, mo, d, h, mi = (int(x) for x in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=timezone.utc).timestamp()


def load_longmemeval(path) -> List[Conversation]:
    """LongMemEval (a JSON list of instances) as one conversation per instance.

    Haystack sessions, in date order, become memory sessions named by their ids; each turn
    is labelled ``"<session_id>:<i>"``. The question is one probe across sessions at
    ``question_date`` whose relevant events are the ``has_answer`` turns and whose
    ``relevant_sessions`` are the answer sessions; the category is the question type,
    and abstention questions (id ending ``_abs``) are flagged in the probe's meta.
    """
    return _load_list(path, "a LongMemEval file is a JSON list of instances", "instance", "question_id",
                      _longmemeval_instance)


def _longmemeval_instance(inst) -> Conversation:
    if not isinstance(inst, dict):
        raise ValueError("an instance must be an object")
    qid = str(inst["question_id"])
    sessions, dates, ids = inst["haystack_sessions"], inst["haystack_dates"], inst["haystack_session_ids"]
    if not (isinstance(sessions, list) and isinstance(dates, list) and isinstance(ids, list)):
        raise ValueError("haystack_sessions, haystack_dates and haystack_session_ids must be lists")
    if not len(sessions) == len(dates) == len(ids):
        raise ValueError(f"haystack_sessions, haystack_dates and haystack_session_ids differ in length "
                         f"({len(sessions)}, {len(dates)}, {len(ids)})")
    order = sorted(range(len(sessions)), key=lambda i: parse_longmemeval_date(dates[i]))
    events: List[Event] = []
    relevant: Dict[str, float] = {}
    for i in order:
        t0 = parse_longmemeval_date(dates[i])
        if events and t0 <= events[-1].time:
            t0 = events[-1].time + _TURN_GAP
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
            events.append(Event(time=t0 + j * _TURN_GAP, type="turn", label=label, session=sess,
                                role=str(turn.get("role") or "user"), text=turn["content"]))
    tq = parse_longmemeval_date(inst["question_date"])
    if events and tq < events[-1].time:
        tq = events[-1].time
    qtype = inst.get("question_type")
    events.append(Event(time=tq, type="probe", label="q", query=str(inst["question"]), session=None,
                        relevant=relevant, category=None if qtype is None else str(qtype),
                        relevant_sessions=tuple(str(s) for s in inst.get("answer_session_ids") or ()),
                        meta={"answer": inst.get("answer"), "abstention": qid.endswith("_abs")}))
    return Conversation(name=qid, events=events, description=f"LongMemEval {qtype} question {qid}",
                        meta={"source": "longmemeval",
                              "stats": {"sessions": len(sessions), "turns": len(events) - 1,
                                        "evidence_turns": len(relevant)}})


def load(path, format: Optional[str] = None) -> List[Conversation]:
    """Load any supported file as a list of conversations (JSONL gives a list of one).

    ``format`` is ``"jsonl"``, ``"locomo"`` or ``"longmemeval"``; by default it is guessed
    from the extension (``.jsonl``) and, for JSON, from the first record's keys.
    """
    spath = os.fspath(path)
    if format is None:
        format = _guess_format(spath)
    if format not in FORMATS:
        raise DatasetError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}", path=spath)
    if format == "jsonl":
        return [load_jsonl(spath)]
    return load_locomo(spath) if format == "locomo" else load_longmemeval(spath)


def _guess_format(path: str) -> str:
    if path.endswith(".jsonl"):
        return "jsonl"
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(4096)
    except OSError as exc:
        raise DatasetError(f"cannot read file: {exc.strerror or exc}", path=path) from None
    if '"sample_id"' in head or '"speaker_a"' in head:
        return "locomo"
    if '"question_id"' in head or '"haystack_sessions"' in head:
        return "longmemeval"
    if head.lstrip().startswith("{"):
        return "jsonl"
    raise DatasetError("cannot tell the format; pass format= (jsonl, locomo or longmemeval)", path=path)
