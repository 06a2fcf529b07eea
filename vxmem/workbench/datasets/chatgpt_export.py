"""The ``conversations.json`` of a ChatGPT data export, read into chats.

Each conversation's current branch is followed from ``current_node`` back to the root, so
an edited and regenerated answer appears once, as the user last saw it.
"""

from __future__ import annotations

from typing import Any

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

_CHATGPT_TEXT_TYPES = ("text", "multimodal_text")


def parse_chatgpt(text: str, path: str | None, skipped: dict[str, int]) -> list[Chat]:
    """The chats of a ChatGPT export's ``text`` (``skipped`` counts what is left out)."""
    try:
        data = read_json(text)
    except BadRecord as exc:
        raise DatasetError(str(exc), path=path) from None
    if isinstance(data, dict) and "mapping" in data:
        data = [data]  # one conversation on its own
    if not isinstance(data, list):
        raise DatasetError("a ChatGPT export's conversations.json is a list of conversations, each with "
                           "'title', 'create_time', 'mapping' and 'current_node'", path=path)
    chats: list[Chat] = []
    named: set[str] = set()
    unnamed: set[int] = set()
    for i, conv in enumerate(data):
        title = conv.get("title") if isinstance(conv, dict) else None
        try:
            chat = _chatgpt_conversation(conv, skipped)
            if not chat.session:
                unnamed.add(i)
            elif chat.session in named:
                raise BadRecord(f"conversation id {chat.session!r} appears twice")
            named.add(chat.session)
            chats.append(chat)
        except BadRecord as exc:
            raise DatasetError(f"conversation {i} ({title!r}): {exc}", path=path) from None
    name_unnamed(chats, unnamed)
    return chats


def _chatgpt_conversation(conv, skipped: dict[str, int]) -> Chat:
    """One conversation as a chat (its session "" when it has no id: named once all are read)."""
    if not isinstance(conv, dict):
        raise BadRecord("expected an object with 'title', 'create_time', 'mapping' and 'current_node'")
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict) or not all(isinstance(v, dict) for v in mapping.values()):
        raise BadRecord("'mapping' must be an object of node id -> {message, parent, children}")
    key = next((k for k in ("conversation_id", "id") if conv.get(k) is not None), None)
    session = session_name(conv[key], f"'{key}'") if key else ""
    title = conv.get("title")
    chat = Chat(session, start=read_time(conv.get("create_time"), "'create_time'"),
                 title=checked_text(title, "'title'") if title is not None else None)
    for node_id in _branch(mapping, conv.get("current_node")):
        node = mapping[node_id]
        try:
            m = _chatgpt_message(node.get("message"), skipped)
        except BadRecord as exc:
            raise BadRecord(f"node {node_id!r}: {exc}") from None
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
        raise BadRecord(f"'current_node' {current!r} is not a node of 'mapping'")
    path: list[str] = []
    seen: set[str] = set()
    node_id: Any = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise BadRecord(f"parent {node_id!r} of node {path[-1]!r} is not a node of 'mapping'")
        if node_id in seen:
            raise BadRecord(f"the parents of node {current!r} loop back to {node_id!r}")
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
        if not isinstance(children, list):
            raise BadRecord(f"node {node!r}: 'children' must be a list of node ids")
        nxt = next((c for c in reversed(children) if isinstance(c, str) and c in mapping and c not in seen), None)
        if nxt is None:
            return node
        node = nxt


def _chatgpt_message(msg, skipped: dict[str, int]) -> ChatMessage | None:
    if msg is None:
        return None  # the root node holds no message
    if not isinstance(msg, dict):
        raise BadRecord("'message' must be an object or null")
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str) or not role:
        raise BadRecord("a message needs 'author': {'role': ...}")
    t = read_time(msg.get("create_time"), "'create_time'")
    meta: dict[str, Any] = msg["metadata"] if isinstance(msg.get("metadata"), dict) else {}
    if role in SKIPPED_ROLES:
        count_skip(skipped, role)
        return None
    if meta.get("is_visually_hidden_from_conversation"):
        count_skip(skipped, "hidden")
        return None
    if msg.get("recipient") not in (None, "all"):
        count_skip(skipped, "to_tool")  # the assistant talking to a tool, not to the user
        return None
    content = msg.get("content")
    if not isinstance(content, dict):
        raise BadRecord("'content' must be an object with 'content_type' and 'parts'")
    if content.get("content_type") not in _CHATGPT_TEXT_TYPES:
        count_skip(skipped, "non_text")
        return None
    parts = content.get("parts")
    if not isinstance(parts, list):
        raise BadRecord("a text message's 'content' needs a 'parts' list")
    texts = []
    for k, part in enumerate(parts):
        if isinstance(part, str):
            texts.append(checked_text(part, f"part {k}"))
        else:
            count_skip(skipped, "non_text_part")  # an image or a file pointer
    text = "\n".join(p for p in texts if p.strip())
    if not text.strip():
        count_skip(skipped, "empty")
        return None
    return ChatMessage(checked_text(role, "'role'"), text, t)
