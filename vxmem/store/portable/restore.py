"""Restoring an export (:mod:`vxmem.store.portable.export`) into a fresh database, all or nothing.

The file's line count and checksum are checked first, before anything is embedded, then it
is read line by line and checked as it goes (:class:`~vxmem.store.portable.reader.ExportReader`); its documents
are written in batches of :data:`BATCH`, in the order they were stored, each with its
metadata (and so its history) as exported, its access log and the turn counters. A
database file is built under a temporary name beside the target and renamed into place
only once the end line has proved the file whole (its counts and its SHA-256), so a
refused or failed restore leaves nothing behind; an in-memory one is handed over only
then. Vectors come from the file when it has them and they are the target embedder's;
otherwise every text is embedded again, and the restore says so (``notify``), never
silently.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

from ...core.errors import ConflictError
from ...core.progress import Progress, Reporter
from ...models.embed import embedder_name
from ..engine import Engine
from ..mirror.columns import SessionMoves
from ..postgres import is_postgres_url
from ..sqlite import keys
from ..sqlite.database import Database
from ..sqlite.files import (
    index_files,
    mirror_path,
    postings_path,
    remove_abandoned_restores,
    remove_writer_note,
    restore_temp,
    writer_note_path,
)
from ..sqlite.keys import KeyRecord
from ..sqlite.locks import release_writer_lock, take_writer_lock
from .export import SHARED_SESSIONS_UPTO, new_counts
from .reader import ExportReader, Item

log = logging.getLogger("vxmem.restore")

BATCH = 1_000  # documents embedded and written per transaction
H = TypeVar("H")  # the handle a restore builds (a Collection, or a Vectrix)


@dataclass
class RestoreReport:
    """What a restore did: the file's counts, and what it said while restoring (``notes``:
    vectors embedded again, tokens counted again)."""

    source: str
    counts: dict[str, int] = field(default_factory=new_counts)
    reembedded: bool = False
    notes: list[str] = field(default_factory=list)


def _plan(engine: Engine, header: dict[str, Any], name: str, report: RestoreReport) -> tuple[bool, bool]:
    """Whether the file's vectors and token counts can be kept, each one said when not."""
    n = int(header["counts"].get("documents") or 0)
    target = embedder_name(engine.embedder)
    this = repr(target) if target else f"this database's embedder ({type(engine.embedder).__name__})"
    recorded = header.get("embedder")
    keep_vectors = header["vectors"] is not None and recorded is not None and recorded == target
    if not keep_vectors and n:
        why = ("holds no vectors" if header["vectors"] is None else
               f"holds vectors of embedder {recorded or 'unnamed'!r}, not of {this}")
        report.notes.append(f"{name} {why}: embedding its {n} texts again with {this}")
        report.reembedded = True
    counter = engine.database.counted_by
    keep_tokens = header.get("token_counter") is not None and header.get("token_counter") == counter
    if not keep_tokens and n and header.get("token_counter") is not None:
        report.notes.append(f"{name}'s token counts are of counter {header['token_counter']!r}: counting its "
                            f"{n} texts again with {counter or 'this database token counter'!r}")
    return keep_vectors, keep_tokens


def _write_batch(engine: Engine, batch: list[Item], keep_vectors: bool, keep_tokens: bool,
                 reader: ExportReader) -> None:
    """Embed and count what the file does not carry (outside the lock), then write the batch."""
    redo = [i for i, it in enumerate(batch) if it.vector is None or not keep_vectors]
    vecs: list[Any] = [it.vector for it in batch]
    if redo:
        for i, v in zip(redo, engine.embed([batch[i].text for i in redo])):
            vecs[i] = v
    recount = [i for i, it in enumerate(batch) if it.tokens is None or not keep_tokens]
    tokens: list[Any] = [it.tokens for it in batch]
    if recount:
        for i, t in zip(recount, engine.count_tokens([batch[i].text for i in recount])):
            tokens[i] = t
    with engine.locked(), engine.transaction() as tx:
        for it, vec, n in zip(batch, vecs, tokens):
            try:
                tx.insert(it.id, it.text, it.meta, vec, n)
            except (sqlite3.IntegrityError, ConflictError):  # a file's UNIQUE, PostgreSQL's
                raise reader.refuse(f"the id {it.id!r} appears twice", it.line) from None
            if it.accessed:
                tx.insert_accesses(it.accessed)


