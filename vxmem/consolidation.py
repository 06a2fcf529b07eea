"""Consolidation: old turns become standalone facts, and the turns go.

``ConversationMemory.consolidate()`` checks its arguments and calls :func:`consolidate`.
Each batch is one transaction: its facts are stored and its turns deleted together, so
if the summarizer raises, finished batches stay done and the rest stay untouched.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checks import check_text
from .clock import DAY, to_datetime
from .keys import K_CONSOLIDATED_FROM, K_EXPIRES, K_KIND, K_ROLE, K_SESSION, K_TS, KIND_TURN
from .store import Collection

Summarizer = Callable[[list[dict[str, Any]]], list[str]]


@dataclass
class ConsolidationReport:
    """What consolidate() did."""

    session: str | None
    batches: int = 0
    turns_consolidated: list[str] = field(default_factory=list)
    turns_deleted: int = 0
    facts: list[str] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    completed: bool = False

    @property
    def tokens_saved(self) -> int:
        """Tokens the turns held minus tokens their facts hold."""
        return self.tokens_before - self.tokens_after


def consolidate(db: Collection, session: str | None, summarize: Summarizer, *, keep_recent: int,
                cutoff: float | None, batch_turns: int, delete: bool, kind: str, ttl_days: float | None,
                now_ts: float) -> ConsolidationReport:
    """Consolidate ``session``'s live turns but the last ``keep_recent`` (and, given a
    ``cutoff``, only those older than it) in batches of ``batch_turns``, into facts of
    ``kind`` that live ``ttl_days`` (None: forever).

    An error of the summarizer carries the partial report as ``.report``.
    """
    report = ConsolidationReport(session=session)
    with db._locked() as m:
        pos = m.select(session, (KIND_TURN,), live_at=now_ts, include_superseded=False)
        ordered = np.array(m.in_turn_order(pos), dtype=np.int64)
        if keep_recent:
            ordered = ordered[:-keep_recent] if ordered.size > keep_recent else ordered[:0]
        if cutoff is not None:
            ordered = ordered[m.ts[ordered] < cutoff]
        # Batches hold ids, not positions: a commit may compact the mirror.
        ids = [m.ids[p] for p in ordered.tolist()]
        try:
            for i in range(0, len(ids), batch_turns):
                _batch(db, ids[i:i + batch_turns], summarize, kind, session, delete, ttl_days, report)
            report.completed = True
        except Exception as exc:
            exc.report = report  # type: ignore[attr-defined]
            raise
    return report


def _facts_of(summarize: Summarizer, items: list[dict[str, Any]]) -> list[str]:
    """What the summarizer returned for one batch, checked, stripped, blanks dropped."""
    facts = summarize(items)
    if isinstance(facts, (str, bytes)) or not isinstance(facts, (list, tuple)):
        raise TypeError(f"summarize must return a list of strings, got {type(facts).__name__}")
    for i, f in enumerate(facts):
        if not isinstance(f, str):
            raise TypeError(f"summarize returned a {type(f).__name__} at position {i}; expected str")
        check_text(f, f"summary fact {i}")
    return [f.strip() for f in facts if f.strip()]


def _batch(db: Collection, turn_ids: list[str], summarize: Summarizer, kind: str, session: str | None,
           delete: bool, ttl_days: float | None, report: ConsolidationReport) -> None:
    with db._locked() as m:  # the mirror as it is now: an earlier batch's commit may have replaced it
        plist = [m.pos_of_id[i] for i in turn_ids]
        items = [{"role": m.metas[p].get(K_ROLE, "user"), "text": m.texts[p], "ts": to_datetime(float(m.ts[p]))}
                 for p in plist]
        newest = float(max(m.ts[p] for p in plist))
        tokens_before = int(sum(int(m.tokens[p]) for p in plist))
        facts = _facts_of(summarize, items)
        vecs = db._embed(facts) if facts else np.zeros((0, 1), dtype=np.float32)
        ids = [uuid.uuid4().hex for _ in facts]
        with db._transaction() as tx:
            for fid, text, vec in zip(ids, facts, vecs):
                meta = {K_KIND: kind, K_SESSION: session, K_ROLE: "summary", K_TS: newest,
                        K_CONSOLIDATED_FROM: list(turn_ids)}
                if ttl_days is not None:
                    meta[K_EXPIRES] = newest + ttl_days * DAY
                tx.insert(fid, text, meta, vec)
            if delete:
                tx.delete(turn_ids)
    report.batches += 1
    report.turns_consolidated.extend(turn_ids)
    report.turns_deleted += len(turn_ids) if delete else 0
    report.facts.extend(ids)
    report.tokens_before += tokens_before
    report.tokens_after += sum(int(db.token_counter(f)) for f in facts)
