"""A file of named numpy arrays beside the database: a cache that makes an open cheap.

The layout is a magic line, the length of a JSON header, the header, then the arrays,
each at an offset aligned to a page. The header holds the caller's fields, each array's
dtype, shape and offset, and the size and CRC-32 of everything after it, so a file cut
short or changed is refused whole (``None``), never half read.

The file is read whole into memory of the process's own (an anonymous map), never mapped:
another process may truncate the file or copy another over it in place while a handle reads
from it, which through a map of the file killed the reader with SIGBUS or fed it other
bytes after its check. The last array may carry zero *headroom* rows past its shape, a hole
in the file that takes no disk, and no memory until rows are written there (so a mirror
opened from it grows without copying its vectors).

Writing goes to ``path + ".tmp"`` and moves it into place, so a reader sees the old file
or the new one, whole; a save killed halfway leaves only the temporary file.
"""

from __future__ import annotations

import io
import json
import mmap
import os
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..sqlite.files import replaced_when_whole

MAGIC = b"VXSNAPSHOT1\n"
_ALIGN = 4096
_MAX_HEADER = 1 << 26


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


class Rows:
    """The rows ``rows`` of ``source`` as an array to :func:`write`: gathered a chunk at a
    time as they are written, never all at once (a mirror's vectors in another order)."""

    CHUNK = 8192

    def __init__(self, source: np.ndarray, rows: np.ndarray):
        self.source, self.rows = source, rows
        self.shape = (len(rows),) + source.shape[1:]
        self.dtype = source.dtype
        self.nbytes = len(rows) * (source[:1].nbytes if len(source) else 0)

    def chunks(self) -> Iterator[np.ndarray]:
        for a in range(0, len(self.rows), self.CHUNK):
            yield np.ascontiguousarray(self.source[self.rows[a:a + self.CHUNK]])


def _chunks(arr: np.ndarray | Rows) -> Iterator[np.ndarray]:
    if isinstance(arr, Rows):
        yield from arr.chunks()
    elif arr.nbytes:
        yield arr


def write(path: str, fields: dict[str, Any], arrays: dict[str, np.ndarray | Rows], headroom: int = 0) -> None:
    """Write ``arrays`` (in this order) and ``fields`` to ``path``, atomically; the last
    array gets ``headroom`` rows of zeros past its shape (a hole in the file)."""
    layout: dict[str, list[Any]] = {}
    offset = 0
    parts: list[tuple[int, np.ndarray | Rows]] = []
    for name, arr in arrays.items():
        if not isinstance(arr, Rows):
            arr = np.ascontiguousarray(arr)
        offset = _aligned(offset)
        layout[name] = [arr.dtype.str, list(arr.shape), offset]
        parts.append((offset, arr))
        offset += arr.nbytes
    body = offset
    last = parts[-1][1] if parts else None
    room = 0
    if last is not None and headroom and len(last.shape):
        room = headroom * (last.nbytes // max(last.shape[0], 1))

    def header(crc: int) -> bytes:
        return json.dumps({"fields": fields, "arrays": layout, "size": body, "crc32": crc,
                           "headroom": headroom if room else 0}).encode()

    # The body is written (and its CRC taken) in one pass, then the header: its room is the
    # header's with the widest CRC, and a shorter one is padded with spaces.
    length = len(header(0xFFFFFFFF))
    start = _aligned(len(MAGIC) + 8 + length)
    tmp = path + ".tmp"
    with replaced_when_whole(tmp, path), open(tmp, "wb") as f:
        crc, at = 0, 0
        for off, arr in parts:
            # The CRC covers the body as it lies in the file, the zero padding between arrays included.
            crc = zlib.crc32(bytes(off - at), crc)
            f.seek(start + off)
            for chunk in _chunks(arr):
                data = chunk.data.cast("B")
                crc = zlib.crc32(data, crc)
                f.write(data)
            at = off + arr.nbytes
        f.truncate(start + body + room)
        f.seek(0)
        f.write(MAGIC + length.to_bytes(8, "little") + header(crc).ljust(length))
        f.flush()
        os.fsync(f.fileno())


def read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The fields and arrays of the file at ``path`` (the last one with its headroom rows
    past its shape, as the array's first dimension); None when it is missing, cut short,
    changed since written, or not such a file."""
    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return None
            length = int.from_bytes(f.read(8), "little")
            if not 0 < length <= _MAX_HEADER:
                return None
            header = json.loads(f.read(length))
            start = _aligned(len(MAGIC) + 8 + length)
            size = os.fstat(f.fileno()).st_size
            body, crc = header["size"], header["crc32"]
            if type(body) is not int or start + body > size:
                return None
            mm = _read_whole(f, start + body, size)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if mm is None:
        return None
    view = memoryview(mm)
    try:
        if zlib.crc32(view[start:start + body]) != crc:
            return None
        arrays: dict[str, np.ndarray] = {}
        layout = header["arrays"]
        names = list(layout)
        for name in names:
            dtype, shape, off = layout[name]
            dt = np.dtype(dtype)
            rows = list(shape)
            if name == names[-1] and header.get("headroom") and rows:
                rows[0] += int(header["headroom"])
            count = int(np.prod(rows, dtype=np.int64))
            if start + off + count * dt.itemsize > size:
                return None
            arrays[name] = (np.frombuffer(mm, dtype=dt, count=count, offset=start + off).reshape(rows) if count
                            else np.zeros(rows, dtype=dt))
        fields = header["fields"]
        if not isinstance(fields, dict):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    finally:
        view.release()
    return fields, arrays


def _read_whole(f: io.BufferedReader, length: int, size: int) -> mmap.mmap | None:
    """The first ``length`` bytes of ``f`` in an anonymous map of ``size`` bytes (the rest
    zeros that take no memory until written); None when the file ends before ``length``."""
    mm = mmap.mmap(-1, max(size, 1))
    view = memoryview(mm)
    try:
        f.seek(0)
        done = 0
        while done < length:
            got = f.readinto(view[done:length])
            if not got:
                return None
            done += got
    finally:
        view.release()
    return mm


def remove(path: str) -> None:
    """Remove the file at ``path`` (and a temporary one a killed save left), if there."""
    for name in (path, path + ".tmp"):
        try:
            os.remove(name)
        except OSError:
            pass