def fill(engine: Engine, f: IO[bytes], name: str, *, progress: Progress = None,
         notify: Callable[[str], Any] | None = None) -> RestoreReport:
    """Restore the export read from ``f`` into the empty database of ``engine``; a refusal
    raises :class:`~vxmem.core.errors.ExportFileError` with whatever was written still there
    (the caller discards the database)."""
    with engine.locked() as m:
        if m.n_alive:
            raise ValueError(f"the target database already holds {m.n_alive} documents: restore into a new one")
    reader = ExportReader(f, name)
    reader.verify()  # a damaged file is refused here, before anything is embedded
    report = RestoreReport(source=name, counts=reader.counts)
    if reader.crlf:
        report.notes.append(f"{name} has CRLF line endings (it was copied or edited as text): its checksum "
                            "holds for its lines read with LF endings, so it was read as the export it was")
    keep_vectors, keep_tokens = _plan(engine, reader.header, name, report)
    for note in report.notes:
        (notify or log.warning)(note)
    bar = Reporter(progress, int(reader.header["counts"].get("documents") or 0), "restoring", unit="doc")
    batch: list[Item] = []
    counters: list[tuple[str, int]] = []
    held: list[KeyRecord] = []
    # An export of sessions shared by their users: each user's go to sessions of their own.
    moves = SessionMoves() if reader.header["version"] <= SHARED_SESSIONS_UPTO else None

    def flush() -> None:
        _write_batch(engine, batch, keep_vectors, keep_tokens, reader)
        bar.update(len(batch))
        batch.clear()

    try:
        for rec in reader.records():
            if isinstance(rec, Item):
                batch.append(rec if moves is None else _moved(rec, moves))
                if len(batch) >= BATCH:
                    flush()
                continue
            if isinstance(rec, KeyRecord):
                held.append(rec)
                continue
            if batch:  # the last documents, before the first counter
                flush()
            counters.extend([rec] if moves is None else [rec, *((name, rec[1]) for name in moves.counters(rec[0]))])
            if len(counters) >= BATCH:
                _write_counters(engine, counters)
                counters.clear()
        if batch:
            flush()
        _write_counters(engine, counters)
        database = engine.database
        if held and isinstance(database, Database):
            with engine.locked(), engine.transaction():  # the transaction's connection is the file's
                keys.put(database.conn, held)
        elif held:  # the keys live in a database file's vx_keys: another store has no table of them yet
            report.notes.append(f"{name}'s {len(held)} API keys were left out: this store keeps none")
            (notify or log.warning)(report.notes[-1])
    finally:
        bar.close()
    return report


def _moved(it: Item, moves: SessionMoves) -> Item:
    """``it`` with its session its user's own (the same item when nothing moves)."""
    new = moves.take(it.meta)
    return it if new is None or new is it.meta else it._replace(meta=new)


def _write_counters(engine: Engine, counters: list[tuple[str, int]]) -> None:
    if not counters:
        return
    with engine.locked(), engine.transaction() as tx:
        for name, value in counters:
            tx.raise_counter(name, value)


# ---------------------------------------------------------------------------- into a new file


def _hold_target(path: str) -> int | None:
    """Take the writer lock of the target ``path`` (creating an empty file there if there is
    none) and refuse it if it holds documents (or is not a vxmem database); the lock
    descriptor, held until the new database is renamed into place, so no writer can open
    the target meanwhile and write into a file the rename then throws away."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"cannot restore into {path}: no directory {directory}")
    created = not os.path.exists(path)
    lock = take_writer_lock(path)  # a target another process or handle is writing is refused here
    remove_writer_note(path)  # a killed writer's, if any: the lock says it is gone
    try:
        if os.path.getsize(path) == 0:
            return lock
        database = Database(path, True)  # read-only: a target that holds documents is left untouched
        try:
            n = database.conn.execute("SELECT count(*) FROM vx_docs").fetchone()[0]
        finally:
            database.close()
        if n:
            raise ValueError(f"{path} already holds {n} documents: restore into a new database; "
                             "nothing was restored")
        return lock
    except BaseException:
        _let_go(path, lock, created)
        raise


def _let_go(path: str, lock: int | None, created: bool) -> None:
    """Release the target's lock; remove the empty file :func:`_hold_target` created there."""
    if created:
        with contextlib.suppress(OSError):
            if os.path.getsize(path) == 0:
                os.remove(path)
    if lock is not None:
        release_writer_lock(lock)


