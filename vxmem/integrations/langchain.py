"""vxmem in LangChain: a retriever and a chat message history (the ``langchain`` extra, on langchain-core only).

    pip install "vxmem[langchain]"
    from vxmem import Vectrix
    from vxmem.integrations.langchain import VxmemChatMessageHistory, VxmemRetriever
    db = Vectrix("chat.vxdb")
    retriever = VxmemRetriever(db=db, session="alice", limit=4)
    docs = retriever.invoke("which theme does she like?")   # Documents, the score breakdown in metadata

:class:`VxmemRetriever` runs ``db.recall()`` with the options its fields hold;
:class:`VxmemChatMessageHistory` remembers each message of a session as a turn and gives the
session's turns back as messages. langchain-core is imported here and nowhere else in vxmem.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError('vxmem.integrations.langchain needs the langchain extra: pip install "vxmem[langchain]"') \
        from exc

from ..core.clock import TimeLike, to_datetime
from ..core.keys import K_KIND, K_ROLE, K_SCORING, K_SESSION, K_TS, K_TURN, K_USER, KIND_TURN, KINDS, RESERVED_PREFIX
from ..core.sentinels import MEMORY_SETTING, MemorySetting
from ..store.results import Result
from ..vectrix import Vectrix

__all__ = ["VxmemRetriever", "VxmemChatMessageHistory", "document_of", "turn_of", "message_of", "ROLE_OF_TYPE"]

# LangChain's message types and the roles vxmem stores them under (and back).
ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "function"}
_MESSAGE_OF_ROLE: dict[str, type[BaseMessage]] = {"user": HumanMessage, "assistant": AIMessage,
                                                  "system": SystemMessage}


def document_of(result: Result) -> Document:
    """A recalled (or stored) memory as a LangChain ``Document``.

    ``metadata`` holds the memory's ``id``, ``kind``, ``session``, ``role``, ``turn`` and
    ``user``, when it was ``created`` (ISO 8601, UTC) and ``created_ts`` (epoch seconds), the
    blended ``score`` and its breakdown under ``scoring`` (relevance, recency, feedback, ...),
    and the caller's own metadata keys (where one has a name of these, the memory's field wins)."""
    meta = result.metadata
    out: dict[str, Any] = {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)}
    out |= {"id": result.id, "kind": meta.get(K_KIND), "session": meta.get(K_SESSION),
            "role": meta.get(K_ROLE), "turn": meta.get(K_TURN), "user": meta.get(K_USER)}
    ts = meta.get(K_TS)
    if ts is not None:
        out["created"] = to_datetime(float(ts)).isoformat()
        out["created_ts"] = float(ts)
    out["score"] = result.score
    out["scoring"] = dict(meta.get(K_SCORING) or {})
    return Document(page_content=result.text, id=result.id, metadata=out)


class VxmemRetriever(BaseRetriever):
    """A LangChain retriever over ``db.recall()``: relevance blended with recency and feedback.

    ``invoke(query)`` returns the recalled memories as ``Document``\\ s, best first, with the
    score breakdown in their metadata (see :func:`document_of`). The fields are ``recall()``'s
    options: ``session`` (None: every session), ``user``, ``limit``, ``token_budget``,
    ``kinds``, ``mode``, ``include_superseded``, ``min_relevance``, ``filter``; ``now`` fixes
    the moment recall runs at (default: the clock), and ``recall_kwargs`` passes any other
    option through.
    """

    db: Vectrix
    session: str | None = None
    user: str | None = None
    limit: int = 4
    token_budget: int | None = None
    kinds: tuple[str, ...] = KINDS
    mode: str | None = None
    include_superseded: bool = False
    min_relevance: float | MemorySetting | None = MEMORY_SETTING  # None: no floor
    filter: dict[str, Any] | None = None
    now: TimeLike = None
    recall_kwargs: dict[str, Any] = {}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        results = self.db.recall(query, session=self.session, limit=self.limit, token_budget=self.token_budget,
                                 kinds=self.kinds, include_superseded=self.include_superseded, mode=self.mode,
                                 now=self.now, min_relevance=self.min_relevance, filter=self.filter,
                                 user=self.user, **self.recall_kwargs)
        return [document_of(r) for r in results]


class VxmemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept as a vxmem session's turns.

    Each added message is remembered as a turn of ``session`` (and ``user``, if given) with
    the role its type says (human: ``user``, ai: ``assistant``, system, tool; a
    ``ChatMessage`` keeps its own role), so the same turns feed ``recall()`` and
    ``context()``. ``messages`` are the session's turns, oldest first (the last ``limit`` if
    given), each with the memory's id. ``clock`` returns the time a message is remembered at
    and ``messages`` read at (default: now); pass one to replay a conversation. ``clear()``
    forgets the session's turns, and only them: facts stay.
    """

    def __init__(self, db: Vectrix, session: str, *, user: str | None = None, limit: int | None = None,
                 clock: Callable[[], TimeLike] | None = None):
        if not isinstance(db, Vectrix):
            raise TypeError(f"db must be a vxmem Vectrix, not {type(db).__name__}")
        if not isinstance(session, str):
            raise TypeError(f"session must be a str, not {type(session).__name__}")
        self.db = db
        self.session = session
        self.user = user
        self.limit = limit
        self.clock = clock or (lambda: None)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's turns as messages, oldest first."""
        turns = self.db.turns(self.session, limit=self.limit, now=self.clock(), user=self.user)
        return [message_of(t) for t in turns]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Remember the messages as turns, in order, in one transaction (see :func:`turn_of`)."""
        items = [turn_of(m) for m in messages]
        self.db.remember_many(items, session=self.session, user=self.user, timestamp=self.clock())

    def clear(self) -> None:
        """Forget the session's turns (its facts stay)."""
        self.db.forget(session=self.session, kinds=(KIND_TURN,), user=self.user, now=self.clock())


