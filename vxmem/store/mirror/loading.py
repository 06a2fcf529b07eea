"""The database read into a mirror, and kept there: a full read, the mirror file, the change log.

Every committed write moves ``generation`` on and lists the rows it touched in
``vx_changes`` (same transaction). An open reads every row into a fresh mirror, or maps
the mirror file a writer's close saved (:mod:`~vxmem.store.mirror.file`) and takes in what
was committed since from the change log. A read-only handle follows writers the same way:
it applies only what changed since the generation it holds, read in one read transaction
(a commit is seen whole or not at all); a reader further behind than the log reaches
(see :data:`~vxmem.store.sqlite.opening.CHANGE_WINDOW`), or a file replaced under it, reloads in full.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.errors import InvalidDatabaseError
from ...core.tokens import token_counter_name
from ..arguments import check_token_count
from ..sqlite import schema
from ..sqlite.files import mirror_path, postings_path, remove_caches, rollback
from ..sqlite.jsonio import loads_all
from ..sqlite.opening import DatabaseFile
from ..sqlite.schema import SCHEMA_VERSION
from . import file as mirror_file
from .bulk import fill
from .mirror import Mirror
from .snapshot import remove as remove_file

MAX_TOKENS = 2**40 - 1  # a stored token count above this (or not an integer) is counted again
_DOC_COLUMNS = "rowid, id, text, metadata, vector"
RESAVE_GENERATIONS = 1_000  # a close saves the mirror file again once it is this many generations behind
RESAVE_ROWS = 1_000  # ... or once this many rows changed (2% of the documents, when that is more)


def resave_rows(n: int) -> int:
    """Changed rows from which a close saves the files beside ``n`` documents again (fewer
    are taken from the log, or tokenised, at the next open)."""
    return max(RESAVE_ROWS, n // 50)


def _release_heap() -> None:
    """Hand the heap the rows of a large load left free back to the system (glibc keeps
    freed blocks for reuse: 150 MB of vector blobs at 100k documents); elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


