"""Restoring an export (:mod:`vxmem.store.portable.export`) into a fresh database, all or nothing.

The file is read line by line and checked as it goes (:class:`ExportReader`); its documents
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
import hashlib
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple, TypeVar

import numpy as np

from ...core.checks import check_text
from ...core.errors import ConflictError, ExportFileError
from ...core.keys import K_KIND, K_SESSION, K_TS, K_USER
from ...core.progress import Progress, Reporter
from ...models.embed import embedder_name
from ..arguments import check_id, check_json, check_reserved, check_token_count
from ..engine import Engine
from ..postgres import is_postgres_url
from ..sqlite.database import Database
from ..sqlite.files import index_files, mirror_path, postings_path, remove_abandoned_restores, restore_temp
from ..sqlite.jsonio import loads
from ..sqlite.locks import release_writer_lock, take_writer_lock
from .export import (
    END_COUNTS,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    LINE_TYPES,
    VECTOR_ENCODING,
    decode_vector,
    new_counts,
    tally,
)

log = logging.getLogger("vxmem.restore")

BATCH = 1_000  # documents embedded and written per transaction
_MEMORY_KEYS = {"type", "id", "text", "kind", "session", "user", "ts", "tokens", "metadata", "accessed", "vector"}
_SAME_AS_META = (("kind", K_KIND), ("session", K_SESSION), ("user", K_USER), ("ts", K_TS))

H = TypeVar("H")  # the handle a restore builds (a Collection, or a Vectrix)


class Item(NamedTuple):
    """One document line, checked: ``vector`` None where the file has none."""

    line: int
    id: str
    text: str
    meta: dict[str, Any]
    tokens: int | None
    accessed: list[float]
    vector: np.ndarray | None


@dataclass
class RestoreReport:
    """What a restore did: the file's counts, and what it said while restoring (``notes``:
    vectors embedded again, tokens counted again)."""

    source: str
    counts: dict[str, int] = field(default_factory=new_counts)
    reembedded: bool = False
    notes: list[str] = field(default_factory=list)


class ExportReader:
    """An export file read line by line: the header first (:attr:`header`), then
    :meth:`records`, which checks every line and, at the end, the counts and the checksum.
    Every refusal is an :class:`~vxmem.core.errors.ExportFileError` of one line."""

    def __init__(self, f: IO[bytes], name: str):
        self.f, self.name = f, name
        self.line = 0
        self.sha = hashlib.sha256()
        self.counts = new_counts()
        self.header = self._header()
        self.dim: int | None = self.header["dim"]

    def refuse(self, what: str, line: int | None = None) -> ExportFileError:
        at = self.line if line is None else line
        return ExportFileError(f"{self.name} line {at}: {what}; nothing was restored")

    def _next(self) -> dict[str, Any] | None:
        raw = self.f.readline()
        if not raw:
            return None
        self.line += 1
        if not raw.endswith(b"\n"):  # a line cut short: the file ends in the middle of it
            raise self.truncated()
        try:
            obj = loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise self.refuse(f"malformed: not a JSON line ({' '.join(str(exc).split())[:80]})") from None
        if not isinstance(obj, dict) or obj.get("type") not in LINE_TYPES:
            raise self.refuse(f"malformed: a line is a JSON object whose type is one of {', '.join(LINE_TYPES)}")
        if obj["type"] != "end":
            self.sha.update(raw)
        return obj

    def truncated(self) -> ExportFileError:
        promised = self.header["counts"].get("documents") if hasattr(self, "header") else None
        more = f" (its header promised {promised} documents, {self.counts['documents']} came)" if promised else ""
        return ExportFileError(f"{self.name} is truncated: it ends at line {self.line} without its end line{more}; "
                               "nothing was restored")

    def _header(self) -> dict[str, Any]:
        try:
            h = self._next()
        except ExportFileError:
            h = None
        if not h or h.get("format") != EXPORT_FORMAT or h.get("type") != "header":
            raise ExportFileError(f"{self.name} is not a vxmem export (its first line is not a "
                                  f"{EXPORT_FORMAT!r} header); nothing was restored")
        version = h.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise self.refuse(f"malformed header: version {version!r}")
        if version > EXPORT_VERSION:
            raise ExportFileError(f"{self.name} is in export format version {version}, newer than this vxmem "
                                  f"reads (up to {EXPORT_VERSION}): upgrade vxmem to restore it; nothing was restored")
        dim, vectors = h.get("dim"), h.get("vectors")
        if vectors not in (None, VECTOR_ENCODING):
            raise self.refuse(f"malformed header: unknown vector encoding {vectors!r}")
        if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool) or dim < 1):
            raise self.refuse(f"malformed header: dim {dim!r}")
        for key in ("embedder", "token_counter"):
            if h.get(key) is not None and not isinstance(h[key], str):
                raise self.refuse(f"malformed header: {key} {h[key]!r}")
        if not isinstance(h.get("counts"), dict):
            raise self.refuse("malformed header: no counts")
        return h

    def records(self) -> Iterator[Item | tuple[str, int]]:
        """Every document (an :class:`Item`), then every turn counter (``(name, value)``),
        in file order; the end line is checked when they are done."""
        counters = False
        while (obj := self._next()) is not None:
            kind = obj["type"]
            if kind == "memory":
                if counters:
                    raise self.refuse("malformed: a memory line after the counter lines")
                yield self._memory(obj)
            elif kind == "counter":
                counters = True
                yield self._counter(obj)
            elif kind == "end":
                self._end(obj)
                return
            else:
                raise self.refuse("malformed: a second header")
        raise self.truncated()

    def _memory(self, obj: dict[str, Any]) -> Item:
        try:
            return self._item(obj)
        except (TypeError, ValueError) as exc:
            raise self.refuse(f"malformed memory: {' '.join(str(exc).split())}") from None

    def _item(self, obj: dict[str, Any]) -> Item:
        unknown = sorted(set(obj) - _MEMORY_KEYS)
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r}")
        id, text, meta = check_id(obj.get("id")), check_text(obj.get("text")), obj.get("metadata")
        if not isinstance(meta, dict):
            raise TypeError("metadata must be a JSON object")
        check_json(meta)
        check_reserved(meta)
        for key, reserved in _SAME_AS_META:
            if obj.get(key) != meta.get(reserved):
                raise ValueError(f"{key} {obj.get(key)!r} disagrees with its metadata's {reserved} "
                                 f"{meta.get(reserved)!r}")
        tokens = obj.get("tokens")
        if tokens is not None:
            tokens = check_token_count(tokens, text)
        accessed = obj.get("accessed", [])
        if not isinstance(accessed, list) or not all(
                isinstance(t, (int, float)) and not isinstance(t, bool) and np.isfinite(t) for t in accessed):
            raise TypeError("accessed must be a list of times (epoch seconds)")
        vector = None
        if "vector" in obj:
            if self.header["vectors"] is None or self.dim is None:
                raise ValueError("a vector, but the header says the file has none")
            if not isinstance(obj["vector"], str):
                raise TypeError("vector must be a base64 str")
            vector = decode_vector(obj["vector"], self.dim)
        elif self.header["vectors"] is not None:
            raise ValueError("no vector, but the header says the file has them")
        tally(self.counts, meta, len(accessed), vector is not None)
        return Item(self.line, id, text, meta, tokens, [float(t) for t in accessed], vector)

    def _counter(self, obj: dict[str, Any]) -> tuple[str, int]:
        name, value = obj.get("name"), obj.get("value")
        if set(obj) != {"type", "name", "value"} or not isinstance(name, str) or not name \
                or not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.refuse("malformed counter: expected a name and a whole number")
        self.counts["counters"] += 1
        return name, value

    def _end(self, obj: dict[str, Any]) -> None:
        counts, promised = obj.get("counts"), self.header["counts"]
        if obj.get("lines") != self.line - 1 or not isinstance(counts, dict):
            raise self.refuse(f"the end line says {obj.get('lines')!r} lines came before it, {self.line - 1} did")
        wrong = [k for k in END_COUNTS if counts.get(k) != self.counts[k]]
        wrong += [k for k, v in promised.items() if k in self.counts and v != self.counts[k]]
        if wrong:
            k = wrong[0]
            raise self.refuse(f"the file is damaged: it counts {counts.get(k, promised.get(k))!r} {k}, "
                              f"its lines hold {self.counts[k]}")
        if obj.get("sha256") != self.sha.hexdigest():
            raise self.refuse("the file is damaged: its lines do not match the end line's checksum")
        if self.f.read(1):
            raise self.refuse("malformed: more lines after the end line", self.line + 1)


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of the export at ``path``, checked (what the file holds, whose vectors)."""
    with open(path, "rb") as f:
        return ExportReader(f, os.fspath(path)).header


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
    report = RestoreReport(source=name, counts=reader.counts)
    keep_vectors, keep_tokens = _plan(engine, reader.header, name, report)
    for note in report.notes:
        (notify or log.warning)(note)
    bar = Reporter(progress, int(reader.header["counts"].get("documents") or 0), "restoring", unit="doc")
    batch: list[Item] = []
    counters: list[tuple[str, int]] = []

    def flush() -> None:
        _write_batch(engine, batch, keep_vectors, keep_tokens, reader)
        bar.update(len(batch))
        batch.clear()

    try:
        for rec in reader.records():
            if isinstance(rec, Item):
                batch.append(rec)
                if len(batch) >= BATCH:
                    flush()
                continue
            if batch:  # the last documents, before the first counter
                flush()
            counters.append(rec)
            if len(counters) >= BATCH:
                _write_counters(engine, counters)
                counters.clear()
        if batch:
            flush()
        _write_counters(engine, counters)
    finally:
        bar.close()
    return report


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
    _remove([p for p in _beside(path)[1:]])
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

