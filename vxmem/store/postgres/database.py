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

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from . import ALL, Scope, corpus, schema, scope_parts, shown_url, split_options
from .connection import adapt_vectors, connect, leave_pool, shared_pool
from .lexical import LocalFts
from .portable import PgRows
from .writes import PgTransaction

CHANGE_WINDOW = 10_000  # generations of vx_changes kept for the processes that follow them
PRUNE_EVERY = 1_000  # a writer drops older changes every this many generations
# Rows the approximate cross-user read takes from the HNSW index (see nearest()), with
# hnsw.ef_search raised to as many: recall@10 0.98 at 100k memories (bench_postgres_scale), in
# 8 ms where 400 rows took 70; a recall's pool (40 for limit 10) leaves room for rows it filters out.
NEAREST = 100
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
        url, options = split_options(url)
        self.url, self.where = url, shown_url(url)
        # scope=user: the engine keeps one mirror per user a read names (and the whole
        # collection's only once a read names none); every write is then followed through the log.
        self.scoped = options.get("scope") == "user"
        self.nearest_rows = int(options.get("nearest", NEAREST))
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
        size = options.get("pool_size")
        self._pool = None if size is None else shared_pool(url, int(size), durability)
        self._conn = connect(url) if self._pool is None else None
        try:
            if read_only:
                with self.conn.transaction():
                    exists = self.conn.execute("SELECT to_regclass('vx_meta') IS NOT NULL").fetchone()
                if not (exists and exists[0]):
                    raise InvalidDatabaseError(f"{self.where} holds no vxmem database to open read_only")
                if schema.check(schema.read_meta(self.conn), self.where) < schema.SCHEMA_VERSION:
                    raise InvalidDatabaseError(f"{self.where} has an older vxmem schema: open it once for writing, "
                                               "which migrates it")
            else:
                schema.ensure(self.conn, self.where)
            if self.scoped and not read_only:  # recall across users searches its HNSW index
                with self.conn.transaction():
                    if (dim := schema.read_meta(self.conn).get("dim")) is not None:
                        schema.make_vector_index(self.conn, int(dim))
            oid = adapt_vectors(self.conn, self.where)
            if self._pool is not None:
                self._pool.oid = oid
            elif durability == "full":  # whatever the server's default: each COMMIT waits for its WAL flush
                self.conn.execute("SET synchronous_commit = on")
            self._take_meta(schema.read_meta(self.conn))
        except BaseException:
            self.close()
            raise

    @property
    def pooled(self) -> bool:
        """Whether the connection comes from a pool (``pool_size``), to give back after each block."""
        return self._pool is not None

    @property
    def conn(self) -> psycopg.Connection:
        """This handle's connection: its own, or (``pool_size``) one taken from the pool until
        :meth:`release` (the engine releases it at the end of each outermost block)."""
        if self._conn is None:
            assert self._pool is not None
            self._conn = self._pool.take()
        return self._conn

    def release(self) -> None:
        """Give a pooled connection back (nothing for a handle's own)."""
        if self._pool is not None and self._conn is not None:
            conn, self._conn = self._conn, None
            self._pool.give(conn)

    # ------------------------------------------------------------------ vx_meta and snapshots

    def _reconnect(self) -> None:
        if self._pool is not None:  # the pool replaces a connection the server ended
            self.release()
            return
        conn = connect(self.url)
        try:
            adapt_vectors(conn, self.where)
            if self.durability == "full":
                conn.execute("SET synchronous_commit = on")
        except BaseException:
            conn.close()
            raise
        self._conn = conn

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
            # Scoped: no rows yet; each scope's are read when a read first names it.
            rows = [] if self.scoped else self._rows_of(ALL)
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
        """What every process committed since ``mirror`` (the whole collection's) was read:
        None when nothing was; otherwise the ops of the change (for ``Engine.follow``), read
        from the change log in one snapshot, or a whole new :class:`Mirror` when the log cannot
        say (pruned past this handle's generation, or another database now at this URL)."""
        got = self.refresh_scopes({ALL: mirror}, (), token_counter)
        return None if got is None else got[ALL]

    def _generation_now(self) -> int | None:
        """``vx_meta``'s generation (one round trip). A connection the server ended (a restart,
        an administrator) is opened again, once: the change log then says what this handle missed."""
        row = self._first_read("SELECT value FROM vx_meta WHERE key = 'generation'")
        return None if row is None else int(row[0])

    def _first_read(self, query: str, args: tuple[Any, ...] = ()) -> Any:
        """The row of a block's first query: on a connection the server ended, opened again, once."""
        try:
            return self.conn.execute(query, args).fetchone()
        except psycopg.OperationalError:
            if not self.conn.broken:
                raise
            self._reconnect()
            return self.conn.execute(query, args).fetchone()

    def refresh_scopes(self, mirrors: Mapping[Scope, Mirror], load: Sequence[Scope],
                       token_counter: Callable[[str], int]) -> dict[Scope, Ops | Mirror] | None:
        """Bring every mirror of ``mirrors`` (by scope: :data:`ALL` or a user) to what every
        process committed, and read the scopes of ``load`` afresh, all in one snapshot, so
        that every mirror stands at one generation: for each scope, the ops of the change,
        or a new :class:`Mirror` (a scope of ``load``, or one the change log cannot bring up).
        None: nothing changed and nothing to load."""
        if not load and self._generation_now() == self.generation:
            return None
        old_gen, old_dim, old_uid = self.generation, self.dim, self.uid
        rows: dict[Scope, list[Any]] = {}
        try:
            with self.snapshot():
                meta = schema.read_meta(self.conn)
                self._take_meta(meta)
                out: dict[Scope, Ops | Mirror] = {}
                if self.generation != old_gen and mirrors:
                    if self.uid == old_uid and int(meta.get("changes_since", -1)) <= old_gen \
                            and old_dim in (None, self.dim):
                        out.update(self._ops_since(mirrors, old_gen, token_counter))
                    load = [*load, *(s for s in mirrors if s not in out)]
                for scope in dict.fromkeys(load):
                    rows[scope] = self._rows_of(scope)
        except BaseException:  # nothing taken in: the next read tries again from the same state
            self.generation, self.dim, self.uid = old_gen, old_dim, old_uid
            raise
        for scope, got in rows.items():
            out[scope] = self._mirror_of(got, token_counter)
        if self.dim is not None:  # mirrors read before the first vector (by whichever process) take its dim
            for scope, m in mirrors.items():
                if scope not in rows and m.dim is None:
                    m.set_dim(self.dim)
        return out

    def _rows_of(self, scope: Scope) -> list[Any]:
        """Every document of ``scope`` (the whole collection; or one user's, one session's, or
        both's: index scans), in rowid order."""
        cur = self.conn.cursor(binary=True)
        if scope is ALL:
            return cur.execute(f"SELECT {_DOC_COLUMNS} FROM vx_docs ORDER BY rowid").fetchall()
        if isinstance(scope, tuple) and scope[0] == "users":  # (for one write of theirs)
            return cur.execute(f"SELECT {_DOC_COLUMNS} FROM vx_docs WHERE user_id = ANY(%s) ORDER BY rowid",
                               (list(scope[1:]),)).fetchall()
        user, key = scope_parts(scope)
        where, value = ("user_id = %s", user) if key is None else ("session_key = %s", key)
        return cur.execute(f"SELECT {_DOC_COLUMNS} FROM vx_docs WHERE {where} ORDER BY rowid", (value,)).fetchall()

    def _ops_since(self, mirrors: Mapping[Scope, Mirror], generation: int,
                   token_counter: Callable[[str], int]) -> dict[Scope, Ops]:
        """The ops that bring each of ``mirrors`` (at ``generation``) to this snapshot's state,
        from the rows the change log names since; a scope left out cannot be brought up (a
        row new to it below its last) and is read afresh."""
        # One query: every touched rowid, with its row when the document is still there (and
        # belongs to a scope followed here: another user's row reads as gone, which it is to them).
        every = ALL in mirrors
        parts = [scope_parts(s) for s in mirrors if s is not ALL]
        users = [u for u, _ in parts if u is not None]
        sessions = [k for _, k in parts if k is not None]
        # Each touched row is found by its rowid, and the scopes are tested in the select list: as
        # a join condition the planner would fetch every row of the followed users to join them.
        ours = "true" if every else "(d.user_id = ANY(%s) OR d.session_key = ANY(%s))"
        picked = ", ".join(f"CASE WHEN t.mine THEN t.{c} END" for c in [*_DOC_COLUMNS.split(", "), "user_id",
                                                                         "session_key"])
        # The change log names each change's user and session: only the rows it may put in a
        # followed scope are fetched (the others are gone from every mirror here).
        fetch = "true" if every else ("bool_or(user_id = ANY(%s) OR session_key = ANY(%s) OR "
                                      "(user_id IS NULL AND session_key IS NULL))")
        got = self.conn.cursor(binary=True).execute(
            f"WITH c AS MATERIALIZED (SELECT doc, {fetch} AS wanted FROM vx_changes WHERE generation > %s "
            f"GROUP BY doc) SELECT c.doc, {picked} FROM c LEFT JOIN (SELECT d.*, {ours} AS mine FROM vx_docs d "
            "WHERE d.rowid = ANY(ARRAY(SELECT doc FROM c WHERE wanted))) t ON t.rowid = c.doc ORDER BY c.doc",
            (generation,) if every else (users, sessions, generation, users, sessions)).fetchall()
        touched = [r[0] for r in got]
        rows = [r[1:] for r in got if r[1] is not None]
        metas = loads_all([r[3] for r in rows])
        out: dict[Scope, Ops] = {}
        for scope, mirror in mirrors.items():
            user, key = (None, None) if scope is ALL else scope_parts(scope)
            mine = [(r, meta) for r, meta in zip(rows, metas)
                    if scope is ALL or (user is not None and r[6] == user) or (key is not None and r[7] == key)]
            ops = self._scope_ops(mirror, touched, mine, token_counter)
            if ops is not None:
                out[scope] = ops
        return out

    def _scope_ops(self, mirror: Mirror, touched: list[int], rows: list[tuple[Any, dict[str, Any]]],
                   token_counter: Callable[[str], int]) -> Ops | None:
        """The ops that bring one scope's ``mirror`` up, given the ``touched`` rowids and the
        scope's ``rows`` among them; None if they cannot (a new row below the mirror's last)."""
        if mirror.dim is None and mirror.n:
            return None
        present = {r[0] for r, _ in rows}
        gone = [mirror.ids[p] for r in touched if r not in present and (p := mirror.pos_of_rowid.get(r)) is not None]
        ops: Ops = [("delete", gone)] if gone else []
        last = int(mirror.rowid[mirror.n - 1]) if mirror.n else 0
        inserts: Ops = []
        for (rowid, id, text, _, vec, stored, _user, _session), meta in rows:
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

    def owner(self, id: str) -> tuple[str | tuple[str, ...] | None, str | None]:
        """The user and the session whose rows hold what a read of the document ``id`` reads:
        its user's; its session's when it has no user (its corrections and the facts it
        contradicts share its session); (None, None): every row, for a document of neither;
        ((), None): none, for no such document (one that comes meanwhile came after the read)."""
        row = self.conn.execute("SELECT user_id, session_key FROM vx_docs WHERE id = %s", (id,)).fetchone()
        if row is None:
            return (), None
        return (row[0], None) if row[0] is not None else (None, None if row[1] is None else json.loads(row[1]))

    def nearest(self, q: np.ndarray, token_counter: Callable[[str], int]) -> Mirror:
        """The ``nearest_rows`` documents nearest the unit vector ``q`` by cosine, found by the
        HNSW index in the database (approximate: pgvector's ``hnsw.ef_search`` is raised to
        that many), as a fresh mirror that nothing follows. The generation is left alone: the
        kept mirrors stay where they were."""
        if self.dim is None:
            return self._mirror_of([], token_counter)
        with self.snapshot():
            self.conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(self.nearest_rows, 40), 1000)}")
            rows = self.conn.cursor(binary=True).execute(
                f"SELECT {_DOC_COLUMNS} FROM vx_docs ORDER BY {schema.vector_index(self.dim)} <=> %b LIMIT %s",
                (np.asarray(q, dtype=np.float32), self.nearest_rows)).fetchall()
        rows.sort(key=lambda r: r[0])  # the mirror holds rows in rowid order
        return self._mirror_of(rows, token_counter)

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
            # Scoped, the ops of a write may belong to other scopes' mirrors: all follow the log.
            tx = PgTransaction(self, mirror, generation, behind=self.scoped or generation - 1 != self.generation)
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
        corpus = self.corpus_stats if self.scoped else None
        return LocalFts(mirror, lambda: self.generation, corpus).search()

    def corpus_stats(self, terms: list[str], as_of: float | None) -> tuple[int, float, dict[str, int]]:
        """The whole collection's BM25 statistics (see :mod:`~vxmem.store.postgres.corpus`)."""
        return corpus.stats(self.conn, terms, as_of)

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
            if self._pool is not None:
                self.release()
                leave_pool(self._pool, self.url)
                self._pool = None
            elif self._conn is not None:
                self._conn.close()
        except psycopg.Error:
            pass
