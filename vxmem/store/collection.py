"""The collection: documents, metadata and vectors, durable and filterable.

A few obvious verbs (``add``, ``get``, ``search``, ``scan``, ``count``, ``delete``,
``update_metadata``, ``build_index``, ``close``), each checking all of its arguments before
it touches anything, over an :class:`~vxmem.store.engine.Engine` (``collection.engine``):
the database file, its mirror, the HNSW cache and lexical search.

The collection imports nothing of the memory layer: it knows the reserved keys
(:mod:`vxmem.core.keys`) only as columns it mirrors and selects on. The memory above it
reaches the store through ``collection.engine`` only (:class:`~vxmem.store.seam.MemoryStore`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from ..core.checks import check_choice, check_limit, check_text
from ..core.errors import ConflictError
from ..core.keys import RESERVED_PREFIX
from ..core.progress import Progress
from ..models.embed import EmbedderArg
from ..ranking.scoring import HYBRID_WEIGHT
from .arguments import (
    check_filter,
    check_hybrid_weight,
    check_id,
    check_ids,
    check_json,
    check_metadata,
    check_mode,
    check_reserved,
    json_copy,
)
from .engine import EXACT_THRESHOLD, Engine
from .mirror.mirror import Mirror
from .portable.export import ExportReport, export_database
from .portable.restore import restore_file
from .results import Result, Results
from .scopes import filter_scope, filter_session
from .sqlite.database import Database

if TYPE_CHECKING:
    from .seam import MemoryCollection

# What an acknowledged write survives: "normal", a process crash (SQLite's synchronous=NORMAL in
# WAL mode); "full", a power loss too (synchronous=FULL: every commit synced before it returns).
DURABILITY = ("normal", "full")


class Collection:
    """A durable collection of documents with vectors, filterable by metadata.

    :param path: a database file to open or create; None (or ``":memory:"``) keeps
        everything in memory; a ``postgresql://`` URL opens (or sets up) a PostgreSQL database
        with pgvector that many processes share (see docs/POSTGRES.md).
    :param embedder: any callable ``list[str] -> (n, d)`` array, or a name of
        :data:`vxmem.models.embed.EMBEDDERS` (default: :func:`vxmem.models.embed.default_embedder`). The
        database records the embedder's ``name`` with its first vector and refuses to open
        with another one (a database with no recorded name: one stored vector is compared
        with a fresh embedding of its text).
    :param token_counter: any ``str -> int`` (default: :func:`~vxmem.core.tokens.count_tokens`).
    :param read_only: open without the writer lock and see what writers commit.
    :param exact_threshold: above this many selected rows a search goes through the HNSW
        index; at or below it, an exact scan (0: always exact).
    :param vector_dtype: ``"float32"`` (default) or ``"float16"``: the vectors this process
        holds in memory for its searches. ``"float16"`` halves that memory (the largest
        part: 768 MB of 1.5 GB at a million 384-d memories) and rounds each dot product by
        about 1e-4, so near ties may order otherwise; SQLite keeps float32 either way, and
        every handle may choose its own. Its scans run on NumKong's float16 kernels
        (usearch's SIMD library) at about float32's speed.
    :param durability: what an acknowledged write survives. ``"normal"`` (default): a
        process crash (SQLite's ``synchronous=NORMAL`` in WAL mode); a power loss or an OS
        crash may roll back the last commits. ``"full"``: a power loss too
        (``synchronous=FULL``: each commit is synced to the disk before the call returns).
    """

    result_type = Results  # the type searches return (the memory's face shows memory columns)

    def __init__(self, path: str | os.PathLike[str] | None = None, embedder: EmbedderArg = None,
                 token_counter: Callable[[str], int] | None = None, *, read_only: bool = False,
                 exact_threshold: int = EXACT_THRESHOLD, vector_dtype: str = "float32", durability: str = "normal"):
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str, a PathLike or None, not {type(path).__name__}")
        check_choice(durability, "durability", DURABILITY)
        self.path = None if path is None or str(path) == ":memory:" else os.fspath(path)
        self.durability = durability
        self.engine = Engine(self.path, embedder, token_counter, read_only, exact_threshold, vector_dtype,
                             durability)
        self.read_only = self.engine.read_only
        self.vector_dtype = vector_dtype

    @property
    def embedder(self) -> Any:
        """The callable ``list[str] -> (n, d)`` that embeds texts and queries."""
        return self.engine.embedder

    @embedder.setter
    def embedder(self, embedder: Any) -> None:
        self.engine.embedder = embedder

    @property
    def token_counter(self) -> Callable[[str], int]:
        """The ``str -> int`` that counts each text's tokens (may be replaced; the database
        stores the counts of a counter with a ``name`` beside the texts)."""
        return self.engine.token_counter

    @token_counter.setter
    def token_counter(self, counter: Callable[[str], int]) -> None:
        self.engine.token_counter = counter

    @property
    def exact_threshold(self) -> int:
        """Above this many selected rows a search goes through the HNSW index (0: always exact)."""
        return self.engine.exact_threshold

    @exact_threshold.setter
    def exact_threshold(self, value: int) -> None:
        self.engine.exact_threshold = value

    # ------------------------------------------------------------------ the verbs

    def add(self, texts: str | Sequence[str], metadata: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
            ids: Sequence[str] | None = None) -> list[str]:
        """Store documents in one transaction, embedded in one batch; return their ids.

        :param texts: one text or a list of them.
        :param metadata: one JSON dict for every text, or a list with one per text.
        :param ids: the documents' ids (default: new random ones); an id already taken
            refuses the whole call.
        """
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, Sequence):
            raise TypeError(f"texts must be a str or a list of str, not {type(texts).__name__}")
        texts = [check_text(t, f"texts[{i}]") for i, t in enumerate(texts)]
        n = len(texts)
        metas = check_metadata(metadata, n)
        if ids is None:
            ids = [uuid.uuid4().hex for _ in range(n)]
        else:
            if isinstance(ids, str) or not isinstance(ids, Sequence):
                raise TypeError("ids must be a list of str")
            ids = [check_id(i, f"ids[{k}]") for k, i in enumerate(ids)]
            if len(ids) != n:
                raise ValueError(f"got {len(ids)} ids for {n} texts")
            if len(set(ids)) != n:
                raise ValueError("ids must be unique")
        with self.engine.locked() as m:  # fail fast, before the embedder runs
            self._refuse_taken(m, ids)
        if n == 0:
            return []
        vecs = self.engine.embed(texts)  # the callables run outside the lock, and before the transaction
        tokens = self.engine.count_tokens(texts)
        with self.engine.locked() as m:
            self._refuse_taken(m, ids)  # another thread may have taken one meanwhile
            with self.engine.transaction() as tx:
                for id, text, meta, vec, t in zip(ids, texts, metas, vecs, tokens):
                    tx.insert(id, text, meta, vec, t)
        return list(ids)

    @staticmethod
    def _refuse_taken(m: Mirror, ids: list[str]) -> None:
        taken = [i for i in ids if i in m.pos_of_id]
        if taken:
            raise ConflictError(f"id already exists: {taken[0]!r}")

    def search(self, query: str, limit: int = 10, filter: Mapping[str, Any] | None = None, mode: str = "dense",
               hybrid_weight: float = HYBRID_WEIGHT) -> Results:
        """The ``limit`` documents most relevant to ``query`` among those matching ``filter``.

        Exact whenever a filter is given: the true top ``limit`` of the matching
        documents, however few of the collection they are.

        :param query: the text to match.
        :param limit: how many results at most.
        :param filter: ``{key: value}`` or ``{key: [values]}`` (any of them) on metadata.
        :param mode: ``"dense"`` ranks by cosine of the embeddings; ``"lexical"`` by BM25 from
            the SQLite FTS5 index (only documents sharing a word with the query); ``"hybrid"``
            by ``hybrid_weight * dense + (1 - hybrid_weight) * lexical``, each min-max
            normalised over the union of both candidate lists
            (:func:`vxmem.ranking.scoring.fuse_relevance`).
        :param hybrid_weight: the dense share of a hybrid score, in [0, 1].
        """
        check_text(query, "query")
        limit = check_limit(limit)
        flt = check_filter(filter)
        mode = check_mode(mode)
        hybrid_weight = check_hybrid_weight(hybrid_weight)
        self.engine.prepare_query(query, mode)
        with self.engine.locked(**filter_scope(flt)) as m:
            cand = self.engine.candidates(query, m.matching(flt), limit, mode, hybrid_weight,
                                          session=filter_session(flt, m.session_keys))
            order = np.lexsort((cand.positions, -cand.relevance))[:limit]
            pos, score = cand.positions[order], cand.relevance[order]
            items = [m.result(int(p), float(s)) for p, s in zip(pos, score)]
            return self.result_type(items, query=query, token_estimate=int(m.tokens[pos].sum()))

    def get(self, id: str) -> Result:
        """The document with this id (``KeyError`` if there is none)."""
        check_id(id)
        with self.engine.locked(owner_of=id) as m:
            p = m.pos_of_id.get(id)
            if p is None:
                raise KeyError(f"no document with id {id!r}")
            return m.result(p)

    def __contains__(self, id: object) -> bool:
        with self.engine.locked(owner_of=id if isinstance(id, str) else None) as m:
            return isinstance(id, str) and id in m.pos_of_id

    def __len__(self) -> int:
        return self.count()

    def update_metadata(self, id: str, patch: Mapping[str, Any], merge: bool = True) -> dict[str, Any]:
        """Merge ``patch`` into a document's metadata; returns the metadata as stored.

        :param id: the document (``KeyError`` if there is none).
        :param patch: JSON keys and values to set.
        :param merge: False replaces the caller's keys with ``patch``; the reserved ``_vx_*``
            keys a memory keeps its bookkeeping in (kind, session, time, supersession, feedback)
            stay unless ``patch`` sets them, so a memory stays a memory.
        """
        check_id(id)
        if not isinstance(patch, Mapping):
            raise TypeError(f"patch must be a dict, not {type(patch).__name__}")
        check_json(patch, "patch")
        check_reserved(patch, "patch")
        with self.engine.locked(owner_of=id) as m:
            p = m.pos_of_id.get(id)
            if p is None:
                raise KeyError(f"no document with id {id!r}")
            meta = dict(m.metas[p])
            if not merge:
                meta = {k: v for k, v in meta.items() if k.startswith(RESERVED_PREFIX)}
            meta.update(json_copy(patch))
            with self.engine.transaction() as tx:
                tx.update_meta(id, meta)
            return json_copy(meta)

    def delete(self, ids: str | Sequence[str]) -> int:
        """Delete documents by id (one, or a list); unknown ids are ignored. Returns how many went."""
        ids = check_ids(ids)
        with self.engine.locked(owner_of=ids[0] if len(set(ids)) == 1 else None) as m:
            present = list(dict.fromkeys(i for i in ids if i in m.pos_of_id))
            if not present:
                return 0
            with self.engine.transaction() as tx:
                tx.delete(present)
            return len(present)

    def scan(self, filter: Mapping[str, Any] | None = None) -> Iterator[Result]:
        """Every document matching ``filter``, in insertion order."""
        flt = check_filter(filter)
        with self.engine.locked(**filter_scope(flt)) as m:
            snapshot = [m.result(p) for p in m.matching(flt)]
        return iter(snapshot)

    def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many documents match ``filter`` (all of them when it is None)."""
        flt = check_filter(filter)
        with self.engine.locked(**filter_scope(flt)) as m:
            return m.n_alive if flt is None else int(m.matching(flt).size)

    def build_index(self) -> None:
        """Build (or finish building) the HNSW index now, and wait for it (and for a
        background flush of pending vectors into it).

        Searches never need this: the index is built on first need, in the background
        when the collection is large, while searches scan exactly. A large build started
        here runs on every core (one a search started keeps its one core free), in a
        thread that holds no lock: other threads keep reading and writing meanwhile
        (their writes join the index when it is installed). What a failed build raised
        is raised here.
        """
        self.engine.build_index()

    def export(self, path: str | os.PathLike[str], *, vectors: bool = False,
               progress: Progress = None) -> ExportReport:
        """Write every document, with its whole history, to ``path`` as JSON Lines (the format of
        docs/EXPORT.md); returns what was written.

        A memory's line carries its text, kind, session, user, timestamps and metadata, which
        hold its feedback events, its supersession links, its consolidation provenance, its
        TTL and whether it is pinned; its access log and the turn counters come too, so
        :meth:`restore` answers every recall, history and context as this database does.
        ``vectors=True`` includes the vectors (a restore with the same embedder then embeds
        nothing). It streams, in one read transaction, holding this handle's lock: other
        processes keep reading and writing.
        """
        db = self.engine.database
        with self.engine.locked():
            return export_database(db if isinstance(db, Database) else db.export_rows(), path, vectors=vectors,
                                   progress=progress)

    @classmethod
    def restore(cls, source: str | os.PathLike[str], path: str | os.PathLike[str] | None = None,
                embedder: EmbedderArg = None, token_counter: Callable[[str], int] | None = None, *,
                progress: Progress = None, **settings: Any) -> Self:
        """A new database at ``path`` (None: in memory) holding what :meth:`export` wrote to
        ``source``, opened with ``embedder``, ``token_counter`` and ``settings`` as the
        constructor takes them.

        All or nothing: a file of a newer format version, a truncated or damaged file, a
        malformed line or an id twice is refused (:class:`~vxmem.core.errors.ExportFileError`)
        and nothing is written; ``path`` must not hold documents yet. Vectors come from the
        file when it has them and they are this embedder's; otherwise every text is embedded
        again, which is logged (logger ``vxmem.restore``), never silent.
        """
        db, _ = restore_file(source, path, lambda p: cls(p, embedder, token_counter, **settings),
                                       progress=progress)
        return db

    def close(self) -> None:
        """Save the vector index if it changed, and release the database.

        Waits for a background index build to finish, so its work is saved, not lost.
        The index is a cache: a failure to save it (a full disk) never makes ``close()``
        fail; the next open rebuilds it. In a forked child, ``close()`` only marks the
        handle closed: the lock, the connection and the index file are the parent's.
        """
        self.engine.close()

    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.engine.closed else f"{self.engine.mirror.n_alive} documents"
        where = self.engine.where if self.engine.url else self.path or ":memory:"  # a URL without its password
        return f"{type(self).__name__}({where}, {state})"


if TYPE_CHECKING:
    # mypy proves here that the collection is the seam (its engine a MemoryStore, the mirror
    # a MemoryView, the transaction MemoryWrites): a member they change breaks the build.
    COLLECTION_IS_THE_SEAM: type[MemoryCollection] = Collection
