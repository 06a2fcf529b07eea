"""What every importer of another tool's files shares: reading JSON and converting records.

An importer (LoCoMo, LongMemEval, and later chat logs) turns each record of a file into a
:class:`~vxmem.workbench.datasets.Conversation`. Whatever goes wrong comes back as one
:class:`~vxmem.workbench.datasets.DatasetError` that names the file and the record at fault.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from .model import Conversation, DatasetError

TURN_GAP = 60.0  # seconds between consecutive turns of one session when the source dates only sessions


def read_json(path) -> Any:
    """The parsed JSON of ``path``; unreadable, non-UTF-8 or invalid JSON is a :class:`DatasetError`."""
    spath = os.fspath(path)
    try:
        with open(spath, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise DatasetError(f"cannot read file: {exc.strerror or exc}", path=spath) from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                           path=spath) from None
    except UnicodeDecodeError:
        raise DatasetError("not UTF-8 text", path=spath) from None
    except RecursionError:
        raise DatasetError("JSON nested too deeply to be a dataset", path=spath) from None


def load_list(path, shape: str, item: str, id_key: str,
              convert: Callable[[Any], Conversation]) -> list[Conversation]:
    """Convert each item of a JSON list file; a bad item's error names it and its id.

    ``shape`` is the error when the file is not a list ("a LoCoMo file is a JSON list of
    samples"), ``item`` what one entry is called and ``id_key`` the entry's id field.
    """
    spath = os.fspath(path)
    data = read_json(spath)
    if not isinstance(data, list):
        raise DatasetError(shape, path=spath)
    out = []
    for i, obj in enumerate(data):
        try:
            out.append(convert(obj))
        except (ValueError, KeyError, TypeError) as exc:
            msg = exc.args[0] if exc.args else str(exc)
            oid = obj.get(id_key) if isinstance(obj, dict) else None
            raise DatasetError(f"{item} {i} ({oid!r}): {msg}", path=spath) from None
    return out