def role_of(message: BaseMessage) -> str:
    """The role vxmem stores ``message`` under."""
    if isinstance(message, ChatMessage):
        return message.role
    return ROLE_OF_TYPE.get(message.type, message.type)


def turn_of(message: BaseMessage) -> dict[str, Any]:
    """``message`` as the turn :meth:`VxmemChatMessageHistory.add_messages` remembers: its text
    and role. An assistant message's tool calls and a tool message's call id go to the turn's
    metadata (``tool_calls``, ``tool_call_id``), so they come back (:func:`message_of`); a
    message that only calls tools is remembered as the calls it makes (``calls
    get_weather({"city": "Paris"})``), recallable like any turn, and comes back with its own
    empty content."""
    item: dict[str, Any] = {"text": message.text, "role": role_of(message)}
    meta: dict[str, Any] = {}
    calls = getattr(message, "tool_calls", None) if isinstance(message, AIMessage) else None
    if calls:
        meta["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in calls]
        if not message.text.strip():
            meta["content"] = message.content
            item["text"] = "; ".join(f"calls {c['name']}({json.dumps(c['args'], sort_keys=True)})" for c in calls)
    if isinstance(message, ToolMessage):
        meta["tool_call_id"] = message.tool_call_id
    if meta:
        item["metadata"] = meta
    return item


def message_of(turn: Result) -> BaseMessage:
    """A stored turn as the LangChain message its role says, carrying the memory's id (an
    assistant turn with its tool calls, a tool turn with its call id: see :func:`turn_of`)."""
    role = turn.metadata.get(K_ROLE, "user")
    meta = turn.metadata
    if role == "tool" and isinstance(meta.get("tool_call_id"), str):
        return ToolMessage(content=turn.text, tool_call_id=meta["tool_call_id"], id=turn.id)
    if role == "assistant" and isinstance(meta.get("tool_calls"), list):
        return AIMessage(content=meta.get("content", turn.text), tool_calls=meta["tool_calls"], id=turn.id)
    cls = _MESSAGE_OF_ROLE.get(role)
    if cls is None:
        return ChatMessage(content=turn.text, role=role, id=turn.id)
    return cls(content=turn.text, id=turn.id)
