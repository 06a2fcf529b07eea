"""The seam between the memory and the store: all the memory layer may ask of a collection.

A PostgreSQL store is to be the seam's second implementation, so the memory must not know
which store it talks to: every module of :mod:`vxmem.memory` imports from the store this
module alone (``tests/test_layers.py`` checks it). It declares, as Protocols the concrete
classes satisfy structurally (mypy proves it where the engine is typed as the seam):

- :class:`MemoryCollection`: what the memory holds (``db``); it reaches the store only
  through ``db.engine``;
- :class:`MemoryStore`: that engine (a snapshot under the lock, a transaction, vectors and
  token counts, a mode's top candidates, the access log, stored token vectors);
- :class:`MemoryView`: the snapshot ``locked()`` gives, read-only: the columns and
  queries the memory reads, never a mutator;
- :class:`MemoryWrites`: what the memory writes inside ``transaction()``.

It also hands on the few plain values and checks the memory shares with the collection
(results, filters, sessions, argument checks), so that nothing else of the store is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from .arguments import FilterValues, check_filter, check_id, check_ids, check_json, check_mode, json_copy
from .mirror.columns import UserSession, in_session, session_key, session_name
from .mirror.mirror import ANY_SESSION, SessionArg
from .results import Result, Results
from .vector.search import Candidates

__all__ = ["ANY_SESSION", "Candidates", "FilterValues", "MemoryCollection", "MemoryStore", "MemoryView",
           "MemoryWrites", "MetadataRows", "Result", "Results", "SessionArg", "UserSession", "check_filter",
           "check_id", "check_ids", "check_json", "check_mode", "in_session", "json_copy", "session_key",
           "session_name"]


class MetadataRows(Protocol):
    """Each document's stored metadata by position (read them, never change them)."""

    def __getitem__(self, p: int) -> dict[str, Any]: ...

    def __len__(self) -> int: ...


class MemoryView(Protocol):
    """The snapshot ``MemoryStore.locked()`` gives: what the memory reads of the store's
    documents, by position. Positions stay valid only inside the ``locked()`` block.

    Columns (numpy arrays by position): ``kind`` (a :data:`~vxmem.core.keys.KIND_CODES` code),
    ``session`` (a session code), ``ts``, ``expires``, ``superseded``, ``tokens``, ``turn``
    (NaN: none), ``feedback`` (whether the metadata hold feedback events) and ``rowid`` (a
    document's lasting number in the database). Read-only: every change goes through
    :class:`MemoryWrites`, and the view follows once the transaction commits.
    """

    @property
    def ids(self) -> Sequence[str]: ...

    @property
    def texts(self) -> Sequence[str]: ...

    @property
    def metas(self) -> MetadataRows: ...

    @property
    def pos_of_id(self) -> Mapping[str, int]: ...

    @property
    def rowid(self) -> np.ndarray: ...

    @property
    def kind(self) -> np.ndarray: ...

    @property
    def session(self) -> np.ndarray: ...

    @property
    def ts(self) -> np.ndarray: ...

    @property
    def expires(self) -> np.ndarray: ...

    @property
    def superseded(self) -> np.ndarray: ...

    @property
    def tokens(self) -> np.ndarray: ...

    @property
    def turn(self) -> np.ndarray: ...

    @property
    def feedback(self) -> np.ndarray: ...

    def select(self, session: SessionArg = ..., kinds: tuple[str, ...] = ..., live_at: float | None = ...,
               include_superseded: bool = ..., exclude_ids: tuple[str, ...] = ...,
               as_of: float | None = ..., user: str | None = ...) -> np.ndarray:
        """Positions of the memories of ``kinds`` in ``session`` (and of ``user``), live at
        ``live_at``, superseded only if ``include_superseded``, minus ``exclude_ids``, as the
        collection stood ``as_of``: the memory's candidates, from the columns alone."""
        ...

    def keep_matching(self, pos: np.ndarray, flt: FilterValues | None) -> np.ndarray:
        """Those of ``pos`` whose metadata match a checked filter, in their order."""
        ...

    def memory_position(self, id: str) -> int | None:
        """The position of the memory ``id`` (None: no such memory)."""
        ...

    def superseded_as_of(self, p: int, as_of: float | None) -> bool:
        """Whether the memory at ``p`` was superseded at ``as_of`` (None: now)."""
        ...

    def in_turn_order(self, pos: np.ndarray) -> list[int]:
        """``pos`` in turn order (then time, then insertion): a session's transcript."""
        ...

    def session_code(self, session: Any) -> int:
        """The code of ``session`` in the ``session`` column (negative: no document has it)."""
        ...

    def session_value(self, code: int) -> Any:
        """The session whose code is ``code``, as ``remember(session=...)`` named it."""
        ...

    def turn_at(self, code: int, turn: float) -> int:
        """The position of the live turn numbered ``turn`` in the session with ``code`` (-1: none)."""
        ...

    def result(self, p: int, score: float | None = None) -> Result:
        """The document at ``p`` as a :class:`Result` the caller may change freely."""
        ...


