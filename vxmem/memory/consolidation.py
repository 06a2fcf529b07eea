"""Consolidation: old turns become standalone facts, and the turns go.

``ConversationMemory.consolidate()`` checks its arguments and calls :func:`consolidate`.
Each batch is one transaction: its facts are stored and its turns deleted (or, with
``delete=False``, marked as consolidated) together, so if the summarizer raises, finished
batches stay done and the rest stay untouched.

The summarizer is called outside the handle's lock, on a snapshot of the batch: other
threads keep reading and writing meanwhile. Under the lock again, the batch is written
only if every one of its turns is still there, still a live turn and still not
consolidated; otherwise its facts are dropped and the batch is counted as skipped (its
turns are someone else's now, or gone).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.checks import check_text
from ..core.clock import expiry, to_datetime
from ..core.keys import (
    K_CONSOLIDATED_FROM,
    K_CONSOLIDATED_INTO,
    K_EXPIRES,
    K_KIND,
    K_ROLE,
    K_SESSION,
    K_TS,
    K_USER,
    KIND_CODES,
    KIND_TURN,
)
from ..store.seam import MemoryStore, MemoryView, in_session, session_name

Summarizer = Callable[[list[dict[str, Any]]], list[str]]


@dataclass
class ConsolidationReport:
    """What consolidate() did.

    ``turns_consolidated`` are the turns summarised into ``facts`` by this call;
    ``turns_deleted`` counts the turns it deleted (with ``delete=True`` also those an
    earlier ``consolidate(delete=False)`` had summarised already). ``turns_kept`` are the
    turns of batches the summarizer found nothing in (it returned no fact): nothing was
    stored or deleted for them, and a later call offers them again. ``batches_skipped``
    counts batches whose turns another write changed while the summarizer ran.
    """

    session: str | None
    batches: int = 0
    turns_consolidated: list[str] = field(default_factory=list)
    turns_deleted: int = 0
    facts: list[str] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    completed: bool = False
    turns_kept: list[str] = field(default_factory=list)
    batches_skipped: int = 0

    @property
    def tokens_saved(self) -> int:
        """Tokens the turns held minus tokens their facts hold."""
        return self.tokens_before - self.tokens_after


def consolidate(store: MemoryStore, session: str | None, summarize: Summarizer, *, keep_recent: int,
                cutoff: float | None, batch_turns: int, delete: bool, kind: str, ttl_days: float | None,
                now_ts: float, user: str | None = None) -> ConsolidationReport:
    """Consolidate ``session``'s (``user``'s own, when given) live turns but the last ``keep_recent`` (and, given a
    ``cutoff``, only those older than it) in batches of ``batch_turns``, into facts of
    ``kind`` that live ``ttl_days`` (None: forever).

    Turns an earlier ``delete=False`` call consolidated (they carry
    ``_vx_consolidated_into``) are never summarised again; with ``delete=True`` they are
    deleted, their facts being stored already. An error of the summarizer carries the
    partial report as ``.report``.
    """
    report = ConsolidationReport(session=session)
    at = in_session(session, user)
    with store.locked(user=user, session=session) as m:
        pos = m.select(at, (KIND_TURN,), live_at=now_ts, include_superseded=False)
        ordered = np.array(m.in_turn_order(pos), dtype=np.int64)
        if keep_recent:
            ordered = ordered[:-keep_recent] if ordered.size > keep_recent else ordered[:0]
        if cutoff is not None:
            ordered = ordered[m.ts[ordered] < cutoff]
        # Batches hold ids, not positions: a commit may renumber the view.
        done = [m.ids[p] for p in ordered.tolist() if K_CONSOLIDATED_INTO in m.metas[p]]
        ids = [m.ids[p] for p in ordered.tolist() if K_CONSOLIDATED_INTO not in m.metas[p]]
    try:
        if delete and done:
            _drop_consolidated(store, at, done, report)
        for i in range(0, len(ids), batch_turns):
            _batch(store, ids[i:i + batch_turns], summarize, kind, at, delete, ttl_days, report)
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


def _unconsumed(m: MemoryView, id: str) -> bool:
    """Whether ``id`` is still a live, unconsolidated turn (nothing else took it)."""
    p = m.pos_of_id.get(id)
    return (p is not None and int(m.kind[p]) == KIND_CODES[KIND_TURN] and not m.superseded[p]
            and K_CONSOLIDATED_INTO not in m.metas[p])


def _drop_consolidated(store: MemoryStore, session: Any, turn_ids: list[str],
                       report: ConsolidationReport) -> None:
    """Delete turns an earlier ``delete=False`` call already summarised (one transaction)."""
    with store.locked(session=session) as m:
        gone = [i for i in turn_ids if i in m.pos_of_id and K_CONSOLIDATED_INTO in m.metas[m.pos_of_id[i]]]
        if not gone:
            return
        with store.transaction() as tx:
            tx.delete(gone)
    report.batches += 1
    report.turns_deleted += len(gone)


def _batch(store: MemoryStore, turn_ids: list[str], summarize: Summarizer, kind: str, session: Any,
           delete: bool, ttl_days: float | None, report: ConsolidationReport) -> None:
    with store.locked(session=session) as m:  # a snapshot of the batch: an earlier commit may have renumbered it
        if not all(_unconsumed(m, i) for i in turn_ids):
            report.batches_skipped += 1
            return
        plist = [m.pos_of_id[i] for i in turn_ids]
        items = [{"role": m.metas[p].get(K_ROLE, "user"), "text": m.texts[p], "ts": to_datetime(float(m.ts[p]))}
                 for p in plist]
        newest = float(max(m.ts[p] for p in plist))
        users = {m.metas[p].get(K_USER) for p in plist}  # facts of one user's turns are that user's
        tokens_before = int(sum(int(m.tokens[p]) for p in plist))
    # The callables run outside the lock.
    facts = _facts_of(summarize, items)
    if not facts:  # nothing worth keeping, says the summarizer: the turns stay, nothing is stored
        report.turns_kept.extend(turn_ids)
        return
    vecs = store.embed(facts)
    fact_tokens = store.count_tokens(facts)
    ids = [uuid.uuid4().hex for _ in facts]
    with store.locked(session=session) as m:
        if not all(_unconsumed(m, i) for i in turn_ids):  # changed while the summarizer ran
            report.batches_skipped += 1
            return
        with store.transaction() as tx:
            for fid, text, vec, tokens in zip(ids, facts, vecs, fact_tokens):
                meta = {K_KIND: kind, K_SESSION: session_name(session), K_ROLE: "summary", K_TS: newest,
                        K_CONSOLIDATED_FROM: list(turn_ids)}
                end = expiry(newest, ttl_days)
                if end is not None:
                    meta[K_EXPIRES] = end
                if len(users) == 1 and None not in users:
                    meta[K_USER] = next(iter(users))
                tx.insert(fid, text, meta, vec, tokens)
            if delete:
                tx.delete(turn_ids)
            else:  # kept, and marked, so no later call summarises them again
                for t in turn_ids:
                    meta = dict(m.metas[m.pos_of_id[t]])
                    meta[K_CONSOLIDATED_INTO] = list(ids)
                    tx.update_meta(t, meta)
    report.batches += 1
    report.turns_consolidated.extend(turn_ids)
    report.turns_deleted += len(turn_ids) if delete else 0
    report.facts.extend(ids)
    report.tokens_before += tokens_before
    report.tokens_after += sum(fact_tokens)
