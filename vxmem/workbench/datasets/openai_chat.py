"""OpenAI / ChatML messages as JSON Lines, read into chats.

Either one conversation per line (``{"messages": [{"role", "content"}, ...]}`` or a bare list
of messages) or one message per line (``{"role", "content"}`` with optional ``timestamp`` /
``created_at`` and ``conversation_id`` / ``session``).
"""

from __future__ import annotations

from .chat_records import (
    SKIPPED_ROLES,
    BadRecord,
    Chat,
    ChatMessage,
    checked_text,
    count_skip,
    name_unnamed,
    read_json,
    read_time,
    session_name,
)
from .model import DatasetError

_TIME_KEYS = ("timestamp", "created_at", "create_time")
_SESSION_KEYS = ("conversation_id", "session", "id")
_TEXT_PART_TYPES = ("text", "input_text", "output_text")
_UNNAMED = "\0unnamed "  # the key of a chat without an id until the file is read (see name_unnamed)


def parse_openai(text: str, path: str | None, skipped: dict[str, int]) -> list[Chat]:
    """The chats of an OpenAI / ChatML JSONL ``text`` (``skipped`` counts what is left out)."""
    chats: dict[str, Chat] = {}
    shape: tuple[str, int] | None = None  # ("conversation" | "message", first line)
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = read_json(line)
            kind = "message" if isinstance(obj, dict) and "messages" not in obj else "conversation"
            if not isinstance(obj, (dict, list)):
                raise BadRecord("expected a conversation ({\"messages\": [...]} or a list of messages) "
                           "or one message ({\"role\", \"content\"}) per line")
            if shape is None:
                shape = (kind, n)
            elif shape[0] != kind:
                raise BadRecord(f"a {kind} line in a file of one {shape[0]} per line (line {shape[1]})")
            if kind == "conversation":
                _openai_conversation(obj, chats, skipped)
            elif isinstance(obj, dict):
                _openai_line(obj, chats, skipped)
        except BadRecord as exc:
            raise DatasetError(str(exc), line=n, path=path) from None
    out = list(chats.values())
    name_unnamed(out, {i for i, key in enumerate(chats) if key.startswith(_UNNAMED)})
    return out


def _openai_conversation(obj, chats: dict[str, Chat], skipped: dict[str, int]) -> None:
    if isinstance(obj, list):
        messages, head = obj, {}
    else:
        messages, head = obj["messages"], obj
        if not isinstance(messages, list):
            raise BadRecord("'messages' must be a list of {\"role\", \"content\"} objects")
    key = next((k for k in _SESSION_KEYS if head.get(k) is not None), None)
    session = session_name(head[key], f"'{key}'") if key else f"{_UNNAMED}{len(chats)}"  # named at the end
    if session in chats:
        raise BadRecord(f"conversation {session!r} appears twice")
    chat = Chat(session, start=read_time(next((head[k] for k in _TIME_KEYS if head.get(k) is not None), None),
                                      "the conversation's timestamp"))
    for j, msg in enumerate(messages):
        try:
            m = _openai_message(msg, skipped)
        except BadRecord as exc:
            raise BadRecord(f"message {j}: {exc}") from None
        if m is not None:
            chat.messages.append(m)
    chats[session] = chat


def _openai_line(obj: dict, chats: dict[str, Chat], skipped: dict[str, int]) -> None:
    key = next((k for k in ("conversation_id", "session") if obj.get(k) is not None), None)
    session = session_name(obj[key], f"'{key}'") if key else "chat"
    m = _openai_message(obj, skipped)
    chat = chats.setdefault(session, Chat(session))
    if m is not None:
        chat.messages.append(m)


def _openai_message(msg, skipped: dict[str, int]) -> ChatMessage | None:
    if not isinstance(msg, dict) or not isinstance(msg.get("role"), str) or not msg["role"].strip():
        raise BadRecord("a message must be an object with a 'role' string and a 'content'")
    if "content" not in msg:
        raise BadRecord("a message needs a 'content' (a string, a list of parts, or null)")
    role = checked_text(msg["role"], "'role'")
    t = read_time(next((msg[k] for k in _TIME_KEYS if msg.get(k) is not None), None), "the message's timestamp")
    if role in SKIPPED_ROLES:
        count_skip(skipped, role)
        return None
    content = msg["content"]
    if content is None:
        count_skip(skipped, "empty")  # an assistant turn that only called a tool
        return None
    if isinstance(content, str):
        text = checked_text(content, "'content'")
    elif isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if isinstance(part, str):
                parts.append(checked_text(part, f"content part {k}"))
            elif isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES:
                parts.append(checked_text(part.get("text"), f"content part {k} 'text'"))
            elif isinstance(part, dict) and isinstance(part.get("type"), str):
                count_skip(skipped, "non_text_part")  # an image, audio or file
            else:
                raise BadRecord(f"content part {k} must be a string or an object with a 'type'")
        text = "\n".join(p for p in parts if p.strip())
    else:
        raise BadRecord(f"'content' must be a string, a list of parts or null, got {type(content).__name__}")
    if not text.strip():
        count_skip(skipped, "empty")
        return None
    return ChatMessage(role, text, t)
