"""ConversationMemory's reading verbs: turns, history, recall, candidate_pool, context.

:class:`MemoryReading` holds them for :class:`~vxmem.memory.conversation.ConversationMemory`, which
inherits them with their signatures and docstrings (``Vectrix``'s delegates document them
from there). They read the collection through its seam only (``db.engine``, a
:class:`~vxmem.store.seam.MemoryStore`). The one write among them: a memory that ages from
access (``recency_from="accessed"``) records what ``recall()`` and ``context()`` returned
(``record_access()``), as LangChain's time-weighted retriever does.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from ..core.checks import (
    check_bool,
    check_choice,
    check_int,
    check_kinds,
    check_limit,
    check_session,
    check_text,
    check_weight,
)
from ..core.clock import TimeLike, to_epoch
from ..core.keys import KIND_TURN, KINDS
from ..models.embed import reranks_by_default
from ..models.rerank import Reranker, reranker_name
from ..ranking import scoring
from ..ranking.pool import CandidatePool
from ..store.checks import check_hybrid_weight, check_ids, check_mode
from ..store.collection import Collection
from ..store.results import Result
from ..store.seam import MemoryStore
from .bookkeeping import memory_pos
from .checks import any_if_none, check_memory_filter, check_min_relevance, check_user
from .context import ContextBlock, assemble
from .recall import MemoryResults, drop_below, gather, rank, rerank_pool
from .supersession import HistoryEntry, chain

# The keyword arguments of recall() that context() passes on.
RECALL_ARGS = ("score_gap", "kinds", "include_superseded", "mode", "exclude_ids", "hybrid_weight", "min_relevance",
               "rerank", "recency_from")


class MemoryReading:
    """The reading half of :class:`~vxmem.memory.conversation.ConversationMemory` (its ``__init__`` sets
    the attributes below)."""

    db: Collection

    @property
    def store(self) -> MemoryStore:
        """The seam this memory reaches its collection through (``db.engine``)."""
        return self.db.engine
    half_life_days: float
    recency_weight: float
    feedback_weight: float
    feedback_half_life_days: float
    hybrid_weight: float
    min_relevance: float | None
    rerank: bool | None
    reranker: Reranker
    recency_from: str

    @property
    def settings(self) -> dict[str, float]:
        """The ranking parameters, as the sweep engine names them."""
        return {"half_life_days": self.half_life_days, "recency_weight": self.recency_weight,
                "feedback_weight": self.feedback_weight,
                "feedback_half_life_days": self.feedback_half_life_days, "hybrid_weight": self.hybrid_weight}

    # ------------------------------------------------------------------ reading

    def turns(self, session: str | None, limit: int | None = None, now: TimeLike = None,
              filter: dict[str, Any] | None = None) -> list[Result]:
        """A session's turns in order; the last ``limit`` of them if given.

        Expired turns (at ``now``) are left out; superseded ones stay, flagged in their
        metadata, because this is the transcript.

        :param session: whose turns.
        :param limit: only the last this many.
        :param now: the moment of the transcript (default: now): turns created after it
            are not in it, and one expired by then is left out.
        :param filter: only turns whose own metadata match it (the collection's filter syntax).
        """
        session = check_session(session)
        flt = check_memory_filter(filter)
        if limit is not None:
            limit = check_limit(limit)
        now_ts = to_epoch(now)
        with self.store.locked() as m:
            ordered = m.in_turn_order(m.keep_matching(m.select(session, (KIND_TURN,), live_at=now_ts, as_of=now_ts),
                                                      flt))
            if limit is not None:
                ordered = ordered[-limit:]
            return [m.result(p) for p in ordered]

    def history(self, id: str, now: TimeLike = None) -> list[HistoryEntry]:
        """The supersession chain ``id`` belongs to, oldest first, as it stood at ``now``.

        Follows correction and contradiction links both ways, so "where did I live
        before?" has an answer even after the old fact dropped out of recall.

        :param id: a memory of the chain.
        :param now: the moment (default: now): memories created after it are not in the
            chain, and a supersession made after it has not happened yet. Empty when ``id``
            itself did not exist yet.
        """
        now_ts = to_epoch(now)
        with self.store.locked() as m:
            memory_pos(m, id)
            return chain(m, id, as_of=now_ts)

    def recall(self, query: str, session: str | None = None, limit: int = 10, token_budget: int | None = None,
               score_gap: float | None = None, kinds: Sequence[str] = KINDS, include_superseded: bool = False,
               mode: str | None = None, now: TimeLike = None, exclude_ids: Sequence[str] = (),
               hybrid_weight: float | None = None, min_relevance: float | None = None,
               rerank: bool | None = None, filter: dict[str, Any] | None = None,
               user: str | None = None, recency_from: str | None = None) -> MemoryResults:
        """Relevance, blended with recency and feedback, cut to a budget.

        The most relevant eligible memories (a pool of ``max(4 x limit, 40)``) have their
        relevance min-max normalised across the pool, then ``score = relevance_norm +
        recency_weight * 0.5 ** (age / half_life_days) + feedback_weight * clamp(feedback,
        -2, 2)``; ties go to the newer. Embedding models put cosines in a narrow band;
        measured against the spread the candidates actually have, "clearly more relevant"
        means what it says.

        With a rerank, the pool is first cut to its ``max(2 x limit, 20)`` most relevant
        candidates (by the mode's relevance, not by the blend), and each one's relevance
        becomes the reranker's score of (query, text); the blend above then ranks them
        unchanged. On LoCoMo this lifts recall@10 from 0.65 to 0.76 (README, "Search modes").

        Each result's ``metadata["_vx_scoring"]`` holds the parts of its score:
        ``relevance`` (raw: the reranker's logit when reranked, else the mode's score),
        ``relevance_norm``, ``recency``, ``feedback``, ``score``, ``age_days``, ``mode``,
        ``first_stage`` (the mode's relevance before the rerank; None when not reranked),
        ``rerank`` (the reranker's name, or None), ``recency_from`` (what ``age_days`` counts
        from), and outside dense mode the raw ``dense`` cosine and ``lexical`` BM25.

        A memory made with ``recency_from="accessed"`` records, at ``now``, that the results
        it returns were accessed (one small durable write; not on a read-only handle), and
        ages each memory from its latest access before ``now`` instead of its creation. An
        access counts from the moment after it: calls made at one moment never see each
        other's, so they rank alike whatever their order.

        :param query: the text to match.
        :param session: whose memories (None: every session).
        :param limit: how many results at most.
        :param token_budget: the most tokens the results may hold (the top one always ships).
        :param score_gap: cut at the first result scoring this much below the one before it.
        :param kinds: which kinds are eligible.
        :param include_superseded: let corrected and contradicted memories back in.
        :param mode: the relevance: ``"hybrid"`` (the default, None) fuses the cosine and
            BM25 with ``hybrid_weight``; ``"dense"`` is the cosine alone; ``"lexical"`` BM25
            from the FTS5 index alone. The blend on top is the same whatever the mode.
        :param now: the moment of the recall (default: now): ages count to it, and the
            collection is read as it stood then. A memory created after it is not there,
            one superseded after it is live, one expired by then is left out, and only
            feedback recorded at or before it counts.
        :param exclude_ids: memories to leave out.
        :param hybrid_weight: the dense share of hybrid relevance (default: the memory's).
        :param min_relevance: leave out candidates whose raw relevance is below this, before
            normalising (so a query that matches nothing returns nothing). Raw means the
            reranker's logit when reranked (about 0 is "maybe"; -5 drops what is unrelated),
            else the cosine in dense and hybrid mode, BM25 in lexical mode. Default: the
            memory's (None: keep every candidate). :meth:`low_relevance` gives a hint.
        :param rerank: rerank with the memory's reranker (None: the memory's ``rerank``
            setting; by default on with vxmem's default embedder, off otherwise).
        :param filter: only memories whose own metadata match it, in the collection's filter
            syntax (``{"topic": "billing"}``, ``{"topic": ["billing", "refunds"]}``). Exact:
            the pool is drawn from the matching memories alone, so the results are the true
            top ``limit`` among them.
        :param user: only this user's memories (``remember(user=...)``), from every session
            unless ``session`` narrows it to one.
        :param recency_from: what ages count from for this recall: ``"created"`` or
            ``"accessed"`` (None: the memory's ``recency_from``). Recording follows the
            memory's setting alone, so a memory made with ``"created"`` can rank by the
            recorded accesses (``recency_from="accessed"``) without adding any.
        """
        return self._recall(query, session=session, limit=limit, token_budget=token_budget, score_gap=score_gap,
                            kinds=kinds, include_superseded=include_superseded, mode=mode, now=now,
                            exclude_ids=exclude_ids, hybrid_weight=hybrid_weight, min_relevance=min_relevance,
                            rerank=rerank, filter=filter, user=user, recency_from=recency_from,
                            touch=self.recency_from == "accessed")

    def _recall(self, query: str, *, session: str | None = None, limit: int = 10, token_budget: int | None = None,
                score_gap: float | None = None, kinds: Sequence[str] = KINDS, include_superseded: bool = False,
                mode: str | None = None, now: TimeLike = None, exclude_ids: Sequence[str] = (),
                hybrid_weight: float | None = None, min_relevance: float | None = None,
                rerank: bool | None = None, filter: dict[str, Any] | None = None, user: str | None = None,
                recency_from: str | None = None, touch: bool) -> MemoryResults:
        """``recall()``, recording the results as accessed when ``touch`` is set."""
        if token_budget is not None:
            token_budget = check_limit(token_budget, "token_budget")
        if score_gap is not None:
            score_gap = check_weight(score_gap, "score_gap")
        self._prepare_query(query, mode)  # the embedder runs before the lock is taken
        with self.store.locked() as m:  # the pool's positions stay valid only while no one else writes
            pool = self.candidate_pool(query, session=session, limit=limit, kinds=kinds,
                                       include_superseded=include_superseded, mode=mode, now=now,
                                       exclude_ids=exclude_ids, hybrid_weight=hybrid_weight,
                                       min_relevance=min_relevance, rerank=rerank, filter=filter, user=user,
                                       recency_from=recency_from)
            results = rank(pool, m, query, self.settings, score_gap, token_budget)
            if touch and len(results):
                self._record(np.array([m.pos_of_id[r.id] for r in results], dtype=np.int64), pool.now)
            return results

    def _touch(self, ids: Sequence[str], now_ts: float) -> None:
        """Record ``ids`` (those still there) as accessed at ``now_ts``."""
        if not ids:
            return
        with self.store.locked() as m:
            pos = [p for p in (m.pos_of_id.get(i) for i in ids) if p is not None]
            self._record(np.array(pos, dtype=np.int64), now_ts)

    def _record(self, positions: np.ndarray, at: float) -> None:
        """Record accesses; a write that fails (a full disk, say) leaves them out with a
        warning rather than fail the read that made them: its results are already known."""
        try:
            self.store.record_access(positions, at)
        except sqlite3.OperationalError as exc:
            warnings.warn(f"vxmem could not record this recall's accesses ({exc}); memories aging from access "
                          "miss them", RuntimeWarning, stacklevel=4)

    def candidate_pool(self, query: str, session: str | None = None, limit: int = 10, kinds: Sequence[str] = KINDS,
                       include_superseded: bool = False, mode: str | None = None, now: TimeLike = None,
                       exclude_ids: Sequence[str] = (), pool: int | None = None,
                       hybrid_weight: float | None = None, min_relevance: float | None = None,
                       rerank: bool | None = None, filter: dict[str, Any] | None = None,
                       user: str | None = None, recency_from: str | None = None) -> CandidatePool:
        """The candidates ``recall()`` blends, with everything ranking needs, as a
        :class:`~vxmem.ranking.pool.CandidatePool`: already reranked (and cut by ``min_relevance``)
        when ``recall()`` with these arguments would be.

        The workbench caches this at each probe and re-ranks it for every sweep point.
        The arguments are ``recall()``'s, plus ``pool``, which overrides the pool size
        (default ``max(4 x limit, 40)``). Reading a pool records no access.
        """
        check_text(query, "query")
        session = check_session(session)
        limit = check_limit(limit)
        kinds = check_kinds(kinds)
        mode = scoring.DEFAULT_MODE if mode is None else check_mode(mode)
        hybrid_weight = self.hybrid_weight if hybrid_weight is None else check_hybrid_weight(hybrid_weight)
        check_bool(include_superseded, "include_superseded")
        excluded = tuple(check_ids(exclude_ids, "exclude_ids"))
        floor = self.min_relevance if min_relevance is None else check_min_relevance(min_relevance)
        reranking = self._reranking(rerank)
        flt = check_memory_filter(filter)
        user = check_user(user)
        aged_from = self.recency_from if recency_from is None else check_choice(
            recency_from, "recency_from", scoring.RECENCY_FROM)
        now_ts = to_epoch(now)
        size = scoring.pool_size(limit) if pool is None else check_limit(pool, "pool")
        scope = any_if_none(session)
        self.store.prepare_query(query, mode)  # a no-op when recall() prepared it already
        with self.store.locked() as m:
            pos = m.select(scope, kinds, live_at=now_ts, include_superseded=include_superseded, exclude_ids=excluded,
                           as_of=now_ts, user=user)
            pos = m.keep_matching(pos, flt)
            found = gather(self.store, m, query, pos, size=size, mode=mode, hybrid_weight=hybrid_weight,
                           session=scope, now_ts=now_ts, limit=limit)
            if reranking and len(found):
                found = rerank_pool(found, m, query, self.reranker, reranker_name(self.reranker))
            if floor is not None:
                found = drop_below(found, floor)
            if aged_from == "accessed" and found.positions is not None:
                found = found.aged_from_access(self.store.last_access(found.positions, now_ts))
            return found

    def _reranking(self, rerank: Any) -> bool:
        """Whether a recall with ``rerank=`` reranks: the argument, else the memory's setting,
        else whether the embedder is the one the default pipeline was measured with."""
        if rerank is not None:
            return check_bool(rerank, "rerank")
        if self.rerank is not None:
            return self.rerank
        return reranks_by_default(self.db.embedder)

    def pipeline(self, mode: str | None = None, rerank: bool | None = None) -> dict[str, Any]:
        """What ``recall(mode=mode, rerank=rerank)`` would run: ``{"mode": the search mode,
        "rerank": the reranker's name or None, "embedder": the embedder's name or None}``."""
        mode = scoring.DEFAULT_MODE if mode is None else check_mode(mode)
        emb = getattr(self.db.embedder, "name", None)
        return {"mode": mode, "rerank": reranker_name(self.reranker) if self._reranking(rerank) else None,
                "embedder": emb if isinstance(emb, str) else None}

    def low_relevance(self, mode: str | None = None, rerank: bool | None = None) -> float | None:
        """The raw relevance below which the best candidate probably matches nothing, for
        the pipeline ``recall(mode=mode, rerank=rerank)`` would use; None when unknown.

        It comes from the reranker's ``low_relevance`` when reranking (the cross-encoder's
        logit 0), else from the embedder's in dense mode (hashing cosine 0.25, bge cosine
        0.6, a weak hint: bge cosines sit in a narrow band). BM25 and the fused hybrid
        score have no absolute scale, so lexical and hybrid without a rerank give None.
        Compare it with ``_vx_scoring["relevance"]`` of the top result to warn a user.
        """
        mode = scoring.DEFAULT_MODE if mode is None else check_mode(mode)
        if self._reranking(rerank):
            hint = getattr(self.reranker, "low_relevance", None)
        elif mode == "dense":
            hint = getattr(self.db.embedder, "low_relevance", None)
        else:
            hint = None
        return float(hint) if isinstance(hint, (int, float)) and not isinstance(hint, bool) else None

    def _prepare_query(self, query: Any, mode: Any) -> None:
        """Embed a recall's query before any lock is taken (when the arguments are valid;
        otherwise the checks inside report them)."""
        if isinstance(query, str) and (mode is None or mode in ("dense", "hybrid")):
            try:
                check_text(query, "query")
            except ValueError:
                return
            self.store.prepare_query(query, check_mode(mode))

    def context(self, query: str, session: str | None = None, token_budget: int = 1500, recent_turns: int = 6,
                limit: int = 10, now: TimeLike = None, user: str | None = None, filter: dict[str, Any] | None = None,
                **recall_kwargs: Any) -> ContextBlock:
        """Assemble pinned facts, recent turns and recalled memories under one budget.

        Pinned facts are never cut: they are the caller's own declaration of what always
        matters. If they alone exceed the budget the block says so (``over_budget``)
        rather than dropping one. Recent turns (never superseded ones) are cut
        oldest-first. Whatever is left goes to recall, and a recalled memory that does
        not fit is left out rather than shipped over budget.

        ``session=None`` is the view across every session, as in ``recall()``: every
        session's pinned facts, no recent turns (turns belong to one conversation), and
        memories recalled from every session. Pass a session for one conversation's block.

        ``user`` widens the block to a user across their sessions: the user's pinned facts
        (from any session) join the session's, and recall draws on every memory of the
        user's (from any session) instead of the session's; the recent turns stay the
        session's. Remember a user's turns with ``user=`` so that recall finds them.

        :param query: what to recall memories for.
        :param session: whose context (None: every session's pinned facts, no recent turns,
            recall across sessions).
        :param token_budget: the tokens the block may hold, headers included.
        :param recent_turns: how many of the session's last turns to include.
        :param limit: how many memories to recall at most.
        :param now: the moment of the block (default: now): every section reads the
            collection as it stood then, as ``recall(now=...)`` does.
        :param user: whose pinned facts and memories join the block (see above).
        :param filter: only memories whose own metadata match it, in every section (the
            collection's filter syntax).
        :param recall_kwargs: ``recall()``'s ``score_gap``, ``kinds``, ``include_superseded``,
            ``mode``, ``exclude_ids``, ``hybrid_weight``, ``min_relevance``, ``rerank`` and
            ``recency_from``.

        A memory made with ``recency_from="accessed"`` records the recalled memories that
        made the block as accessed at ``now`` (pinned facts and recent turns are there
        whatever the query, so they are not).
        """
        check_text(query, "query")
        session = check_session(session)
        user = check_user(user)
        flt = check_memory_filter(filter)
        token_budget = check_limit(token_budget, "token_budget")
        recent_turns = check_int(recent_turns, "recent_turns", minimum=0)
        limit = check_limit(limit)
        for taken in ("token_budget", "session", "limit", "now", "query"):  # context() sets these itself
            recall_kwargs.pop(taken, None)
        unknown = set(recall_kwargs) - set(RECALL_ARGS)
        if unknown:
            raise TypeError(f"context() got unexpected recall arguments: {sorted(unknown)}")
        self._prepare_query(query, recall_kwargs.get("mode"))
        now_ts = to_epoch(now)
        block = assemble(self.store, partial(self._recall, touch=False), query, session, token_budget, recent_turns,
                         limit, now_ts, recall_kwargs, user=user, flt=flt)
        if self.recency_from == "accessed":
            self._touch([r.id for r in block.recalled], now_ts)
        return block
