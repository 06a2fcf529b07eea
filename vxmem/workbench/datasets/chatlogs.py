"""Chat logs people already have, loaded as conversations the workbench can replay.

Three formats load into one :class:`~vxmem.workbench.datasets.Conversation` of turn events (no
probes; :func:`vxmem.workbench.datasets.probes.add_probe` writes them), each read by a module of
its own:

- ``openai`` (:mod:`~vxmem.workbench.datasets.openai_chat`): OpenAI / ChatML messages as JSON
  Lines, either one conversation per line (``{"messages": [{"role", "content"}, ...]}`` or a
  bare list of messages) or one message per line (``{"role", "content"}`` with optional
  ``timestamp`` / ``created_at`` and ``conversation_id`` / ``session``).
- ``chatgpt`` (:mod:`~vxmem.workbench.datasets.chatgpt_export`): the ``conversations.json`` of a
  ChatGPT data export. Each conversation's current branch is followed from ``current_node``
  back to the root, so an edited and regenerated answer appears once, as the user last saw it.
- ``csv`` (:mod:`~vxmem.workbench.datasets.chat_csv`): a header ``session,role,text`` and
  optionally ``timestamp``.

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

import os
import re

from .chat_csv import CSV_REQUIRED, parse_csv
from .chat_records import Chat
from .chatgpt_export import parse_chatgpt
from .model import FORMAT_HINT, Conversation, DatasetError, Event
from .openai_chat import parse_openai

CHAT_FORMATS = ("openai", "chatgpt", "csv")
TURN_GAP = 60.0  # seconds between undated messages of one chat
SESSION_GAP = 3600.0  # seconds between an undated chat and the end of the chat before it

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
        chats = parse_openai(text, path, skipped)
    elif format == "chatgpt":
        chats = parse_chatgpt(text, path, skipped)
    else:
        chats = parse_csv(text, path, skipped)
    return _conversation(chats, name, format, path, skipped)


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
    raise DatasetError(f"cannot tell the chat format; {FORMAT_HINT} (one of " + ", ".join(CHAT_FORMATS) + ")",
                       path=path)


# ---------------------------------------------------------------------------- the timeline


def _conversation(chats: list[Chat], name: str, fmt: str, path: str | None,
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
