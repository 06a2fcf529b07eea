"""The seam between the memory and the store: what the memory layer may ask of a collection.

A :class:`~vxmem.store.collection.Collection` is a plain collection: the memory above it
writes reserved ``_vx_*`` keys into ordinary documents. Everything else the memory needs
(a consistent snapshot, writes inside one transaction, vectors and token counts, a mode's
top candidates, the access log) it asks of ``collection.engine``, whose type is this
protocol. Nothing above the store reaches further in.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from .mirror.mirror import Mirror, SessionArg
from .sqlite.database import Transaction
from .vector.search import Candidates


class MemoryStore(Protocol):
    """What the memory uses of a collection's :class:`~vxmem.store.engine.Engine`.

    Reading: ``locked()`` holds the lock and gives the :class:`~vxmem.store.mirror.mirror.Mirror`,
    a snapshot whose positions stay valid inside the block; ``candidates()`` and ``topk()``
    search it. Writing: ``transaction()`` inside ``locked()``; the mirror follows once it
    commits. The callables the caller brought (``embed``, ``count_tokens``) run outside the
    lock, before the transaction.
    """

    embedder: Any
    read_only: bool

    @property
    def token_counter(self) -> Callable[[str], int]:
        """The counter of each text's tokens."""
        ...

    def locked(self) -> AbstractContextManager[Mirror]:
        """Hold the lock (re-entrant) and give the mirror, brought up to date."""
        ...

    def transaction(self) -> AbstractContextManager[Transaction]:
        """One SQLite transaction; the mirror and the caches follow once it commits."""
        ...

    def embed(self, texts: list[str], *, queries: bool = False) -> np.ndarray:
        """The texts' unit vectors, checked (call it outside the lock); ``queries``: they
        are queries, not texts to store."""
        ...

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Each text's token count, checked (call it outside the lock)."""
        ...

    def prepare_query(self, query: str, mode: str) -> None:
        """Embed ``query`` now, before the lock, for this thread's next ``candidates()``."""
        ...

    def topk(self, q: np.ndarray, positions: np.ndarray, k: int,
             session: SessionArg = ...) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best of ``positions`` by cosine to ``q``, best first."""
        ...

    def candidates(self, query: str, positions: np.ndarray, k: int, mode: str, hybrid_weight: float = ...,
                   session: SessionArg = ..., as_of: float | None = None) -> Candidates:
        """The top ``k`` of one search mode among ``positions``, with raw dense and lexical parts."""
        ...

    def record_access(self, positions: np.ndarray, at: float) -> None:
        """Record the documents at ``positions`` as accessed at ``at`` (inside ``locked()``)."""
        ...

    def last_access(self, positions: np.ndarray, before: float) -> np.ndarray:
        """Each document's latest access before ``before`` (-inf: none), inside ``locked()``."""
        ...

    def late_vectors(self, positions: np.ndarray, model: str) -> list[bytes | None]:
        """The token vectors ``model`` stored for ``positions`` (None: none), inside ``locked()``."""
        ...

    def late_context_vectors(self, positions: np.ndarray, model: str) -> list[tuple[int, bytes] | None]:
        """(turn before's rowid, token vectors) stored read in context (None: none), inside ``locked()``."""
        ...



