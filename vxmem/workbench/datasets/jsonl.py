"""The conversation's own file format: JSON Lines, a header line and then one event per line.

See ``datasets/README.md`` for the fields. Loading validates every line first and raises
:class:`~vxmem.workbench.datasets.DatasetError` naming the line; nothing is half-loaded.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .model import FORMAT, HEADER_KEYS, Conversation, DatasetError, Event, check_events


def dumps_jsonl(conversation: Conversation) -> str:
    """``conversation`` as JSON Lines text: the header, then one event per line."""
    return conversation.to_jsonl()


def save_jsonl(conversation: Conversation, path) -> None:
    """Write ``conversation`` as JSON Lines: the header, then one event per line.

    The file is written beside its final name and moved into place, so a reader never
    sees half a conversation.
    """
    conversation.save(path)


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


def loads_jsonl(text: str, path: str | None = None) -> Conversation:
    """Parse a JSONL conversation from a string (see :func:`load_jsonl`); a byte-order mark
    before the header, as some Windows editors write, is skipped."""
    raw = [(n, line) for n, line in enumerate(text.removeprefix("\ufeff").splitlines(), 1) if line.strip()]
    if not raw:
        raise DatasetError("empty file: expected a header line, then one event per line", path=path)
    n0, first = raw[0]
    header = _read_header(first, n0, path)
    events, lines = [], []
    for n, line in raw[1:]:
        obj = _parse_line(line, n, path)
        try:
            events.append(Event.from_dict(obj))
        except ValueError as exc:
            raise DatasetError(str(exc), line=n, path=path) from None
        lines.append(n)
    problems = check_events(events, lambda i: f"line {lines[i]}")
    if problems:
        i, msg = problems[0]
        raise DatasetError(msg, line=lines[i], path=path)
    meta = {k: v for k, v in header.items() if k not in ("format", "name", "description")}
    return Conversation(name=header["name"], events=events, description=str(header.get("description") or ""),
                        meta=meta)


def _read_header(line: str, n: int, path: str | None) -> dict[str, Any]:
    """The header line, checked: the format tag, known fields only, a name."""
    header = _parse_line(line, n, path)
    tag = header.get("format") if isinstance(header, dict) else None
    family = FORMAT.rsplit("/", 1)[0] + "/"
    if isinstance(tag, str) and tag.startswith(family) and tag != FORMAT:
        raise DatasetError(f"this file is {tag!r}, a version of the format this vxmem does not read (it reads "
                           f"{FORMAT!r}): open it with the vxmem that wrote it, or a newer one", line=n, path=path)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise DatasetError(f"the first line must be a header object with \"format\": \"{FORMAT}\"",
                           line=n, path=path)
    unknown = set(header) - HEADER_KEYS
    if unknown:
        raise DatasetError(f"unknown header field {sorted(unknown)[0]!r}", line=n, path=path)
    name = header.get("name")
    if not isinstance(name, str) or not name:
        raise DatasetError("the header needs a non-empty 'name'", line=n, path=path)
    if header.get("settings") is not None and not isinstance(header["settings"], dict):
        raise DatasetError("the header's 'settings' must be an object of replay settings", line=n, path=path)
    for key in ("judge", "summarizer", "description"):
        if header.get(key) is not None and not isinstance(header[key], str):
            raise DatasetError(f"the header's {key!r} must be a string", line=n, path=path)
    return header


def _parse_line(line: str, n: int, path: str | None) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"not valid JSON ({exc.msg} at column {exc.colno})", line=n, path=path) from None
    except RecursionError:
        raise DatasetError("JSON nested too deeply to be an event", line=n, path=path) from None