class MemoryWrites(Protocol):
    """What the memory writes inside ``MemoryStore.transaction()``: it all commits together,
    or none of it does. ``last_rowid`` is the rowid of the document this transaction inserted last."""

    @property
    def last_rowid(self) -> int: ...

    def insert(self, id: str, text: str, meta: dict[str, Any], vec: np.ndarray, tokens: int) -> None:
        """Add a document, ``tokens`` being its text's (checked) token count."""
        ...

    def update_meta(self, id: str, meta: dict[str, Any]) -> None:
        """Replace a document's metadata."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete documents by id."""
        ...

    def take_counter(self, name: str) -> int:
        """The named counter's value, moved on by one."""
        ...

    def counter(self, name: str) -> int:
        """The named counter's value (0 before it was first taken)."""
        ...

    def raise_counter(self, name: str, value: int) -> None:
        """Move the named counter up to at least ``value`` (never down)."""
        ...

    def put_late(self, model: str, bits: bytes) -> None:
        """Store ``model``'s token vectors of the document inserted last."""
        ...

    def put_late_context(self, model: str, prev: int, bits: bytes) -> None:
        """Store ``model``'s token vectors of the document inserted last, read after the
        document with rowid ``prev``."""
        ...


class MemoryCollection(Protocol):
    """What the memory holds: a collection, reached only through its engine."""

    @property
    def engine(self) -> MemoryStore: ...


class MemoryStore(Protocol):
    """What the memory uses of a collection's :class:`~vxmem.store.engine.Engine`.

    Reading: ``locked()`` holds the lock and gives a :class:`MemoryView`, a snapshot whose
    positions stay valid inside the block; ``candidates()`` and ``topk()`` search it.
    Writing: ``transaction()`` (a :class:`MemoryWrites`) inside ``locked()``; the view
    follows once it commits. The callables the caller brought (``embed``, ``count_tokens``) run outside the
    lock, before the transaction.
    """

    @property
    def embedder(self) -> Any:
        """The embedder the vectors are made with."""
        ...

    @property
    def read_only(self) -> bool:
        """Whether this handle only reads (a write raises ``ReadOnlyError``)."""
        ...

    @property
    def token_counter(self) -> Callable[[str], int]:
        """The counter of each text's tokens."""
        ...

    def locked(self, user: str | tuple[str, ...] | None = None, nearest: str | None = None,
               owner_of: str | None = None, session: str | None = None) -> AbstractContextManager[MemoryView]:
        """Hold the lock (re-entrant) and give the snapshot, brought up to date. ``user``: the
        block reads only that user's memories (a tuple: those users'); ``nearest``: the block is a recall of that
        query across users (a store may then hold only the memories nearest it);
        ``owner_of``: the block reads only the memories of the user that memory belongs to;
        ``session``: only that session's memories (with ``user``: the user's and the session's,
        whoever's)."""
        ...

    def transaction(self) -> AbstractContextManager[MemoryWrites]:
        """One transaction (inside ``locked()``); the snapshot and the caches follow once it commits."""
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
