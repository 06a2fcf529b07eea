"""Answers and grades kept on disk by content hash, so a rerun of the same evaluation asks nothing.

A key is the sha256 of everything that decides the endpoint's reply: the model and the exact
messages (the filled prompt holds the prompt's text, the memories and the question), and the
sampling settings. Each entry is one small JSON file under ``<dir>/<key[:2]>/<key>.json``,
written to a temporary file and renamed into place, so a run that stops midway leaves whole
entries or none, never half of one. The default directory is ``$VXMEM_CACHE_DIR/qa``
(``~/.cache/vxmem/qa`` when the variable is unset), beside the embedding cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

FORMAT = "vxmem-qa-cache/1"


def default_cache_dir() -> Path:
    """``$VXMEM_CACHE_DIR/qa``, or ``~/.cache/vxmem/qa``."""
    base = os.environ.get("VXMEM_CACHE_DIR", "").strip()
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "vxmem"
    return root / "qa"


def content_key(**parts: Any) -> str:
    """The sha256 of ``parts`` as canonical JSON (sorted keys): equal content, equal key."""
    blob = json.dumps({"format": FORMAT, **parts}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class AnswerCache:
    """Entries (JSON objects) by key in ``directory``; ``directory=None`` keeps nothing (every
    lookup misses). ``hits`` and ``misses`` count lookups, for the report. Safe to share between
    threads: an entry is written whole under a name of its own, and the counts under a lock."""

    def __init__(self, directory: str | Path | None):
        self.directory = None if directory is None else Path(directory).expanduser()
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AnswerCache({str(self.directory) if self.directory else None!r})"

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key``, or None; an unreadable entry is a miss (it is asked again)."""
        entry = None
        if self.directory is not None:
            try:
                loaded = json.loads(self._path(key).read_text(encoding="utf-8"))
                entry = loaded if isinstance(loaded, dict) and loaded.get("key") == key else None
            except (OSError, ValueError):
                entry = None
        with self._lock:
            if entry is None:
                self.misses += 1
            else:
                self.hits += 1
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Store ``entry`` under ``key``, whole or not at all."""
        if self.directory is None:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({**entry, "key": key}, ensure_ascii=False, sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
