"""Chat logs people already have, loaded as conversations the workbench can replay.

Three formats load into one :class:`~vxmem.workbench.datasets.Conversation` of turn events (no
probes; :func:`add_probe` writes them):

- ``openai``: OpenAI / ChatML messages as JSON Lines, either one conversation per line
  (``{"messages": [{"role", "content"}, ...]}`` or a bare list of messages) or one
  message per line (``{"role", "content"}`` with optional ``timestamp`` / ``created_at``
  and ``conversation_id`` / ``session``).
- ``chatgpt``: the ``conversations.json`` of a ChatGPT data export. Each conversation's
  current branch is followed from ``current_node`` back to the root, so an edited and
  regenerated answer appears once, as the user last saw it.
- ``csv``: a header ``session,role,text`` and optionally ``timestamp``.

Every chat (conversation, session) becomes one memory session and its messages turns
labelled ``"<session>:<i>"``, ``i`` counting from 0 over the turns kept. System and
developer prompts, hidden messages, non-text content and empty messages are skipped and
counted in ``meta["stats"]["skipped"]``: they are instructions and tooling, not what the
user and assistant said. Timestamps are ISO-8601 or epoch seconds. A message without one
comes :data:`TURN_GAP` seconds after the previous message of its chat; a chat whose first
message has none starts at the chat's own creation time if the format has one, else
:data:`SESSION_GAP` seconds after the previous chat ends (the first at the Unix epoch).
A timestamp earlier than the previous message of its chat is moved up to it, so a chat's
order is kept, and counted as ``clamped``.

Bad input raises :class:`~vxmem.workbench.datasets.DatasetError` naming the file, the line or
record and what was expected; nothing is half-loaded.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.clock import to_epoch
from .model import Conversation, DatasetError, Event

CHAT_FORMATS = ("openai", "chatgpt", "csv")
TURN_GAP = 60.0  # seconds between undated messages of one chat
SESSION_GAP = 3600.0  # seconds between an undated chat and the end of the chat before it
SKIPPED_ROLES = frozenset({"system", "developer"})
CSV_COLUMNS = ("session", "role", "text", "timestamp")
CSV_REQUIRED = ("session", "role", "text")

_TIME_KEYS = ("timestamp", "created_at", "create_time")
_SESSION_KEYS = ("conversation_id", "session", "id")
_TEXT_PART_TYPES = ("text", "input_text", "output_text")
_CHATGPT_TEXT_TYPES = ("text", "multimodal_text")


@dataclass
class _Message:
    role: str
    text: str
    time: float | None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Chat:
    """One chat as read, before times and labels are assigned."""

    session: str
    start: float | None = None
    messages: list[_Message] = field(default_factory=list)
    title: str | None = None


class _Bad(ValueError):
    """A problem inside one record; the caller adds the file and the line or record."""


# ---------------------------------------------------------------------------- entry points


def detect_chat_format(path) -> str:
    """Which of :data:`CHAT_FORMATS` the file at ``path`` holds, from its name and first bytes."""
    spath = os.fspath(path)
    head = _read_text(spath, limit=65536)
    return _detect(head, spath)


def load_chatlog(path, format: str | None = None, *, name: str | None = None) -> Conversation:
    """The chat log at ``path`` as one conversation of turns, one memory session per chat.

    ``format`` is one of :data:`CHAT_FORMATS` (default: :func:`detect_chat_format`);
    ``name`` names the conversation (default: the file name without its extension).
    """
    spath = os.fspath(path)
    text = _read_text(spath)
    return loads_chatlog(text, format, name=name or _stem(spath), path=spath)


def loads_chatlog(text: str, format: str | None = None, *, name: str = "chatlog",
                  path: str | None = None) -> Conversation:
    """Parse a chat log held in a string (an upload, say); see :func:`load_chatlog`.

    ``path`` only names the source in error messages and the description.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    text = text.removeprefix("\ufeff")
    if format is None:
        format = _detect(text[:65536], path)
    if format not in CHAT_FORMATS:
        raise DatasetError(f"unknown chat format {format!r}; expected one of {', '.join(CHAT_FORMATS)}", path=path)
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    skipped: dict[str, int] = {}
    if format == "openai":
        chats = _parse_openai(text, path, skipped)
    elif format == "chatgpt":
        chats = _parse_chatgpt(text, path, skipped)
    else:
        chats = _parse_csv(text, path, skipped)
    return _conversation(chats, name, format, path, skipped)


