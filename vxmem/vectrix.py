"""Vectrix: a collection with a conversation memory over it, the face of the spec.

``Vectrix`` is a :class:`~vxmem.store.Collection` (``add``, ``search``, ``get``, filters...)
plus ``db.memory``, a :class:`~vxmem.memory.conversation.ConversationMemory`. The spec's memory verbs
are on the database itself, with the memory's own signatures and docstrings (so
``help(db.recall)`` documents recall); each hands its arguments to ``db.memory``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .core.clock import TimeLike
from .core.keys import FORGET_KINDS
from .core.options import as_kwargs, takes
from .core.sentinels import AnySession
from .memory.consolidation import ConsolidationReport, Summarizer
from .memory.context import ContextBlock
from .memory.conversation import ConversationMemory
from .memory.recall import MemoryResults
from .memory.request import RecallOptions
from .memory.supersession import HistoryEntry
from .models.embed import EmbedderArg
from .store.collection import Collection
from .store.engine import EXACT_THRESHOLD
from .store.results import Result


class Vectrix(Collection):
    """A durable collection of documents with vectors, and a conversation memory over it.

    ``path=None`` keeps everything in memory; a path opens or creates a database file; a
    ``postgresql://`` URL a PostgreSQL database with pgvector that many processes share.
    ``embedder`` is a name (``"bge-small"``, the default: bge-small-en-v1.5 on onnxruntime,
    shipped inside a PyPI package, offline; ``"hashing"``: the model-free
    :class:`~vxmem.models.embed.HashingEmbedder`, fastest) or any callable ``list[str] -> (n, d)``
    array; a database records its embedder's name and refuses another one.
    ``token_counter`` is any ``str -> int``; ``read_only``, ``exact_threshold``,
    ``vector_dtype`` and ``durability`` are the collection's (see :class:`~vxmem.store.Collection`).
    The remaining keyword arguments configure
    :class:`~vxmem.memory.conversation.ConversationMemory`, reached as ``db.memory``: the blend,
    TTLs, the judge, ``hybrid_weight``, ``preset``, ``rerank``, ``reranker`` and ``min_relevance``.
    """

    result_type = MemoryResults  # search() on a memory collection shows the memory columns in to_frame()

    def __init__(self, path: str | os.PathLike[str] | None = None, embedder: EmbedderArg = None,
                 token_counter: Callable[[str], int] | None = None, *, read_only: bool = False,
                 exact_threshold: int = EXACT_THRESHOLD, vector_dtype: str = "float32", durability: str = "normal",
                 **memory_settings: Any):
        # Memory settings are validated before anything touches the disk.
        memory = ConversationMemory(self, **memory_settings)
        super().__init__(path, embedder, token_counter, read_only=read_only, exact_threshold=exact_threshold,
                         vector_dtype=vector_dtype, durability=durability)
        self.memory: ConversationMemory = memory

    def remember(self, text: str, session: str | None = None, role: str = "user", turn: int | None = None,
                 timestamp: TimeLike = None, pinned: bool = False, kind: str | None = None,
                 metadata: dict[str, Any] | None = None, id: str | None = None, ttl_days: float | None = None,
                 check: bool | None = None, user: str | None = None) -> str:
        return self.memory.remember(text, session=session, role=role, turn=turn, timestamp=timestamp, pinned=pinned,
                                    kind=kind, metadata=metadata, id=id, ttl_days=ttl_days, check=check, user=user)

    def remember_many(self, memories: Iterable[str | Mapping[str, Any]], *, session: str | None = None,
                      role: str = "user", timestamp: TimeLike = None, user: str | None = None,
                      check: bool | None = None) -> list[str]:
        return self.memory.remember_many(memories, session=session, role=role, timestamp=timestamp, user=user,
                                         check=check)

    def warm(self) -> None:
        return self.memory.warm()

    @takes(RecallOptions)
    def recall(self, query: str, options: RecallOptions) -> MemoryResults:
        return self.memory.recall(query, **as_kwargs(options))

    def feedback(self, id: str, outcome: str, correction: str | None = None, timestamp: TimeLike = None) -> str | None:
        return self.memory.feedback(id, outcome, correction=correction, timestamp=timestamp)

    def context(self, query: str, session: str | AnySession | None = None, token_budget: int = 1500,
                recent_turns: int = 6, limit: int = 10, now: TimeLike = None, user: str | None = None,
                filter: dict[str, Any] | None = None, **recall_kwargs: Any) -> ContextBlock:
        return self.memory.context(query, session=session, token_budget=token_budget, recent_turns=recent_turns,
                                   limit=limit, now=now, user=user, filter=filter, **recall_kwargs)

    def forget(self, session: str | AnySession | None = None, kinds: Sequence[str] = FORGET_KINDS,
               older_than: float | datetime | None = None, ids: Sequence[str] | None = None,
               superseded: bool = False, now: TimeLike = None, filter: dict[str, Any] | None = None,
               user: str | None = None) -> int:
        return self.memory.forget(session=session, kinds=kinds, older_than=older_than, ids=ids, superseded=superseded,
                                  now=now, filter=filter, user=user)

    def consolidate(self, session: str | None, summarize: Summarizer, keep_recent: int = 6,
                    older_than: float | datetime | None = None, batch_turns: int = 40, delete: bool = True,
                    pinned: bool = False, now: TimeLike = None, user: str | None = None) -> ConsolidationReport:
        return self.memory.consolidate(session, summarize, keep_recent=keep_recent, older_than=older_than,
                                       batch_turns=batch_turns, delete=delete, pinned=pinned, now=now, user=user)

    def expire(self, now: TimeLike = None, user: str | None = None) -> int:
        return self.memory.expire(now=now, user=user)

    def turns(self, session: str | None, limit: int | None = None, now: TimeLike = None,
              filter: dict[str, Any] | None = None, user: str | None = None) -> list[Result]:
        return self.memory.turns(session, limit=limit, now=now, filter=filter, user=user)

    def history(self, id: str, now: TimeLike = None) -> list[HistoryEntry]:
        return self.memory.history(id, now=now)


# Each delegate shows the memory method's docstring (one text, two places): help(db.recall) documents recall.
# recall's signature is made from RecallOptions, as the memory's is.
for _verb in ("remember", "remember_many", "warm", "recall", "feedback", "context", "forget", "consolidate",
              "expire", "turns", "history"):
    getattr(Vectrix, _verb).__doc__ = getattr(ConversationMemory, _verb).__doc__
