"""The PostgreSQL database: one connection, ``vx_meta``'s state, the rows the mirror loads and follows.

:class:`PgDatabase` has the job of :class:`~vxmem.store.sqlite.database.Database` for a
database many processes share. Every committed write moves ``generation`` on and lists the
rows it touched in ``vx_changes``, in the same transaction (:mod:`~vxmem.store.postgres.writes`);
a process reads all rows into its mirror at open, then, before each read, asks for the
generation (one round trip) and takes in only the rows changed since, read in one
``REPEATABLE READ`` snapshot, so a write acknowledged by one process is seen whole by every
other on its next read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg

from ...core.errors import InvalidDatabaseError, ReadOnlyError
from ...core.tokens import token_counter_name
from ..arguments import check_token_count
from ..lexical.search import LexicalSearch
from ..mirror.bulk import fill
from ..mirror.mirror import Mirror
from ..sqlite.jsonio import loads_all
from . import schema, shown_url
from .connection import adapt_vectors, connect
from .lexical import LocalFts
from .portable import PgRows
from .writes import PgTransaction

CHANGE_WINDOW = 10_000  # generations of vx_changes kept for the processes that follow them
PRUNE_EVERY = 1_000  # a writer drops older changes every this many generations
MAX_TOKENS = 2**40 - 1  # a stored token count above this is counted again
_DOC_COLUMNS = "rowid, id, text, metadata, vector, tokens"
Ops = list[tuple[Any, ...]]


class PgDatabase:
    """One open PostgreSQL database, with the attributes of the file store's ``Database``
    (``dim``, ``generation``, ``uid``, ``embedder``, ``writer_embedder``, ``token_counter``,
    ``counted_by``, ``schema_version``, ``read_only``). ``url`` names it; ``path`` is None
    (no file beside it: the caches are rebuilt from rows at open). ``durability``:
    "normal" keeps the server's ``synchronous_commit`` (PostgreSQL's default waits for the
    WAL flush), "full" sets it on for this connection."""

    path = None
    follows_writers = True  # every read first takes in what other processes committed
    counts_mixed = False

    def __init__(self, url: str, read_only: bool, durability: str = "normal"):
        self.url, self.where = url, shown_url(url)
        self.read_only = read_only
        self.durability = durability
        self.dim: int | None = None
        self.generation = 0
        self.uid: str | None = None
        self.embedder: str | None = None
        self.writer_embedder: str | None = None
        self.token_counter: str | None = None
        self.counted_by: str | None = None
        self.vector_dtype = np.dtype(np.float32)
        self.schema_version = schema.SCHEMA_VERSION
        self.pid = os.getpid()
        self.conn = connect(url)
        try:
            if read_only:
                with self.conn.transaction():
                    exists = self.conn.execute("SELECT to_regclass('vx_meta') IS NOT NULL").fetchone()
                if not (exists and exists[0]):
                    raise InvalidDatabaseError(f"{self.where} holds no vxmem database to open read_only")
                schema.check(schema.read_meta(self.conn), self.where)
            else:
                schema.ensure(self.conn, self.where)
            adapt_vectors(self.conn, self.where)
            if durability == "full":  # whatever the server's default: each COMMIT waits for its WAL flush
                self.conn.execute("SET synchronous_commit = on")
            self._take_meta(schema.read_meta(self.conn))
        except BaseException:
            self.conn.close()
            raise

    # ------------------------------------------------------------------ vx_meta and snapshots

    def _reconnect(self) -> None:
        conn = connect(self.url)
        try:
            adapt_vectors(conn, self.where)
            if self.durability == "full":
                conn.execute("SET synchronous_commit = on")
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    def _take_meta(self, meta: dict[str, str]) -> None:
        self.schema_version = schema.check(meta, self.where)
        self.dim = int(meta["dim"]) if "dim" in meta else None
        self.generation = int(meta.get("generation", 0))
        self.uid = meta.get("uid")
        self.embedder = meta.get("embedder")
        self.token_counter = meta.get("token_counter")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read-only ``REPEATABLE READ`` transaction: every read inside sees one committed state."""
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield
        finally:
            self.conn.execute("ROLLBACK")

    def put_meta(self, key: str, value: str) -> None:
        """Set ``vx_meta[key]`` unless another process set it first (inside the caller's transaction)."""
        self.conn.execute("INSERT INTO vx_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                          (key, value))

    # ------------------------------------------------------------------ loading

    def load(self, token_counter: Callable[[str], int]) -> Mirror:
        """Every document, read into a fresh :class:`Mirror` in one snapshot with ``vx_meta``.

        A writer whose token counter has a name records it when the database names none yet,
        so that the counts it stores with each text are taken as they are at the next open."""
        name = token_counter_name(token_counter)
        if name is not None and not self.read_only:
            with self.conn.transaction():
                self.put_meta("token_counter", name)
        with self.snapshot():
            self._take_meta(schema.read_meta(self.conn))
            rows = self.conn.cursor(binary=True).execute(
                f"SELECT {_DOC_COLUMNS} FROM vx_docs ORDER BY rowid").fetchall()
        return self._mirror_of(rows, token_counter)

    def _mirror_of(self, rows: list[Any], token_counter: Callable[[str], int]) -> Mirror:
        m = Mirror(self.dim, self.vector_dtype)
        if self.dim is not None:
            m.set_dim(self.dim)
        if not rows:
            return m
        if self.dim is None:
            raise InvalidDatabaseError(f"{self.where}: documents but no vector dimension in vx_meta")
        rowids, ids, texts, metas, vecs, stored = (list(col) for col in zip(*rows))
        try:
            fill(m, rowids, ids, texts, loads_all(metas), [v.tobytes() for v in vecs])
        except ValueError as exc:
            if "-d vector" in str(exc):
                raise InvalidDatabaseError(f"{self.where}: {exc}") from None
            raise
        m.tokens[: m.n] = [self._tokens(t, c, token_counter) for t, c in zip(texts, stored)]
        return m

    def _tokens(self, text: str, stored: Any, token_counter: Callable[[str], int]) -> int:
        """A text's token count: the stored one when ``token_counter`` is the counter that
        stored it, otherwise counted (and checked) now."""
        if type(stored) is int and 0 <= stored <= MAX_TOKENS and self.token_counter is not None \
                and token_counter_name(token_counter) == self.token_counter:
            return stored
        return check_token_count(token_counter(text), text)

    # ------------------------------------------------------------------ following the other processes

    def refresh(self, mirror: Mirror, token_counter: Callable[[str], int]) -> Ops | Mirror | None:
        """What every process committed since ``mirror`` was read: None when nothing was;
        otherwise the ops of the change (for ``Engine.follow``), read from the change log in
        one snapshot, or a whole new :class:`Mirror` when the log cannot say (pruned past
        this handle's generation, or another database now at this URL). A connection the
        server ended (a restart, an administrator) is opened again, once: the change log then
        says what this handle missed."""
        try:
            row = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'generation'").fetchone()
        except psycopg.OperationalError:
            if not self.conn.broken:
                raise
            self._reconnect()
            row = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'generation'").fetchone()
        if row is not None and int(row[0]) == self.generation:
            return None
        old_gen, old_dim, old_uid = self.generation, self.dim, self.uid
        try:
            with self.snapshot():
                meta = schema.read_meta(self.conn)
                self._take_meta(meta)
                ops = None
                if self.uid == old_uid and int(meta.get("changes_since", -1)) <= old_gen \
                        and old_dim in (None, self.dim) and (old_dim is not None or mirror.n == 0):
                    ops = self._ops_since(mirror, old_gen, token_counter)
                if ops is None:
                    rows = self.conn.cursor(binary=True).execute(
                        f"SELECT {_DOC_COLUMNS} FROM vx_docs ORDER BY rowid").fetchall()
        except BaseException:  # nothing taken in: the next read tries again from the same state
            self.generation, self.dim, self.uid = old_gen, old_dim, old_uid
            raise
        if ops is None:
            return self._mirror_of(rows, token_counter)
        if old_dim is None and self.dim is not None:
            mirror.set_dim(self.dim)
        return ops

    def _ops_since(self, mirror: Mirror, generation: int, token_counter: Callable[[str], int]) -> Ops | None:
        """The ops that bring ``mirror`` (at ``generation``) to this snapshot's state, from the
        rows the change log names since; None if they cannot (a new row below the mirror's last)."""
        # One query: every touched rowid, with its row when the document is still there.
        got = self.conn.cursor(binary=True).execute(
            f"SELECT c.doc, {', '.join('d.' + c for c in _DOC_COLUMNS.split(', '))} FROM "
            "(SELECT DISTINCT doc FROM vx_changes WHERE generation > %s) c "
            "LEFT JOIN vx_docs d ON d.rowid = c.doc ORDER BY c.doc", (generation,)).fetchall()
        touched = {r[0] for r in got}
        rows = [r[1:] for r in got if r[1] is not None]
        present = {r[0] for r in rows}
        deleted = [mirror.ids[p] for r in sorted(touched - present) if (p := mirror.pos_of_rowid.get(r)) is not None]
        ops: Ops = [("delete", deleted)] if deleted else []
        last = int(mirror.rowid[mirror.n - 1]) if mirror.n else 0
        metas = loads_all([r[3] for r in rows])
        inserts: Ops = []
        for (rowid, id, text, _, vec, stored), meta in zip(rows, metas):
            if rowid in mirror.pos_of_rowid:
                ops.append(("update", id, meta))
            elif rowid > last:
                if vec.shape[0] != self.dim:
                    raise InvalidDatabaseError(f"{self.where}: document {id!r} has a {vec.shape[0]}-d vector, "
                                               f"expected {self.dim}")
                inserts.append(("insert", rowid, id, text, meta, vec, self._tokens(text, stored, token_counter)))
            else:
                return None
        return ops + inserts  # deletions first (an id may be taken again by a new row), then updates

    # ------------------------------------------------------------------ writing

    @contextmanager
    def transaction(self, mirror: Mirror) -> Iterator[PgTransaction]:
        """One write transaction (see :mod:`~vxmem.store.postgres.writes`): its generation
        taken first, which orders it after every other writer's; COMMIT at the end, ROLLBACK
        on any failure. The change log is pruned to :data:`CHANGE_WINDOW` generations."""
        if self.read_only:
            raise ReadOnlyError(f"{self.where} is open read_only")
        conn = self.conn
        dim = self.dim
        conn.execute("BEGIN")
        try:
            row = conn.execute("UPDATE vx_meta SET value = (value::bigint + 1)::text WHERE key = 'generation' "
                               "RETURNING value::bigint").fetchone()
            assert row is not None
            generation = int(row[0])
            tx = PgTransaction(self, mirror, generation, behind=generation - 1 != self.generation)
            yield tx
            if generation % PRUNE_EVERY == 0 and generation > CHANGE_WINDOW:
                conn.execute("DELETE FROM vx_changes WHERE generation <= %s", (generation - CHANGE_WINDOW,))
                conn.execute("UPDATE vx_meta SET value = %s WHERE key = 'changes_since'",
                             (str(generation - CHANGE_WINDOW),))
            conn.execute("COMMIT")
        except BaseException:
            self.dim = dim
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.UNKNOWN:
                conn.execute("ROLLBACK")
            raise
        if tx.behind:
            tx.ops = []  # the engine takes in the change log from tx.read_at, this transaction's writes with the rest
        else:
            self.generation = generation

    def record_access(self, rowids: Sequence[int], at: float) -> None:
        """Record that the documents ``rowids`` were accessed at ``at`` (one statement; it moves
        no generation: the documents did not change). Nothing is written on a read-only handle."""
        if self.read_only or not rowids:
            return
        self.conn.execute("INSERT INTO vx_access (doc, at) SELECT unnest(%s::bigint[]), %s ON CONFLICT DO NOTHING",
                          ([int(r) for r in rowids], float(at)))

    def last_access(self, rowids: Sequence[int], before: float) -> dict[int, float]:
        """Each document's latest access strictly before ``before``, for those of ``rowids`` that had one."""
        if not rowids:
            return {}
        return dict(self.conn.execute(
            "SELECT doc, max(at) FROM vx_access WHERE doc = ANY(%s) AND at < %s GROUP BY doc",
            ([int(r) for r in rowids], float(before))).fetchall())

    def record_embedder(self, name: str) -> None:
        """Record ``name`` as the embedder of a database that holds vectors but no name yet."""
        if self.read_only:
            return
        with self.conn.transaction():
            self.put_meta("embedder", name)
        self.embedder = name

    def late_vectors(self, model: str, rowids: Sequence[int]) -> dict[int, bytes]:
        """The token vectors ``model`` stored for each of ``rowids`` that has them."""
        rows = self.conn.execute("SELECT doc, bits FROM vx_late WHERE model = %s AND doc = ANY(%s)",
                                 (model, [int(r) for r in rowids])).fetchall()
        return {int(d): bytes(b) for d, b in rows}

    def late_context_vectors(self, model: str, rowids: Sequence[int]) -> dict[int, tuple[int, bytes]]:
        """``(prev, bits)`` ``model`` stored for each of ``rowids`` read in context, where stored."""
        rows = self.conn.execute("SELECT doc, prev, bits FROM vx_late_context WHERE model = %s AND doc = ANY(%s)",
                                 (model, [int(r) for r in rowids])).fetchall()
        return {int(d): (int(p), bytes(b)) for d, p, b in rows}

    # ------------------------------------------------------------------ the caches, closing

    def new_lexical(self, mirror: Callable[[], Mirror]) -> LexicalSearch:
        """The lexical search over a private FTS5 table of the mirror's documents (see
        :mod:`~vxmem.store.postgres.lexical`): the same tokens and BM25 as the file store's."""
        return LocalFts(mirror, lambda: self.generation).search()

    def export_rows(self) -> PgRows:
        """What ``export()`` reads of this database (see :mod:`~vxmem.store.postgres.portable`)."""
        return PgRows(self)

    def save_mirror(self, m: Mirror) -> bool:
        """Nothing to save: no files beside a PostgreSQL database (the next open reads the rows)."""
        return False

    def close(self) -> None:
        """Close the connection (in a forked child, leave the parent's alone: closing it would
        end the parent's session on the shared socket)."""
        if os.getpid() != self.pid:
            return
        try:
            self.conn.close()
        except psycopg.Error:
            pass
