"""A file of named numpy arrays beside the database: a cache that makes an open cheap.

The layout is a magic line, the length of a JSON header, the header, then the arrays,
each at an offset aligned to a page. The header holds the caller's fields, each array's
dtype, shape and offset, and the size and CRC-32 of everything after it, so a file cut
short or changed is refused whole (``None``), never half read.

The file is read through a private (copy-on-write) memory map: the arrays are views of the
page cache until written (the pages its check read are unmapped again, so only the pages
read since count towards the process's memory), and the last array may carry zero
*headroom* rows past its shape, a hole in the file that takes no disk and no memory until
rows are written there (so a mirror opened from it grows without copying its vectors).

Writing goes to ``path + ".tmp"`` and moves it into place, so a reader sees the old file
or the new one, whole; a save killed halfway leaves only the temporary file.
"""

from __future__ import annotations

import json
import mmap
import os
import zlib
from typing import Any

import numpy as np

MAGIC = b"VXSNAPSHOT1\n"
_ALIGN = 4096
_MAX_HEADER = 1 << 26


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def write(path: str, fields: dict[str, Any], arrays: dict[str, np.ndarray], headroom: int = 0) -> None:
    """Write ``arrays`` (in this order) and ``fields`` to ``path``, atomically; the last
    array gets ``headroom`` rows of zeros past its shape (a hole in the file)."""
    layout: dict[str, list[Any]] = {}
    offset = 0
    crc = 0
    parts: list[tuple[int, np.ndarray]] = []
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        offset = _aligned(offset)
        layout[name] = [arr.dtype.str, list(arr.shape), offset]
        parts.append((offset, arr))
        offset += arr.nbytes
    body = offset
    # The CRC covers the body as it lies in the file, the zero padding between arrays included.
    at = 0
    for start, arr in parts:
        crc = zlib.crc32(bytes(start - at), crc)
        crc = zlib.crc32(arr.data.cast("B") if arr.nbytes else b"", crc)
        at = start + arr.nbytes
    last = list(arrays)[-1] if arrays else None
    room = 0
    if last is not None and headroom:
        arr = arrays[last]
        room = headroom * (arr.nbytes // max(arr.shape[0], 1)) if arr.ndim else 0
    header = json.dumps({"fields": fields, "arrays": layout, "size": body, "crc32": crc,
                         "headroom": headroom if room else 0}).encode()
    start = _aligned(len(MAGIC) + 8 + len(header))
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + len(header).to_bytes(8, "little") + header)
            for off, arr in parts:
                f.seek(start + off)
                f.write(arr.data.cast("B") if arr.nbytes else b"")
            f.truncate(start + body + room)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


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
            mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    view = memoryview(mm)
    try:
        if zlib.crc32(view[start:start + body]) != crc:
            return None
        _forget_pages(mm)
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


def _forget_pages(mm: mmap.mmap) -> None:
    """Unmap the pages the check read (nothing was written yet, so nothing is lost): the
    file stays in the page cache, and only the pages the arrays are later read from count
    towards the process's memory (a mirror file holds 3 GB at 1M memories)."""
    if hasattr(mmap, "MADV_DONTNEED"):
        mm.madvise(mmap.MADV_DONTNEED)


def remove(path: str) -> None:
    """Remove the file at ``path`` (and a temporary one a killed save left), if there."""
    for name in (path, path + ".tmp"):
        try:
            os.remove(name)
        except OSError:
            pass
