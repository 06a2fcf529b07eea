"""Reading an export file (:mod:`vxmem.store.portable.export`) line by line, every line checked.

:class:`ExportReader` reads the header, then every document and counter, and at the end
checks the counts and the SHA-256 the end line records. :meth:`ExportReader.verify` checks
the line count and the checksum first, in one quick pass over the file, so a damaged file
is refused before a restore embeds a single text. A file whose line endings were changed
to CRLF (a text-mode transfer, an editor) is read as the LF file it was, when its checksum
proves that is all that changed; otherwise the refusal says its line endings were changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

import numpy as np

from ...core.checks import check_text
from ...core.errors import ExportFileError
from ...core.keys import K_KIND, K_SESSION, K_TS, K_USER
from ..arguments import check_id, check_json, check_reserved, check_token_count
from ..sqlite.jsonio import loads
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

_MEMORY_KEYS = {"type", "id", "text", "kind", "session", "user", "ts", "tokens", "metadata", "accessed", "vector"}
_SAME_AS_META = (("kind", K_KIND), ("session", K_SESSION), ("user", K_USER), ("ts", K_TS))


def _lf(raw: bytes) -> tuple[bytes, bool]:
    """A line as the exporter wrote it (ending in LF), and whether it ended in CRLF. Safe:
    JSON escapes every CR inside a string, so an export's lines hold no raw CR of their own."""
    if raw.endswith(b"\r\n"):
        return raw[:-2] + b"\n", True
    return raw, False


class Item(NamedTuple):
    """One document line, checked: ``vector`` None where the file has none."""

    line: int
    id: str
    text: str
    meta: dict[str, Any]
    tokens: int | None
    accessed: list[float]
    vector: np.ndarray | None


class ExportReader:
    """An export file read line by line: the header first (:attr:`header`), then
    :meth:`records`, which checks every line and, at the end, the counts and the checksum.
    Every refusal is an :class:`~vxmem.core.errors.ExportFileError` of one line."""

    def __init__(self, f: IO[bytes], name: str):
        self.f, self.name = f, name
        self.line = 0
        self.sha = hashlib.sha256()
        self.counts = new_counts()
        self.crlf = False  # some line ended in CRLF (read as LF)
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
        raw, crlf = _lf(raw)
        self.crlf |= crlf
        try:
            obj = loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise self.refuse(f"malformed: not a JSON line ({' '.join(str(exc).split())[:80]})") from None
        if not isinstance(obj, dict) or obj.get("type") not in LINE_TYPES:
            raise self.refuse(f"malformed: a line is a JSON object whose type is one of {', '.join(LINE_TYPES)}")
        if obj["type"] != "end":
            self.sha.update(raw)
        return obj

    def damaged(self, line: int | None = None) -> ExportFileError:
        what = "the file is damaged: its lines do not match the end line's checksum"
        if self.crlf:  # read as LF they would match, had only the line endings changed
            what += (" (its line endings were changed from LF to CRLF, and more than them: copy the export "
                     "in binary mode, never as text, or export it again)")
        return self.refuse(what, line)

    def verify(self) -> None:
        """Check that the end line counts the lines before it and that their checksum matches,
        in one quick pass over the rest of the file, then come back to the first document: a
        damaged file is refused before a restore embeds a single text. A file that does not
        end in an end line is left to :meth:`records`, which names where it goes wrong."""
        if not self.f.seekable():
            return
        start, line, sha, last = self.f.tell(), self.line, self.sha.copy(), b""
        for raw in iter(self.f.readline, b""):
            if last:
                sha.update(last)
            last, crlf = _lf(raw)
            self.crlf |= crlf
            line += 1
        self.f.seek(start)
        try:
            end = loads(last.decode("utf-8")) if last.endswith(b"\n") else None
        except (ValueError, UnicodeDecodeError):
            return
        if not isinstance(end, dict) or end.get("type") != "end":
            return
        if end.get("lines") != line - 1:
            raise self.refuse(f"the end line says {end.get('lines')!r} lines came before it, {line - 1} did", line)
        if end.get("sha256") != sha.hexdigest():
            raise self.damaged(line)

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
            raise self.damaged()
        if self.f.read(1):
            raise self.refuse("malformed: more lines after the end line", self.line + 1)


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of the export at ``path``, checked (what the file holds, whose vectors)."""
    with open(path, "rb") as f:
        return ExportReader(f, os.fspath(path)).header