class DatabaseLoader(DatabaseFile):
    """The read side of a :class:`~vxmem.store.sqlite.database.Database`: the database into a
    fresh mirror (:meth:`load`), a read-only handle's mirror brought up to what writers
    committed (:meth:`refresh`), the rows changed since a generation (:meth:`changes_since`),
    and the mirror file saved at a writer's close (:meth:`save_mirror`)."""

    # ------------------------------------------------------------------ loading

    def load(self, token_counter: Callable[[str], int]) -> Mirror:
        """Every document, read into a fresh :class:`Mirror`, in one read transaction with ``vx_meta``.

        Each text's token count is the stored one when ``token_counter`` is the counter that
        stored it (see :func:`~vxmem.core.tokens.token_counter_name`), otherwise counted now; a
        writer then stores the counts its counter made where none of that counter's were
        (once: an older file, or rows a handle with another counter wrote). A damaged row or
        ``vx_meta`` value is an :class:`InvalidDatabaseError`; a token counter that returns
        something other than a count is a ``TypeError`` / ``ValueError`` naming it.
        """
        probe = self._probe()
        name = token_counter_name(token_counter)
        with self._damage_is_invalid(), self._snapshot():
            meta = self._read_meta()
            self._has_changes = self._has_changes or (
                self.schema_version >= 3 and "vx_changes" in schema.tables(self.conn))
            saved = self._saved_mirror(meta, name, token_counter)
            if saved is None:
                m, stored = self._read_all(name)
        self.uid = meta.get("uid")
        self.saved_at = None if saved is None else saved[2]
        if saved is not None:
            m, uncounted, _ = saved  # rowids the change log brought whose counts were not stored
            counted = m.rowid_pos[np.array(uncounted, dtype=np.int64)]
        else:
            counted = self._fill_tokens(m, token_counter, stored)
        self._data_version = probe
        if counted.size and name is not None and not self.read_only and self.schema_version >= 5 \
                and self.token_counter in (None, name):
            try:
                self._store_counts(m, counted, name)
            except sqlite3.Error:  # a cache of the texts: a full disk leaves them to be counted at the next open
                pass
        return m

    def _saved_mirror(self, meta: dict[str, str], counter: str | None,
                      token_counter: Callable[[str], int]) -> tuple[Mirror, list[int], int] | None:
        """The mirror file's mirror brought up to this read transaction's state through the
        change log, if the file is provably this database's (see :mod:`~vxmem.store.mirror.file`),
        the rowids it counted the tokens of (none were stored) and the file's generation;
        otherwise None."""
        since = int(meta.get("changes_since", -1))
        # Only for the counter whose counts vx_docs stores: any other open counts (and a writer
        # stores) them the way a full read does.
        if self.path is None or counter is None or counter != self.token_counter or self.dim is None \
                or not self._has_changes or self.schema_version != SCHEMA_VERSION:
            return None
        got = mirror_file.load(mirror_path(self.path),
                               {"uid": meta.get("uid"), "dim": self.dim, "schema": SCHEMA_VERSION, "counter": counter},
                               self.vector_dtype)
        if got is None:
            return None
        m, fields = got
        uncounted: list[int] = []
        saved = fields.get("generation")
        if type(saved) is int and saved > self.generation and not self.read_only:
            # Saved at a state this database never reached: a backup copied back over it. Once
            # this writer's commits bring the generation level with it, it would pass for this
            # database's, so the caches of that other history go now.
            remove_caches(self.path)
            return None
        if type(saved) is not int or not 0 <= since <= saved <= self.generation:
            return None
        if saved < self.generation:
            logged = self._logged_ops(m, saved)
            if logged is None:
                return None
            ops, stored = logged
            for op in ops:
                if op[0] == "insert":
                    count = stored[op[1]]
                    if type(count) is not int or not 0 <= count <= MAX_TOKENS:  # none stored: counted, as a full read
                        uncounted.append(op[1])
                        count = check_token_count(token_counter(op[3]), op[3])
                    op[6] = count
            m.apply([tuple(op) for op in ops])
            if m.needs_compaction():
                m = m.compacted()
        return (m, uncounted, saved) if mirror_file.agrees(m, self.conn) else None

    def _read_all(self, counter: str | None) -> tuple[Mirror, list[int | None] | None]:
        """Every row, into a fresh mirror, and the stored token counts ``counter`` made (None
        for a row without one; None for all when it made none), inside the caller's read transaction."""
        usable = counter is not None and counter == self.token_counter and self.schema_version >= 5
        tokens = (f"CASE WHEN typeof(tokens) = 'integer' AND tokens BETWEEN 0 AND {MAX_TOKENS} THEN tokens END"
                  if usable else "NULL")
        rows = self.conn.execute(f"SELECT {_DOC_COLUMNS}, {tokens} FROM vx_docs ORDER BY rowid").fetchall()
        m, stored = self._mirror_of(rows)
        stored = stored if usable else None
        big = len(rows) >= 10_000
        del rows
        if big:
            _release_heap()
        return m, stored

    def _mirror_of(self, rows: list[tuple[Any, ...]]) -> tuple[Mirror, list[Any] | None]:
        """A mirror of ``rows`` (rowid, id, text, metadata, vector, stored token count) and the
        rows' stored counts (None when there are no rows)."""
        m = Mirror(self.dim, self.vector_dtype)
        if not rows:
            if self.dim is not None:
                m.set_dim(self.dim)
            return m, None
        if self.dim is None:
            raise InvalidDatabaseError(f"{self.path}: documents but no vector dimension in vx_meta")
        m.set_dim(self.dim)
        rowids, ids, texts, metas, blobs, stored = (list(col) for col in zip(*rows))
        try:
            # Room to double: the first writes after open never grow (copy) every column, and
            # the vectors' headroom is zero pages that take no memory until written.
            fill(m, rowids, ids, texts, loads_all(metas), blobs)
        except ValueError as exc:
            if "-d vector" in str(exc):
                raise InvalidDatabaseError(f"{self.path}: {exc}") from None
            raise
        return m, stored

    @staticmethod
    def _fill_tokens(m: Mirror, token_counter: Callable[[str], int], stored: list[int | None] | None) -> np.ndarray:
        """Fill a fresh mirror's token column: the ``stored`` counts where there are, the
        counter's (checked) elsewhere. Returns the positions counted now."""
        texts = m.texts
        if stored is None:
            todo = np.arange(m.n)
        else:
            missing = [p for p, t in enumerate(stored) if t is None]
            m.tokens[: m.n] = [0 if t is None else t for t in stored]
            todo = np.asarray(missing, dtype=np.int64)
        if todo.size:
            m.tokens[todo] = [check_token_count(token_counter(texts[p]), texts[p]) for p in todo.tolist()]
        return todo

    def _store_counts(self, m: Mirror, positions: np.ndarray, name: str) -> None:
        """Store the counts at ``positions`` as ``name``'s (a writer's open: one transaction
        of its own, which moves no generation: the documents are unchanged)."""
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('token_counter', ?)", (name,))
            c.executemany("UPDATE vx_docs SET tokens = ? WHERE rowid = ?",
                          zip(m.tokens[positions].tolist(), m.rowid[positions].tolist()))
            c.execute("COMMIT")
        except BaseException:
            rollback(c)
            raise
        self.token_counter = name
        if self.checkpointer is not None:
            self.checkpointer.committed(c)

    def save_mirror(self, m: Mirror) -> bool:
        """Save ``m`` as the mirror file a later open reads (a writer's ``close()``), unless
        the file already holds this generation; True when the collection keeps such files
        beside it (a writer's, of at least :data:`~vxmem.store.mirror.file.MIN_DOCUMENTS`
        documents; a smaller one's files are removed). A cache: a failure to write it (a
        full disk) raises nothing, and the next open reads the rows."""
        if self.read_only or self.path is None or self.uid is None:
            return False
        if m.n_alive < mirror_file.MIN_DOCUMENTS:
            for name in (mirror_path(self.path), postings_path(self.path)):
                remove_file(name)
            return False
        if self.counted_by is not None and not self.counts_mixed and not self._file_is_close(m):
            try:
                mirror_file.save(mirror_path(self.path), m, {
                    "uid": self.uid, "generation": self.generation, "schema": SCHEMA_VERSION,
                    "counter": self.counted_by})
                self.saved_at = self.generation
            except (OSError, ValueError):
                pass
        return True

    def _file_is_close(self, m: Mirror) -> bool:
        """Whether the mirror file is near enough this handle's state that an open taking the
        changes since from the log costs little: fewer than :data:`RESAVE_GENERATIONS`
        generations behind, with fewer changed rows than :func:`resave_rows` of ``m``
        (so a close after a few writes does not write the whole file again)."""
        saved = self.saved_at
        if saved is None:
            return False
        if saved == self.generation:
            return True
        if not 0 < self.generation - saved < RESAVE_GENERATIONS:
            return False
        (changed,) = self.conn.execute("SELECT count(*) FROM vx_changes WHERE generation > ?", (saved,)).fetchone()
        return bool(changed < resave_rows(m.n_alive))

    # ------------------------------------------------------------------ following the change log

    def changes_since(self, generation: int) -> tuple[set[int], set[int]] | None:
        """(inserted, deleted) rowids committed after ``generation`` up to the one this
        handle holds, from the change log, in one read transaction; None when the log does
        not reach back that far (pruned, or a file without one)."""
        if generation == self.generation:
            return set(), set()
        if not self._has_changes:
            return None
        with self._damage_is_invalid(), self._snapshot():
            row = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'changes_since'").fetchone()
            if row is None or generation < int(row[0]):
                return None
            inserted: set[int] = set()
            deleted: set[int] = set()
            for doc, op in self.conn.execute(
                    "SELECT doc, op FROM vx_changes WHERE generation > ? AND generation <= ? AND op != 'update'",
                    (generation, self.generation)):
                (inserted if op == "insert" else deleted).add(int(doc))
        return inserted, deleted

    def refresh(self, mirror: Mirror, token_counter: Callable[[str], int]) -> list[tuple[Any, ...]] | Mirror | None:
        """For a read-only handle: what writers committed since ``mirror`` was read.

        None when nothing was; otherwise the ops of the change (``("insert", rowid, id,
        text, meta, vec, tokens)``, ``("update", id, meta)``, ``("delete", [ids])``, for
        ``Engine.follow``), read from the change log in one read transaction, or a whole
        new :class:`Mirror` when the log cannot say (an older file, a reader further behind
        than the log reaches, or another database now at this path). ``PRAGMA data_version``
        taken before the transaction is the cheap "anything new?" probe, so a commit that
        lands while this reads is picked up by the next call.
        """
        if not self.read_only:
            return None
        probe = self._probe()
        if probe == self._data_version:
            return None
        state = (self.uid, self.generation, self.dim, self.schema_version, self._has_changes, self.token_counter)
        try:
            return self._refresh(mirror, token_counter, probe)
        except BaseException:  # nothing taken in: the next call tries again from the same state
            self.uid, self.generation, self.dim, self.schema_version, self._has_changes, self.token_counter = state
            raise

    def _refresh(self, mirror: Mirror, token_counter: Callable[[str], int],
                 probe: int) -> list[tuple[Any, ...]] | Mirror | None:
        with self._damage_is_invalid(), self._snapshot():
            old_uid, old_gen, old_dim = self.uid, self.generation, self.dim
            meta = self._read_meta()
            uid, since = meta.get("uid"), int(meta.get("changes_since", -1))
            if uid == old_uid and self.generation == old_gen:
                self._data_version = probe
                return None
            has_changes = self.schema_version >= 3 and (self._has_changes or "vx_changes" in schema.tables(self.conn))
            self._has_changes = has_changes
            incremental = (uid == old_uid and has_changes and 0 <= since <= old_gen < self.generation
                           and (old_dim is None or old_dim == self.dim) and (old_dim is not None or mirror.n == 0))
            if not incremental:
                self.uid = uid
                fresh, stored = self._read_all(token_counter_name(token_counter))
            else:
                logged = self._logged_ops(mirror, old_gen)
                ops = None if logged is None else logged[0]
        if not incremental:
            self._fill_tokens(fresh, token_counter, stored)
            self._data_version = probe
            return fresh
        if ops is None:  # the log and the mirror disagree: read it all
            self._data_version = None
            return self.refresh_full(token_counter)
        for op in ops:
            if op[0] == "insert":
                op[6] = check_token_count(token_counter(op[3]), op[3])
        if old_dim is None and self.dim is not None:
            mirror.set_dim(self.dim)
        self._data_version = probe
        return [tuple(op) for op in ops]

    def refresh_full(self, token_counter: Callable[[str], int]) -> Mirror:
        """A whole new mirror (and ``vx_meta`` read again), in one read transaction."""
        return self.load(token_counter)

    def _logged_ops(self, mirror: Mirror, generation: int) -> tuple[list[list[Any]], dict[int, Any]] | None:
        """The ops that bring ``mirror`` (at ``generation``) to this read transaction's state,
        from the rows the change log names since, and those rows' stored token counts by
        rowid (inserts carry a count of 0: the caller counts); None if they cannot (see
        :meth:`_ops_of`)."""
        touched = {r for (r,) in self.conn.execute(
            "SELECT DISTINCT doc FROM vx_changes WHERE generation > ?", (generation,))}
        rows = self.conn.execute(
            f"SELECT {_DOC_COLUMNS}, tokens FROM vx_docs WHERE rowid IN "
            "(SELECT doc FROM vx_changes WHERE generation > ?) ORDER BY rowid", (generation,)).fetchall()
        ops = self._ops_of(mirror, touched, [r[:5] for r in rows])
        return None if ops is None else (ops, {r[0]: r[5] for r in rows})

    def _ops_of(self, mirror: Mirror, touched: set[int], rows: list[tuple[Any, ...]]) -> list[list[Any]] | None:
        """The ops that bring ``mirror`` to ``rows`` (the touched documents still present);
        None if they cannot (a new row below the mirror's last rowid)."""
        present = {r[0] for r in rows}
        deleted = [mirror.ids[p] for r in sorted(touched - present)
                   if (p := mirror.pos_of_rowid.get(r)) is not None]
        ops: list[list[Any]] = [["delete", deleted]] if deleted else []
        last = int(mirror.rowid[mirror.n - 1]) if mirror.n else 0
        for rowid, id, text, meta_json, blob in rows:
            p = mirror.pos_of_rowid.get(rowid)
            meta = json.loads(meta_json)
            if p is not None:
                ops.append(["update", id, meta])
            elif rowid > last:
                ops.append(["insert", rowid, id, text, meta, self._vector(id, blob), 0])
            else:
                return None
        # Deletions first (an id may be taken again by a new row), then updates, then inserts in rowid order.
        return sorted(ops, key=lambda op: ("delete", "update", "insert").index(op[0]))

    def _vector(self, id: str, blob: bytes) -> np.ndarray:
        vec = np.frombuffer(blob, dtype=np.float32)
        if vec.shape[0] != self.dim:
            raise InvalidDatabaseError(f"{self.path}: document {id!r} has a {vec.shape[0]}-d vector, "
                                       f"expected {self.dim}")
        return vec