def add_probe(conversation: Conversation, query: str, relevant_labels, session: str | None = None,
              time=None, *, stale_labels: Sequence[str] = (), category: str | None = None,
              label: str | None = None, limit: int | None = None) -> Conversation:
    """A new conversation with one more probe: ``query`` asked at ``time`` in ``session``.

    ``relevant_labels`` lists the turns a good recall returns (or maps them to grades > 0),
    ``stale_labels`` those it must not. ``session=None`` asks across every session;
    ``time`` defaults to :data:`TURN_GAP` after the last event, and an earlier time
    places the probe at that moment of the timeline. ``label`` defaults to the first
    free ``q<n>``. The original conversation is left unchanged.
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
    sessions = {e.session for e in events if e.creates_memory}
    if session is not None:
        if not isinstance(session, str):
            raise TypeError(f"session must be a str or None, not {type(session).__name__}")
        if session not in sessions:
            raise ValueError(f"session {session!r} has no memories in this conversation; "
                             f"sessions: {', '.join(sorted(s for s in sessions if s is not None)) or '(none)'}")
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
    if label is None:
        n = len(conversation.probes) + 1
        while f"q{n}" in at:
            n += 1
        label = f"q{n}"
    elif not isinstance(label, str) or not label:
        raise ValueError(f"label must be a non-empty string, got {label!r}")
    elif label in at:
        raise ValueError(f"label {label!r} is already used in this conversation")
    if category is not None and not isinstance(category, str):
        raise TypeError(f"category must be a str or None, not {type(category).__name__}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an int >= 1 or None, got {limit!r}")
    probe = Event(time=t, type="probe", label=label, query=query, session=session, relevant=relevant,
                  stale=stale, category=category, limit=limit)
    # After every event at or before its time: a probe sees what was said up to then.
    pos = next((i for i, e in enumerate(events) if e.time > t), len(events))
    return Conversation(name=conversation.name, events=[*events[:pos], probe, *events[pos:]],
                        description=conversation.description, meta=dict(conversation.meta))


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


# ---------------------------------------------------------------------------- reading and detecting


def _read_text(path: str, limit: int | None = None) -> str:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            return f.read() if limit is None else f.read(limit)
    except OSError as exc:
        raise DatasetError(f"cannot read chat log: {exc.strerror or exc}", path=path) from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not UTF-8 text (byte {exc.start})", path=path) from None


def _stem(path: str) -> str:
    base = os.path.basename(path)
    return os.path.splitext(base)[0] or base or "chatlog"


_KEY = r'(?<!\\)"{}"\s*:'


def _detect(head: str, path: str | None) -> str:
    if path is not None and path.lower().endswith(".csv"):
        return "csv"
    body = head.lstrip()
    if body[:1] in ("[", "{"):
        if re.search(_KEY.format("mapping"), head) and re.search(_KEY.format("current_node|title"), head):
            return "chatgpt"
        if re.search(_KEY.format("role"), head) or re.search(_KEY.format("messages"), head):
            return "openai"
    else:
        first = body.splitlines()[0] if body else ""
        cols = {c.strip().lower() for c in first.split(",")}
        if set(CSV_REQUIRED) <= cols:
            return "csv"
    raise DatasetError("cannot tell the chat format; pass format= (one of " + ", ".join(CHAT_FORMATS) + ")",
                       path=path)


def _json(text: str):
    """``json.loads`` whose failures (bad JSON, absurd nesting) are :class:`_Bad`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Bad(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise _Bad("JSON nested too deeply to be a chat log") from None


def _time(value, what: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        v = value.strip()
        value = float(v) if re.fullmatch(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?", v) else v
    try:
        return to_epoch(value, what)
    except ValueError as exc:
        msg = str(exc)
        if isinstance(value, (int, float)) and "out of range" in msg:
            msg += " (epoch milliseconds? give seconds)"
        raise _Bad(msg) from None
    except TypeError:
        raise _Bad(f"{what} must be an ISO-8601 string or epoch seconds, got {value!r}") from None


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{what} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Bad(f"{what} is not valid Unicode (a lone surrogate at character {exc.start})") from None
    return value


def _session_name(value, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _Bad(f"{what} must be a string or an integer, got {value!r}")
    s = _text(str(value), what)
    if not s.strip():
        raise _Bad(f"{what} must not be empty")
    return s


def _skip(skipped: dict[str, int], why: str) -> None:
    skipped[why] = skipped.get(why, 0) + 1


# ---------------------------------------------------------------------------- OpenAI / ChatML JSONL


def _parse_openai(text: str, path: str | None, skipped: dict[str, int]) -> list[_Chat]:
    chats: dict[str, _Chat] = {}
    shape: tuple[str, int] | None = None  # ("conversation" | "message", first line)
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = _json(line)
            kind = "message" if isinstance(obj, dict) and "messages" not in obj else "conversation"
            if not isinstance(obj, (dict, list)):
                raise _Bad("expected a conversation ({\"messages\": [...]} or a list of messages) "
                           "or one message ({\"role\", \"content\"}) per line")
            if shape is None:
                shape = (kind, n)
            elif shape[0] != kind:
                raise _Bad(f"a {kind} line in a file of one {shape[0]} per line (line {shape[1]})")
            if kind == "conversation":
                _openai_conversation(obj, len(chats) + 1, chats, skipped)
            elif isinstance(obj, dict):
                _openai_line(obj, chats, skipped)
        except _Bad as exc:
            raise DatasetError(str(exc), line=n, path=path) from None
    return list(chats.values())


def _openai_conversation(obj, number: int, chats: dict[str, _Chat], skipped: dict[str, int]) -> None:
    if isinstance(obj, list):
        messages, head = obj, {}
    else:
        messages, head = obj["messages"], obj
        if not isinstance(messages, list):
            raise _Bad("'messages' must be a list of {\"role\", \"content\"} objects")
    key = next((k for k in _SESSION_KEYS if head.get(k) is not None), None)
    session = _session_name(head[key], f"'{key}'") if key else f"c{number}"
    if session in chats:
        raise _Bad(f"conversation {session!r} appears twice")
    chat = _Chat(session, start=_time(next((head[k] for k in _TIME_KEYS if head.get(k) is not None), None),
                                      "the conversation's timestamp"))
    for j, msg in enumerate(messages):
        try:
            m = _openai_message(msg, skipped)
        except _Bad as exc:
            raise _Bad(f"message {j}: {exc}") from None
        if m is not None:
            chat.messages.append(m)
    chats[session] = chat


def _openai_line(obj: dict, chats: dict[str, _Chat], skipped: dict[str, int]) -> None:
    key = next((k for k in ("conversation_id", "session") if obj.get(k) is not None), None)
    session = _session_name(obj[key], f"'{key}'") if key else "chat"
    m = _openai_message(obj, skipped)
    chat = chats.setdefault(session, _Chat(session))
    if m is not None:
        chat.messages.append(m)


def _openai_message(msg, skipped: dict[str, int]) -> _Message | None:
    if not isinstance(msg, dict) or not isinstance(msg.get("role"), str) or not msg["role"].strip():
        raise _Bad("a message must be an object with a 'role' string and a 'content'")
    if "content" not in msg:
        raise _Bad("a message needs a 'content' (a string, a list of parts, or null)")
    role = _text(msg["role"], "'role'")
    t = _time(next((msg[k] for k in _TIME_KEYS if msg.get(k) is not None), None), "the message's timestamp")
    if role in SKIPPED_ROLES:
        _skip(skipped, role)
        return None
    content = msg["content"]
    if content is None:
        _skip(skipped, "empty")  # an assistant turn that only called a tool
        return None
    if isinstance(content, str):
        text = _text(content, "'content'")
    elif isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if isinstance(part, str):
                parts.append(_text(part, f"content part {k}"))
            elif isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES:
                parts.append(_text(part.get("text"), f"content part {k} 'text'"))
            elif isinstance(part, dict) and isinstance(part.get("type"), str):
                _skip(skipped, "non_text_part")  # an image, audio or file
            else:
                raise _Bad(f"content part {k} must be a string or an object with a 'type'")
        text = "\n".join(p for p in parts if p.strip())
    else:
        raise _Bad(f"'content' must be a string, a list of parts or null, got {type(content).__name__}")
    if not text.strip():
        _skip(skipped, "empty")
        return None
    return _Message(role, text, t)


# ---------------------------------------------------------------------------- ChatGPT export


def _parse_chatgpt(text: str, path: str | None, skipped: dict[str, int]) -> list[_Chat]:
    try:
        data = _json(text)
    except _Bad as exc:
        raise DatasetError(str(exc), path=path) from None
    if isinstance(data, dict) and "mapping" in data:
        data = [data]  # one conversation on its own
    if not isinstance(data, list):
        raise DatasetError("a ChatGPT export's conversations.json is a list of conversations, each with "
                           "'title', 'create_time', 'mapping' and 'current_node'", path=path)
    chats: dict[str, _Chat] = {}
    for i, conv in enumerate(data):
        title = conv.get("title") if isinstance(conv, dict) else None
        try:
            chat = _chatgpt_conversation(conv, i, skipped)
            if chat.session in chats:
                raise _Bad(f"conversation id {chat.session!r} appears twice")
            chats[chat.session] = chat
        except _Bad as exc:
            raise DatasetError(f"conversation {i} ({title!r}): {exc}", path=path) from None
    return list(chats.values())


def _chatgpt_conversation(conv, i: int, skipped: dict[str, int]) -> _Chat:
    if not isinstance(conv, dict):
        raise _Bad("expected an object with 'title', 'create_time', 'mapping' and 'current_node'")
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict) or not all(isinstance(v, dict) for v in mapping.values()):
        raise _Bad("'mapping' must be an object of node id -> {message, parent, children}")
    key = next((k for k in ("conversation_id", "id") if conv.get(k) is not None), None)
    session = _session_name(conv[key], f"'{key}'") if key else f"c{i + 1}"
    title = conv.get("title")
    chat = _Chat(session, start=_time(conv.get("create_time"), "'create_time'"),
                 title=_text(title, "'title'") if title is not None else None)
    for node_id in _branch(mapping, conv.get("current_node")):
        node = mapping[node_id]
        try:
            m = _chatgpt_message(node.get("message"), skipped)
        except _Bad as exc:
            raise _Bad(f"node {node_id!r}: {exc}") from None
        if m is not None:
            m.meta["id"] = node_id
            chat.messages.append(m)
    return chat


def _branch(mapping: dict[str, dict], current) -> list[str]:
    """Node ids from the root down to ``current`` (default: the newest leaf), following parents."""
    if current is None:
        current = _newest_leaf(mapping)
        if current is None:
            return []
    if not isinstance(current, str) or current not in mapping:
        raise _Bad(f"'current_node' {current!r} is not a node of 'mapping'")
    path: list[str] = []
    seen: set[str] = set()
    node_id: Any = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise _Bad(f"parent {node_id!r} of node {path[-1]!r} is not a node of 'mapping'")
        if node_id in seen:
            raise _Bad(f"the parents of node {current!r} loop back to {node_id!r}")
        seen.add(node_id)
        path.append(node_id)
        node_id = mapping[node_id].get("parent")
    path.reverse()
    return path


def _newest_leaf(mapping: dict[str, dict]) -> str | None:
    """The leaf the export would show without a ``current_node``: the last child at each step."""
    roots = [k for k, v in mapping.items() if v.get("parent") is None]
    if not roots:
        return None
    node, seen = roots[0], set()
    while True:
        seen.add(node)
        children = mapping[node].get("children") or []
        nxt = next((c for c in reversed(children) if isinstance(c, str) and c in mapping and c not in seen), None)
        if nxt is None:
            return node
        node = nxt


def _chatgpt_message(msg, skipped: dict[str, int]) -> _Message | None:
    if msg is None:
        return None  # the root node holds no message
    if not isinstance(msg, dict):
        raise _Bad("'message' must be an object or null")
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str) or not role:
        raise _Bad("a message needs 'author': {'role': ...}")
    t = _time(msg.get("create_time"), "'create_time'")
    meta: dict[str, Any] = msg["metadata"] if isinstance(msg.get("metadata"), dict) else {}
    if role in SKIPPED_ROLES:
        _skip(skipped, role)
        return None
    if meta.get("is_visually_hidden_from_conversation"):
        _skip(skipped, "hidden")
        return None
    if msg.get("recipient") not in (None, "all"):
        _skip(skipped, "to_tool")  # the assistant talking to a tool, not to the user
        return None
    content = msg.get("content")
    if not isinstance(content, dict):
        raise _Bad("'content' must be an object with 'content_type' and 'parts'")
    if content.get("content_type") not in _CHATGPT_TEXT_TYPES:
        _skip(skipped, "non_text")
        return None
    parts = content.get("parts")
    if not isinstance(parts, list):
        raise _Bad("a text message's 'content' needs a 'parts' list")
    texts = []
    for k, part in enumerate(parts):
        if isinstance(part, str):
            texts.append(_text(part, f"part {k}"))
        else:
            _skip(skipped, "non_text_part")  # an image or a file pointer
    text = "\n".join(p for p in texts if p.strip())
    if not text.strip():
        _skip(skipped, "empty")
        return None
    return _Message(_text(role, "'role'"), text, t)


# ---------------------------------------------------------------------------- CSV


def _parse_csv(text: str, path: str | None, skipped: dict[str, int]) -> list[_Chat]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise DatasetError(f"not valid CSV ({exc})", line=1, path=path) from None
    if header is None:
        raise DatasetError("empty file: expected a header " + ",".join(CSV_COLUMNS), path=path)
    cols = [c.strip().lower() for c in header]
    unknown = [c for c in cols if c not in CSV_COLUMNS]
    missing = [c for c in CSV_REQUIRED if c not in cols]
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if unknown or missing or dupes:
        what = (f"unknown column {unknown[0]!r}" if unknown else
                f"missing column {missing[0]!r}" if missing else f"column {dupes[0]!r} appears twice")
        raise DatasetError(f"{what}: the header must name session, role and text, and optionally timestamp",
                           line=1, path=path)
    at = {c: i for i, c in enumerate(cols)}
    chats: dict[str, _Chat] = {}
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise DatasetError(f"not valid CSV ({exc})", line=start, path=path) from None
        if row is None:
            break
        line, start = start, reader.line_num + 1
        if not any(cell.strip() for cell in row):
            continue
        try:
            if len(row) != len(cols):
                raise _Bad(f"expected {len(cols)} fields ({','.join(cols)}), got {len(row)}")
            session = _session_name(row[at["session"]].strip(), "session")
            role = row[at["role"]].strip()
            if not role:
                raise _Bad("role must not be empty")
            body = _text(row[at["text"]], "text")
            t = _time(row[at["timestamp"]], "timestamp") if "timestamp" in at else None
        except _Bad as exc:
            raise DatasetError(str(exc), line=line, path=path) from None
        chat = chats.setdefault(session, _Chat(session))
        if role in SKIPPED_ROLES:
            _skip(skipped, role)
        elif not body.strip():
            _skip(skipped, "empty")
        else:
            chat.messages.append(_Message(role, body, t))
    return list(chats.values())


# ---------------------------------------------------------------------------- the timeline


def _conversation(chats: list[_Chat], name: str, fmt: str, path: str | None,
                  skipped: dict[str, int]) -> Conversation:
    """Times and labels for every kept message, merged into one timeline in time order."""
    chats = [c for c in chats if c.messages]
    if not chats:
        raise DatasetError(f"no chat messages found (a {fmt} chat log with at least one user or assistant "
                           "message with text was expected)", path=path)
    undated = clamped = 0
    rows: list[tuple[float, int, int, Event]] = []
    prev_end: float | None = None
    for order, chat in enumerate(chats):
        t_prev: float | None = None
        for i, m in enumerate(chat.messages):
            if m.time is not None:
                t = m.time
                if t_prev is not None and t < t_prev:
                    t = t_prev
                    clamped += 1
            else:
                undated += 1
                if t_prev is not None:
                    t = t_prev + TURN_GAP
                elif chat.start is not None:
                    t = chat.start
                else:
                    t = 0.0 if prev_end is None else prev_end + SESSION_GAP
            t_prev = t
            meta = dict(m.meta)
            if i == 0 and chat.title is not None:
                meta["title"] = chat.title
            ev = Event(time=t, type="turn", label=f"{chat.session}:{i}", session=chat.session, role=m.role,
                       text=m.text, meta=meta)
            rows.append((t, order, i, ev))
        prev_end = t_prev
    rows.sort(key=lambda r: r[:3])
    stats = {"sessions": len(chats), "turns": len(rows), "undated": undated, "clamped": clamped,
             "skipped": dict(sorted(skipped.items()))}
    source = os.path.basename(path) if path else "text"
    return Conversation(name=name, events=[r[3] for r in rows],
                        description=f"{fmt} chat log {source}: {len(chats)} sessions, {len(rows)} turns",
                        meta={"source": fmt, "stats": stats})
