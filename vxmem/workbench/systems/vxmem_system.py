"""vxmem itself as a compared system: a fresh in-memory :class:`~vxmem.Vectrix` per conversation,
at a recall preset and an embedder, with the judge and summarizer the conversation's header names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.keys import K_CONSOLIDATED_FROM
from ...memory.rules import get_judge, get_summarizer
from ...vectrix import Vectrix
from . import Query, Turn, embedder_arg


class VxmemSystem:
    """``Vectrix(preset=preset, embedder=embedder)``: remember, feedback (with corrections),
    forget, expire and consolidate as the spec's verbs, recall at the probe's moment."""

    def __init__(self, preset: str = "default", embedder: str | None = None):
        self.preset, self.embedder = preset, embedder
        self.db: Vectrix | None = None
        self.labels: dict[str, tuple[str, ...]] = {}  # memory id -> the labels it stands for
        self.ids: dict[str, str] = {}  # label -> memory id
        self.summarizer: Any = None

    def begin(self, info: dict[str, Any]) -> None:
        judge = get_judge(info.get("judge"))
        self.summarizer = get_summarizer(info.get("summarizer"))
        self.db = Vectrix(None, embedder=embedder_arg(self.embedder), judge=judge, preset=self.preset)

    def _db(self) -> Vectrix:
        if self.db is None:
            self.begin({})
        assert self.db is not None
        return self.db

    def warm(self) -> None:
        self._db().warm()

    def _stored(self, mid: str, labels: Sequence[str]) -> None:
        self.labels[mid] = tuple(labels)
        for lab in labels:
            self.ids[lab] = mid

    def add(self, turn: Turn) -> None:
        pinned = turn.kind == "pinned"
        mid = self._db().remember(turn.text, session=turn.session, role=turn.role, timestamp=turn.time,
                                  pinned=pinned, kind=None if pinned or turn.kind == "turn" else turn.kind,
                                  ttl_days=turn.ttl_days)
        self._stored(mid, [turn.label])

    def correct(self, target: str, turn: Turn) -> None:
        if target not in self.ids:
            return self.add(turn)
        new = self._db().feedback(self.ids[target], "corrected", correction=turn.text, timestamp=turn.time)
        if new is not None:
            self._stored(new, [turn.label])

    def feedback(self, label: str, outcome: str, time: float) -> None:
        if label in self.ids:
            self._db().feedback(self.ids[label], outcome, timestamp=time)

    def forget(self, labels: Sequence[str], time: float) -> None:
        self._db().forget(ids=[self.ids[lab] for lab in labels if lab in self.ids], now=time)

    def expire(self, time: float) -> None:
        self._db().expire(now=time)

    def other(self, event: Any) -> None:
        """Forget by selection and consolidate, as the replay runs them."""
        db = self._db()
        if event.type == "forget":
            db.memory.forget(session=event.session, kinds=event.kinds or ("turn",), older_than=event.older_than,
                             superseded=event.superseded, now=event.time)
        elif event.type == "consolidate":
            report = db.memory.consolidate(event.session, self.summarizer, keep_recent=event.keep_recent,
                                           older_than=event.older_than, batch_turns=event.batch_turns,
                                           now=event.time)
            for fid in report.facts:
                src = db.get(fid).metadata.get(K_CONSOLIDATED_FROM) or []
                self._stored(fid, sorted({lab for s in src for lab in self.labels.get(s, ())}))

    def recall(self, query: Query) -> list[tuple[str, ...]]:
        res = self._db().recall(query.text, session=query.session, limit=query.k, now=query.time)
        return [self.labels.get(r.id, ()) for r in res]

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
