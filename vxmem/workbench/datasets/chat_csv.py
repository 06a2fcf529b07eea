"""A chat log as CSV, read into chats: a header ``session,role,text`` and optionally ``timestamp``."""

from __future__ import annotations

import csv
import io

from .chat_records import SKIPPED_ROLES, BadRecord, Chat, ChatMessage, checked_text, count_skip, read_time, session_name
from .model import DatasetError

CSV_COLUMNS = ("session", "role", "text", "timestamp")
CSV_REQUIRED = ("session", "role", "text")


def parse_csv(text: str, path: str | None, skipped: dict[str, int]) -> list[Chat]:
    """The chats of a chat-log CSV ``text`` (``skipped`` counts what is left out)."""
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
    chats: dict[str, Chat] = {}
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
                raise BadRecord(f"expected {len(cols)} fields ({','.join(cols)}), got {len(row)}")
            session = session_name(row[at["session"]].strip(), "session")
            role = row[at["role"]].strip()
            if not role:
                raise BadRecord("role must not be empty")
            body = checked_text(row[at["text"]], "text")
            t = read_time(row[at["timestamp"]], "timestamp") if "timestamp" in at else None
        except BadRecord as exc:
            raise DatasetError(str(exc), line=line, path=path) from None
        chat = chats.setdefault(session, Chat(session))
        if role in SKIPPED_ROLES:
            count_skip(skipped, role)
        elif not body.strip():
            count_skip(skipped, "empty")
        else:
            chat.messages.append(ChatMessage(role, body, t))
    return list(chats.values())