_SIDE_FILES = ("", "-wal", "-shm")


def _beside(path: str) -> list[str]:
    """The database file at ``path`` and every file that belongs to it."""
    return [path + s for s in _SIDE_FILES] + [mirror_path(path), postings_path(path), *index_files(path)]


def _remove(paths: list[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except OSError:
            pass


def _move_into_place(tmp: str, path: str) -> None:
    """The closed database ``tmp`` (and its caches) renamed to ``path``, replacing an empty
    database there and its caches."""
    wal = tmp + "-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:  # a close that could not checkpoint: do it now
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    _remove([p for p in _beside(path)[1:]] + [writer_note_path(path)])
    os.replace(tmp, path)
    for old, new in zip(_beside(tmp)[3:], _beside(path)[3:]):
        if os.path.exists(old):
            os.replace(old, new)
    _remove(_beside(tmp))


def restore_file(source: str | os.PathLike[str], path: str | os.PathLike[str] | None,
                 open_handle: Callable[[str | None], H], *, progress: Progress = None,
                 notify: Callable[[str], Any] | None = None) -> tuple[H, RestoreReport]:
    """Restore the export at ``source`` into a new database at ``path`` (None: in memory),
    opened by ``open_handle(path)``; returns the open handle and what was done.

    A file is built as ``.NAME.restoring-PID-*`` beside ``path`` and renamed into place when
    whole; a refusal or a failure removes it, and ``path`` is left as it was. The target's
    writer lock is held from its check to the rename: a writer opening it meanwhile gets
    :class:`~vxmem.core.errors.DatabaseLockedError`. What a killed restore into ``path``
    left there is removed by the next one.
    """
    source = os.fspath(source)
    if not os.path.isfile(source):
        raise FileNotFoundError(f"no export file at {source}")
    if path is None or is_postgres_url(path):
        handle = open_handle(None if path is None else os.fspath(path))
        try:
            with open(source, "rb") as f:
                return handle, fill(_engine(handle), f, source, progress=progress, notify=notify)
        except BaseException:
            if path is not None:
                _undo(_engine(handle))
            _close(handle)
            raise
    target = os.fspath(path)
    created = not os.path.exists(target)
    lock = _hold_target(target)
    try:
        remove_abandoned_restores(target)
        tmp = restore_temp(target)
        try:
            report = _build(source, tmp, open_handle, progress, notify)
            _move_into_place(tmp, target)
        except BaseException:
            _remove(_beside(tmp))
            raise
    except BaseException:
        _let_go(target, lock, created)
        raise
    _let_go(target, lock, False)
    return open_handle(target), report


def _undo(engine: Engine) -> None:
    """Delete what a failed restore wrote into a PostgreSQL database (it was empty: ``fill``
    checks), so that nothing of it stays. The counters come last, after the whole file was
    read and checked, so a refusal never leaves one behind."""
    with engine.locked() as m, engine.transaction() as tx:
        tx.delete([m.ids[p] for p in m.live_positions().tolist()])


def _build(source: str, tmp: str, open_handle: Callable[[str | None], Any], progress: Progress,
           notify: Callable[[str], Any] | None) -> RestoreReport:
    """The restore of ``source`` written into a new database at ``tmp``, closed."""
    handle = open_handle(tmp)
    try:
        with open(source, "rb") as f:
            return fill(_engine(handle), f, source, progress=progress, notify=notify)
    finally:
        _close(handle)


def _engine(handle: Any) -> Engine:
    engine = handle.engine
    assert isinstance(engine, Engine)
    return engine


def _close(handle: Any) -> None:
    handle.close()

