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
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Generic, TypeVar

import numpy as np

from ..core.checks import (
    check_bool,
    check_int,
    check_limit,
    check_session,
)
from ..core.clock import TimeLike, to_epoch
from ..core.keys import KIND_TURN, KINDS
from ..core.options import as_kwargs, docs_of, takes
from ..core.sentinels import MEMORY_SETTING, AnySession, MemorySetting
from ..models.embed import reranks_by_default
from ..models.rerank import Reranker, rerank_scores
from ..ranking import scoring
from ..ranking.blend import Blend
from ..ranking.pool import CandidatePool
from ..store.seam import MemoryCollection, MemoryStore, MemoryView, Result, check_mode, in_session
from .arguments import any_if_none, check_memory_filter, check_scope, check_user
from .bookkeeping import memory_pos
from .confidence import match_probability
from .context import ContextBlock, assemble
from .late_stage import in_context, late_scores
from .recall import MemoryResults, gather, rank
from .request import RecallOptions, RecallRequest
from .stages import (
    AgedFromAccess,
    DropBelow,
    PoolStage,
    Stage,
    StageContext,
    floors,
    is_late,
    preset_stages,
    stage_name,
)
from .supersession import HistoryEntry, chain

# The collection a memory was given: the memory reaches it through ``db.engine`` alone (the
# seam), and ``memory.db`` keeps the caller's own type (a Vectrix, say) for the caller.
CollectionT = TypeVar("CollectionT", bound=MemoryCollection)


def blend_field(name: str) -> property:
    """A memory attribute that reads and writes one field of its :class:`Blend`."""
    def get(self: MemoryReading[Any]) -> float:
        return float(getattr(self.blend, name))

    def put(self: MemoryReading[Any], value: float) -> None:
        self.blend = self.blend.replace(**{name: value})

    return property(get, put, doc=f"The blend's ``{name}``.")


# The keyword arguments of recall() that context() passes on: every option but those context() takes
# itself, and a blend.
CONTEXT_OWN = ("session", "limit", "token_budget", "now", "user", "filter")
RECALL_ARGS = (*(name for name in docs_of(RecallOptions) if name not in CONTEXT_OWN), "blend")


