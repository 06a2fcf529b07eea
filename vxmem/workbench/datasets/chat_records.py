"""What every chat-log reader shares: the chats and messages as read, and the checks of a record's values.

A reader (:mod:`~vxmem.workbench.datasets.openai_chat`, :mod:`~vxmem.workbench.datasets.chatgpt_export`,
:mod:`~vxmem.workbench.datasets.chat_csv`) turns a file into :class:`Chat` s of
:class:`ChatMessage` s; a problem inside one record is a :class:`BadRecord`, which the reader
turns into a :class:`~vxmem.workbench.datasets.DatasetError` naming the file and the line or record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...core.clock import to_epoch

SKIPPED_ROLES = frozenset({"system", "developer"})


@dataclass
class ChatMessage:
    """One message as read: who said it, what, when (None: undated) and what else the format tells."""

    role: str
    text: str
    time: float | None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Chat:
    """One chat as read, before times and labels are assigned."""

    session: str
    start: float | None = None
    messages: list[ChatMessage] = field(default_factory=list)
    title: str | None = None


class BadRecord(ValueError):
    """A problem inside one record; the caller adds the file and the line or record."""


def read_json(text: str):
    """``json.loads`` whose failures (bad JSON, absurd nesting) are :class:`BadRecord`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRecord(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise BadRecord("JSON nested too deeply to be a chat log") from None


def read_time(value, what: str) -> float | None:
    """A record's timestamp (ISO-8601 or epoch seconds, as a number or a string) as epoch
    seconds; None for none. ``what`` names it in the error."""
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
        raise BadRecord(msg) from None
    except TypeError:
        raise BadRecord(f"{what} must be an ISO-8601 string or epoch seconds, got {value!r}") from None


def checked_text(value, what: str) -> str:
    """``value`` if it is a string that encodes as UTF-8; ``what`` names it in the error."""
    if not isinstance(value, str):
        raise BadRecord(f"{what} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRecord(f"{what} is not valid Unicode (a lone surrogate at character {exc.start})") from None
    return value


def session_name(value, what: str) -> str:
    """A chat's id (a string or an integer) as a non-empty session name."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadRecord(f"{what} must be a string or an integer, got {value!r}")
    s = checked_text(str(value), what)
    if not s.strip():
        raise BadRecord(f"{what} must not be empty")
    return s


def name_unnamed(chats: list[Chat], unnamed: set[int]) -> None:
    """Name the chats at the places ``unnamed`` (from 0) in ``chats`` ``c1``, ``c2``, ... by
    place, once every chat the file names is known, so a generated name never takes one the
    file gives: the third chat becomes ``c3-2`` when another is called ``c3``."""
    taken = {c.session for i, c in enumerate(chats) if i not in unnamed}
    for i in sorted(unnamed):
        name, k = f"c{i + 1}", 2
        while name in taken:
            name, k = f"c{i + 1}-{k}", k + 1
        chats[i].session = name
        taken.add(name)


def count_skip(skipped: dict[str, int], why: str) -> None:
    """One more message left out for ``why`` (``meta["stats"]["skipped"]`` of the conversation)."""
    skipped[why] = skipped.get(why, 0) + 1