class MemoryReading(Generic[CollectionT]):
    """The reading half of :class:`~vxmem.memory.conversation.ConversationMemory` (its ``__init__`` sets
    the attributes below)."""

    db: CollectionT
    blend: Blend
    min_relevance: float | None
    rerank: bool | None
    reranker: Reranker  # the second stage
    final: Reranker | None  # a cascade's last stage (the accurate preset's cross-encoder), else None
    own: Reranker | None  # the reranker the caller gave (see stages.preset_stages), else None
    preset: str
    preset_given: bool  # the caller named the preset (its second stage runs unless rerank=False)
    recency_from: str

    @property
    def own_reranker(self) -> bool:
        """Whether the caller gave this memory its reranker."""
        return self.own is not None

    @property
    def store(self) -> MemoryStore:
        """The seam this memory reaches its collection through (``db.engine``)."""
        return self.db.engine

    @property
    def settings(self) -> dict[str, float]:
        """The blend's parameters by name, as the sweep engine names them."""
        return self.blend.as_dict()

    # The blend's parameters one by one (setting one replaces the blend, checked).
    half_life_days = blend_field("half_life_days")
    recency_weight = blend_field("recency_weight")
    feedback_weight = blend_field("feedback_weight")
    feedback_half_life_days = blend_field("feedback_half_life_days")
    hybrid_weight = blend_field("hybrid_weight")

    def warm(self) -> None:
        """Load the models now: the embedder, and the rerankers when ``recall()`` reranks by
        default, so the first ``remember()`` or ``recall()`` is not the slow one. Each model
        loads once per process; calling this again costs one short embedding."""
        self.store.embed(["warm up"], queries=True)
        if self._reranking(None):
            for stage in (self.reranker, self.final):
                if stage is not None:
                    rerank_scores(stage, "warm up", ["warm up"])

    # ------------------------------------------------------------------ reading

    def turns(self, session: str | None, limit: int | None = None, now: TimeLike = None,
              filter: dict[str, Any] | None = None, user: str | None = None) -> list[Result]:
        """A session's turns in order; the last ``limit`` of them if given.

        Expired turns (at ``now``) are left out; superseded ones stay, flagged in their
        metadata, because this is the transcript.

        :param session: whose turns.
        :param limit: only the last this many.
        :param now: the moment of the transcript (default: now): turns created after it
            are not in it, and one expired by then is left out.
        :param filter: only turns whose own metadata match it (the collection's filter syntax).
        :param user: the user whose session it is (a session belongs to its user: without
            ``user``, the session of no user).
        """
        session = check_session(session)
        user = check_user(user)
        flt = check_memory_filter(filter)
        if limit is not None:
            limit = check_limit(limit)
        now_ts = to_epoch(now)
        at = in_session(session, user)
        with self.store.locked(user=user, session=session) as m:
            ordered = m.in_turn_order(m.keep_matching(m.select(at, (KIND_TURN,), live_at=now_ts, as_of=now_ts), flt))
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
        with self.store.locked(owner_of=id) as m:
            memory_pos(m, id)
            return chain(m, id, as_of=now_ts)

    @takes(RecallOptions)
    def recall(self, query: str, options: RecallOptions) -> MemoryResults:
        """Relevance, blended with recency and feedback, cut to a budget.

        The most relevant eligible memories (a pool of ``max(4 x limit, 40)``) have their
        relevance min-max normalised across the pool, then ``score = relevance_norm +
        recency_weight * 0.5 ** (age / half_life_days) + feedback_weight * clamp(feedback,
        -2, 2)``; ties go to the newer. Embedding models put cosines in a narrow band;
        measured against the spread the candidates actually have, "clearly more relevant"
        means what it says. With a second stage (``preset``), the pool's most relevant
        candidates (120 for late interaction, 20 for the cross-encoder) are kept and each
        one's relevance becomes the stage's score.

        Each result's ``metadata["_vx_scoring"]`` holds its score's parts: ``relevance``
        (raw), ``relevance_norm``, ``recency``, ``feedback``, ``score``, ``age_days``,
        ``mode``, ``first_stage`` and ``rerank`` (when reranked), ``recency_from``, and
        outside dense mode the raw ``dense`` cosine and ``lexical`` BM25.

        A memory made with ``recency_from="accessed"`` records that the results were
        accessed at ``now`` and ages each memory from its latest access before ``now``.

        An option left at ``MEMORY_SETTING`` takes the memory's own setting; ``None`` is a value
        of its own where it has one (``min_relevance=None``: no floor).

        :param query: the text to match.
        """
        return self.recall_request(self.request(query, **as_kwargs(options)))

    def request(self, query: str, *, hybrid_weight: Any = MEMORY_SETTING, blend: Blend | None = None,
                **options: Any) -> RecallRequest:
        """The :class:`~vxmem.memory.request.RecallRequest` that ``recall(query, **options)``
        runs, checked; ``blend`` ranks it instead of this memory's blend, and ``hybrid_weight``
        gives it that blend (default: this memory's) with that weight."""
        if hybrid_weight is MEMORY_SETTING:
            hybrid_weight = None
        if hybrid_weight is not None and (blend is None or isinstance(blend, Blend)):
            blend = (blend or self.blend).replace(hybrid_weight=hybrid_weight)
        return RecallRequest(query=query, blend=blend, **options)  # canonical forms made in __post_init__

    def recall_request(self, request: RecallRequest, *, touch: bool | None = None) -> MemoryResults:
        """Run one checked :class:`~vxmem.memory.request.RecallRequest`: what ``recall()``
        does with its arguments. ``touch`` records the results as accessed (default: when
        this memory ages from access)."""
        if not isinstance(request, RecallRequest):
            raise TypeError(f"request must be a RecallRequest, not {type(request).__name__}")
        if touch is None:
            touch = self.recency_from == "accessed"
        self._prepare(request)  # the models run before the lock
        with self._scoped(request) as m:  # the pool's positions stay valid only while no one else writes
            pool = self._pool(m, request)
            results = rank(pool, m, request.query, request.blend or self.blend, request.score_gap,
                           request.token_budget)
            if touch and len(results):
                self._record(np.array([m.pos_of_id[r.id] for r in results], dtype=np.int64), pool.now)
            return results

    def in_context(self, ids: Sequence[str]) -> list[str]:
        """The texts the accurate preset's cross-encoder reads for the memories ``ids``: each
        one's text after the turn just before it in its session, when there is one."""
        with self.store.locked() as m:
            return in_context(m, np.array([m.pos_of_id[i] for i in ids], dtype=np.int64))

    def stage_scores(self, query: str, ids: Sequence[str]) -> np.ndarray:
        """The second stage's score of the memories ``ids`` for ``query``, as ``recall()``
        computes it (late interaction from the stored token vectors, own and in context; any
        other reranker from their texts)."""
        with self.store.locked() as m:
            pos = np.array([m.pos_of_id[i] for i in ids], dtype=np.int64)
            if is_late(self.reranker):
                return late_scores(self.store, m, self.reranker, query, pos)
            return rerank_scores(self.reranker, query, [m.texts[p] for p in pos.tolist()])

    def _prepare(self, request: RecallRequest) -> None:
        """Run what ``request`` needs of the models before the lock: the query's embedding,
        with a late-interaction stage's query encoding started beside it."""
        stage = self.second_stage(request).reranker
        if is_late(stage):
            stage.prefetch(request.query)
        self.store.prepare_query(request.query, request.search_mode)

    def _touch(self, ids: Sequence[str], now_ts: float, request: RecallRequest | None = None) -> None:
        """Record ``ids`` (those still there; of ``request``'s user or session) as accessed at ``now_ts``."""
        if not ids:
            return
        user, session = (None, None) if request is None else (request.user, request.session)
        with self.store.locked(user=user, session=session) as m:
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
                       hybrid_weight: float | MemorySetting | None = MEMORY_SETTING,
                       min_relevance: float | MemorySetting | None = MEMORY_SETTING,
                       rerank: bool | MemorySetting | None = MEMORY_SETTING, filter: dict[str, Any] | None = None,
                       user: str | None = None,
                       recency_from: str | MemorySetting | None = MEMORY_SETTING) -> CandidatePool:
        """The candidates ``recall()`` blends, with everything ranking needs, as a
        :class:`~vxmem.ranking.pool.CandidatePool`: already reranked (and cut by ``min_relevance``)
        when ``recall()`` with these arguments would be.

        The workbench caches this at each probe and re-ranks it for every sweep point.
        The arguments are ``recall()``'s, plus ``pool``, which overrides the pool size
        (default ``max(4 x limit, 40)``). Reading a pool records no access.
        """
        request = self.request(query, session=session, limit=limit, kinds=kinds,
                               include_superseded=include_superseded, mode=mode, now=now, exclude_ids=exclude_ids,
                               hybrid_weight=hybrid_weight, min_relevance=min_relevance, rerank=rerank,
                               filter=filter, user=user, recency_from=recency_from)
        return self.pool_for(request, None if pool is None else check_limit(pool, "pool"))

    def pool_for(self, request: RecallRequest, size: int | None = None, *,
                 first_only: bool = False) -> CandidatePool:
        """The candidate pool ``request`` ranks (of ``size`` candidates; default
        ``max(4 x limit, 40)``), as :meth:`candidate_pool` gives it; ``first_only``: as
        gathered, before any second stage (what a replay records). Records no access."""
        self._prepare(request)
        with self._scoped(request) as m:
            return self._pool(m, request, size, first_only)

    def _scoped(self, request: RecallRequest) -> AbstractContextManager[MemoryView]:
        """The store's lock for ``request``, saying what it reads: one user's memories, one
        session's, or (neither) a recall across everyone's."""
        across = request.user is None and request.session is None
        return self.store.locked(user=request.user, nearest=request.query if across else None,
                                 session=request.session if request.user is None else None)

    def _pool(self, m: MemoryView, request: RecallRequest, size: int | None = None,
              first_only: bool = False) -> CandidatePool:
        """``request``'s candidate pool, from the view ``m`` (inside ``store.locked()``):
        gathered, through its second stage (unless ``first_only``), aged as it asks, through a
        cascade's final stage (the blend's top ``limit`` only), cut by ``min_relevance``."""
        now_ts = request.now
        assert now_ts is not None  # a request's time is fixed when it is made
        scope = in_session(any_if_none(request.session), request.user)  # a user's session is theirs alone
        pos = m.select(scope, request.kinds, live_at=now_ts, include_superseded=request.include_superseded,
                       exclude_ids=request.exclude_ids, as_of=now_ts, user=request.user)
        pos = m.keep_matching(pos, request.filter)
        blend = request.blend or self.blend
        stage = self.second_stage(request)
        found = gather(self.store, m, request.query, pos,
                       size=size or scoring.pool_size(request.limit, stage.pool_floor), mode=request.search_mode,
                       hybrid_weight=blend.hybrid_weight, session=scope, now_ts=now_ts, limit=request.limit)
        ctx = StageContext(self.store, m, request.query, blend)
        for step in self._steps(request, stage, first_only):
            found = step.run(found, ctx)
        return found

    def _steps(self, request: RecallRequest, stage: Stage, first_only: bool) -> list[PoolStage]:
        """The stages ``request``'s gathered pool runs through, in order: ``stage``'s (the
        second, the ages counted from access as ``request`` asks, a cascade's final), then the
        cut by ``min_relevance``; ``first_only`` (a replay's record): the ages and the cut alone."""
        assert request.now is not None
        aged_from = self.recency_from if request.recency_from is None else request.recency_from
        aging: list[PoolStage] = [AgedFromAccess(request.now)] if aged_from == "accessed" else []
        steps = aging if first_only else stage.steps(aging)
        floor = self.min_relevance if request.min_relevance is MEMORY_SETTING else request.min_relevance
        return steps if floor is None else [*steps, DropBelow(floor)]

    def _reranking(self, rerank: Any) -> bool:
        """Whether a recall with ``rerank=`` reranks: the argument, else the memory's setting,
        else whether the memory's preset was named (and has a second stage), else whether the
        embedder is the one the default pipeline was measured with."""
        if rerank is not None:
            return check_bool(rerank, "rerank")
        if self.rerank is not None:
            return self.rerank
        if self.preset_given:
            return self.preset != "fast"
        return reranks_by_default(self.store.embedder)

    def second_stage(self, request: RecallRequest) -> Stage:
        """What ``request`` runs after its first stage (a :class:`~vxmem.memory.stages.Stage`):
        the memory's preset and reranker, or those of the request's own ``preset`` (whose
        second stage runs unless ``rerank=False``; a reranker the memory was given replaces
        it, or the accurate preset's cross-encoder). A preset named ``"fast"`` smooths its first
        stage instead."""
        preset = request.preset
        if preset is None:
            preset, reranker, final, on = self.preset, self.reranker, self.final, self._reranking(request.rerank)
            named = self.preset_given
        else:
            reranker, final = preset_stages(preset, self.own)
            on = check_bool(request.rerank, "rerank") if request.rerank is not None else preset != "fast"
            named = True
        if not on:
            return Stage(None, smooth=named and preset == "fast")
        return Stage(reranker, *floors(preset, reranker), final=final)

    def pipeline(self, mode: str | None = None, rerank: bool | None = None) -> dict[str, Any]:
        """What ``recall(mode=mode, rerank=rerank)`` would run: ``{"mode": the search mode,
        "rerank": the reranker's name or None, "embedder": the embedder's name or None}``."""
        mode = scoring.DEFAULT_MODE if mode is None else check_mode(mode)
        emb = getattr(self.store.embedder, "name", None)
        return {"mode": mode, "rerank": stage_name(self.reranker, self.final) if self._reranking(rerank) else None,
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
        if self._reranking(rerank):  # a cascade's relevance is its final stage's score
            hint = getattr(self.final or self.reranker, "low_relevance", None)
        elif mode == "dense":
            hint = getattr(self.store.embedder, "low_relevance", None)
        else:
            hint = None
        return float(hint) if isinstance(hint, (int, float)) and not isinstance(hint, bool) else None

    def match_probability(self, results: MemoryResults | CandidatePool) -> float | None:
        """The calibrated probability that ``results`` (this memory's ``recall()``, or a candidate
        pool) hold anything relevant to their query: low means the best match is probably noise,
        whatever its ``relevance_norm`` shows. 0 for no results or an absurd query ("!!!???",
        "xxxx..."); None for a pipeline with no fitted calibration. See :mod:`vxmem.memory.confidence`
        (below :data:`~vxmem.memory.confidence.MATCH_THRESHOLD` the dashboard warns)."""
        emb = getattr(self.store.embedder, "name", None)
        return match_probability(results, embedder=emb if isinstance(emb, str) else None)

    def context(self, query: str, session: str | AnySession | None = None, token_budget: int = 1500,
                recent_turns: int = 6, limit: int = 10, now: TimeLike = None, user: str | None = None,
                filter: dict[str, Any] | None = None, **recall_kwargs: Any) -> ContextBlock:
        """Assemble pinned facts, recent turns and recalled memories under one budget.

        Pinned facts are never cut: they are the caller's own declaration of what always
        matters. If they alone exceed the budget the block says so (``over_budget``)
        rather than dropping one. Recent turns (never superseded ones) are cut
        oldest-first. Whatever is left goes to recall, and a recalled memory that does
        not fit is left out rather than shipped over budget.

        ``session=None`` is the view across every session, as in ``recall()``: every
        session's pinned facts, no recent turns (turns belong to one conversation), and
        memories recalled from every session. Pass a session for one conversation's block.

        ``user`` names whose session it is (a session belongs to its user) and widens the
        rest of the block to the user across their sessions: the user's pinned facts from
        any of their sessions, and recall from every memory of theirs; the recent turns
        stay the session's. Remember a user's turns with ``user=`` so that recall finds them.

        :param query: what to recall memories for.
        :param session: whose context (None or ANY_SESSION: every session's pinned facts, no
            recent turns, recall across sessions).
        :param token_budget: the tokens the block may hold, headers included.
        :param recent_turns: how many of the session's last turns to include.
        :param limit: how many memories to recall at most.
        :param now: the moment of the block (default: now): every section reads the
            collection as it stood then, as ``recall(now=...)`` does.
        :param user: whose session and memories make the block (see above).
        :param filter: only memories whose own metadata match it, in every section (the
            collection's filter syntax).
        :param recall_kwargs: ``recall()``'s ``score_gap``, ``kinds``, ``include_superseded``,
            ``mode``, ``exclude_ids``, ``hybrid_weight``, ``min_relevance``, ``rerank`` and
            ``recency_from``, and ``blend``: a :class:`~vxmem.ranking.blend.Blend` that ranks
            the recalled section instead of the memory's.

        A memory made with ``recency_from="accessed"`` records the recalled memories that
        made the block as accessed at ``now`` (pinned facts and recent turns are there
        whatever the query, so they are not).
        """
        session = check_scope(session)
        token_budget = check_limit(token_budget, "token_budget")
        recent_turns = check_int(recent_turns, "recent_turns", minimum=0)
        for taken in ("token_budget", "session", "limit", "now", "query"):  # context() sets these itself
            recall_kwargs.pop(taken, None)
        unknown = set(recall_kwargs) - set(RECALL_ARGS)
        if unknown:
            raise TypeError(f"context() got unexpected recall arguments: {sorted(unknown)}")
        # A user's block recalls from every session of theirs; the recent turns stay the session's.
        request = self.request(query, session=session if user is None else None, user=user, limit=limit, now=now,
                               filter=filter, **recall_kwargs)
        self._prepare(request)
        block = assemble(self.store, partial(self.recall_request, touch=False), request, session, token_budget,
                         recent_turns)
        if self.recency_from == "accessed":
            assert request.now is not None
            self._touch([r.id for r in block.recalled], request.now, request)
        return block
