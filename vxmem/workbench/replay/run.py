"""Replay a conversation through a fresh memory on a simulated clock.

``replay(conversation, settings)`` drives a new in-memory :class:`~vxmem.Vectrix` /
:class:`~vxmem.ConversationMemory` with ``now=`` set to each event's time. At each probe
it records the live ``recall()`` ranking, how long that recall took (``recall_ms``, wall-clock
milliseconds; each turn's and fact's ``remember()`` likewise, as its event row's ``write_ms``)
and the **candidate pool** with everything ranking needs (raw relevance, age, feedback
history, kind, session, token counts) and which candidates are relevant (graded) or stale, so
:mod:`vxmem.workbench.sweep.run` can re-rank the pools for any parameters without embedding or
searching again.

Independent replays run in parallel with :func:`replay_many` through joblib. On a cluster,
wrap the call in joblib's backend of the cluster and nothing else changes::

    from dask.distributed import Client            # or: import ray; from ray.util.joblib import register_ray
    import joblib
    client = Client("scheduler:8786")              # register_ray(); backend "ray"
    with joblib.parallel_config(backend="dask"):
        replays = replay_many(conversations, settings, n_jobs=None)   # None: the backend's workers

Long work reports progress one way for every front end: ``progress=True`` draws a tqdm
bar (the CLI's), and a callable ``progress(done, total, desc)`` is called at the same
points (the dashboard feeds ``st.progress`` with it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ...core.checks import check_choice, check_kinds, check_limit
from ...core.keys import K_CONSOLIDATED_FROM, K_EXPIRES, K_KIND, K_ROLE, K_SESSION, K_SUPERSEDED_BY, K_SUPERSEDES, KINDS
from ...core.progress import Progress, ProgressFn, Reporter
from ...memory.consolidation import Summarizer
from ...memory.request import RecallRequest
from ...memory.rules import get_judge, get_summarizer
from ...models.embed import EmbedderArg, check_embedder
from ...ranking import scoring
from ...ranking.pool import AccessLog, CandidatePool, LabelledPool
from ...ranking.scoring import BLEND_DEFAULTS, DEFAULT_MODE
from ...store.arguments import check_mode
from ...vectrix import Vectrix
from ..analysis import metrics as M
from ..datasets.model import Conversation, Event
from ..sweep.policies import Policy, get_policy, rank_pool, resolve_params
from .record import Replay, padded_pools, reranked_pool, smoothed_pool
from .stage_scores import kept_scores, read_scores

MEMORY_KEYS = ("half_life_days", "recency_weight", "feedback_weight", "feedback_half_life_days", "ttl_days",
               "judge_candidates", "hybrid_weight", "reranker", "recency_from", "preset")
RECALL_KEYS = ("limit", "token_budget", "score_gap", "mode", "kinds", "rerank")
OTHER_KEYS = ("judge", "summarizer", "pool_limit")
SETTINGS_KEYS = MEMORY_KEYS + RECALL_KEYS + OTHER_KEYS
MAX_SESSION_BITS = 62


def check_settings(settings: dict[str, Any] | None, under: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Settings (over ``under``: a conversation's own) with defaults filled in, after checking
    every key is known."""
    if settings is not None and not isinstance(settings, Mapping):
        raise TypeError(f"settings must be a dict of setting -> value, not {type(settings).__name__}")
    settings = {**(under or {}), **(settings or {})}
    unknown = set(settings) - set(SETTINGS_KEYS)
    if unknown:
        raise ValueError(f"unknown setting {sorted(unknown)[0]!r}; known: {', '.join(SETTINGS_KEYS)}")
    out: dict[str, Any] = dict(BLEND_DEFAULTS)
    out.update({"limit": 10, "token_budget": None, "score_gap": None, "mode": None, "rerank": None,
                "pool_limit": None})
    out.update(settings)
    for k in ("limit", "pool_limit", "token_budget"):
        if out[k] is not None:
            out[k] = check_limit(out[k], k)
    out["pool_limit"] = max(out["limit"], out["pool_limit"] or out["limit"])
    if out.get("kinds") is not None:  # as recall() reads it: one kind or several, never none
        out["kinds"] = check_kinds(out["kinds"])
    if out.get("recency_from") is not None:
        check_choice(out["recency_from"], "recency_from", scoring.RECENCY_FROM)
    return out


def _low_relevance(memory: Any, mode: str | None, rerank: bool | None = None) -> float | None:
    """The raw relevance under which the memory calls a best match weak, when it can say
    (``ConversationMemory.low_relevance``); None when it cannot."""
    fn = getattr(memory, "low_relevance", None)
    if fn is None:
        return None
    value = fn(mode=mode, rerank=rerank)
    return None if value is None else float(value)


def _name_of(obj: Any) -> str | None:
    if obj is None or isinstance(obj, str):
        return obj
    return getattr(obj, "name", type(obj).__name__)


def replay(conversation: Conversation, settings: dict[str, Any] | None = None, embedder: EmbedderArg = None,
           *, policy: str | Policy = "blend", on_probe: Callable[..., Any] | None = None,
           progress: Progress = False, token_counter: Callable[[str], int] | None = None,
           cache: Any = None) -> Replay:
    """Drive a fresh memory through ``conversation`` and record every probe.

    ``settings`` holds memory settings (``half_life_days``, ``recency_weight``,
    ``feedback_weight``, ``feedback_half_life_days``, ``ttl_days``, ``judge_candidates``,
    ``hybrid_weight``, ``reranker``, ``recency_from``), recall settings (``limit``, ``token_budget``, ``score_gap``,
    ``mode``, ``kinds``, ``rerank``), ``judge`` / ``summarizer`` (callables or the names of the
    rule-based ones in :mod:`vxmem.memory.rules`; default: what the conversation's header names)
    and ``pool_limit``, the largest ``limit`` a later sweep may ask for (default: ``limit``).
    The replay records ``mode`` resolved (None becomes the default, hybrid) and, in
    ``meta["rerank"]``, the reranker its pools were reranked with.
    ``embedder`` is what ``Vectrix(embedder=...)`` takes (default: vxmem's default embedder).
    ``cache`` keeps the embedder's vectors and the reranker's scores in a file
    (:mod:`vxmem.models.cache`; None: the default file, False: none, or a path), so a second
    replay of the same conversation embeds nothing; the conversation's texts and queries are
    embedded up front, in batches, with a progress bar when ``progress``. Each probe row's
    ``recall_ms`` is how long its live ``recall()`` took: what the cache held (the query's
    vector, the reranker's scores) cost it nothing, so replay with ``cache=False`` to time
    recalls as a live memory runs them (its models loaded first, as a warmed memory's are).
    Each turn's and fact's event row has ``write_ms``, how long its ``remember()`` took (the
    other events' rows: NaN), under the same proviso.
    ``policy`` picks the ranking whose metrics the probe rows report: ``"blend"`` is the
    live ``recall()``; another policy re-ranks the same recorded pool.
    ``on_probe(memory, event, now)`` is called at each probe; what it returns is kept in
    ``Replay.extras`` (the equivalence test uses it to call ``recall()`` with other settings).
    ``progress`` reports events replayed (see :class:`Reporter`).
    """
    if not isinstance(conversation, Conversation):
        raise TypeError(f"conversation must be a Conversation, not {type(conversation).__name__}")
    s = check_settings(settings, conversation.meta.get("settings"))
    pol = get_policy(policy)
    judge = s.get("judge", conversation.meta.get("judge"))
    judge = get_judge(judge) if (judge is None or isinstance(judge, str)) else judge
    summarizer = s.get("summarizer", conversation.meta.get("summarizer"))
    summarizer = get_summarizer(summarizer) if (summarizer is None or isinstance(summarizer, str)) else summarizer
    mem_kwargs = {k: s[k] for k in MEMORY_KEYS if s.get(k) is not None and k != "reranker"}
    if s["rerank"] is not None:
        # A memory that reranks as the replay's recalls do stores its late-interaction token vectors
        # with each write, as a live one would, rather than have every probe encode its 240 candidates.
        mem_kwargs["rerank"] = s["rerank"]
    s["mode"] = s["mode"] or DEFAULT_MODE
    # the up-front embedding's own bar shows when progress is on (a callable counts events, not texts)
    bar = progress if progress is None or isinstance(progress, bool) else None
    emb, reranker, store = _cached_models(conversation, embedder, s.get("reranker"), s.get("preset"), cache, bar)
    try:
        db = Vectrix(None, embedder=emb, token_counter=token_counter, judge=judge, reranker=reranker, **mem_kwargs)
        try:
            if cache is False:  # timed: the models load before the first write and recall, not inside them
                db.warm()
            return _Run(conversation, s, db, summarizer, pol, on_probe, progress).run()
        finally:
            db.close()
    finally:
        if store is not None:
            store.close()


def _cached_models(conversation: Conversation, embedder: EmbedderArg, reranker: Any, preset: str | None,
                   cache: Any, progress: bool | None) -> tuple[Any, Any, Any]:
    """The embedder and the reranker a replay uses, through the cache file when there is one
    and the embedder can be cached; the conversation's texts embedded up front. The reranker
    is None where the memory's ``preset`` picks it (late interaction scores from token
    vectors it keeps itself: a file of scores would not save it anything); the accurate
    preset's cross-encoder is given (it becomes the cascade's final stage), so its scores are cached."""
    from ...models.cache import CachedEmbedder, CachedReranker, cacheable, open_cache
    from ...models.rerank import check_reranker

    if reranker is None and preset == "accurate":
        reranker = check_reranker(None)
    emb, rr = check_embedder(embedder), None if reranker is None else check_reranker(reranker)
    store = open_cache(cache) if cache is not False and cacheable(emb) else None
    if store is None:
        return emb, rr, None
    cached = CachedEmbedder(emb, store)
    texts = [t for ev in conversation.events for t in (ev.text, ev.correction, ev.query) if t]
    cached.warm(texts, progress=progress)
    return cached, None if rr is None else CachedReranker(rr, store), store


class _Run:
    """The bookkeeping of one replay: labels to memory ids and back, and what each probe saw."""

    def __init__(self, conv: Conversation, settings: dict[str, Any], db: Vectrix, summarizer: Summarizer,
                 policy: Policy, on_probe: Callable[..., Any] | None, progress: Progress):
        self.conv, self.s, self.db, self.mem = conv, settings, db, db.memory
        self.summarizer, self.policy, self.on_probe, self.progress = summarizer, policy, on_probe, progress
        self.kinds = tuple(settings.get("kinds") or KINDS)
        self.label_ids: dict[str, list[str]] = {}
        self.rows: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.probes: list[dict[str, Any]] = []
        self.pools: list[LabelledPool] = []
        self.rerank_scores: list[np.ndarray | None] = []
        self.reranker = self.mem.pipeline(settings["mode"], settings["rerank"])["rerank"]  # its name, or None
        # the (pool, rerank) floors of the memory's second stage: the depth its pools are recorded to
        stage = self.mem.second_stage(RecallRequest("floors", rerank=settings["rerank"]))
        self.floors, self.smoothed = (stage.pool_floor, stage.rerank_floor), stage.smooth
        self.final = stage.final  # a cascade's last stage (the accurate preset's cross-encoder), else None
        self.final_scores: list[np.ndarray | None] = []
        self.ideals: list[list[float]] = []  # per probe: the grades of every relevant memory that existed
        self.n_sessions: list[int] = []  # per probe: how many answer sessions it names
        self.extras: list[Any] = []
        self.at = 0  # the index of the event being replayed
        self.pool_mode: str | None = None  # the mode the memory recalled with
        # when each memory was last returned by the policy's own ranking (ages from access)
        self.policy_access = AccessLog() if policy.name != "blend" and policy.recency_from == "accessed" else None

    # -------------------------------------------------------------- memories

    def _stored(self, mid: str, t: float, labels: Iterable[str], derived_from: Sequence[str] = ()) -> None:
        r = self.db.get(mid)
        meta = r.metadata
        # which event made it and which deleted it (and how), so two events at one moment
        # (an expire and a consolidate, say) are told apart
        self.rows[mid] = {"id": mid, "labels": sorted(labels), "kind": meta.get(K_KIND),
                          "session": meta.get(K_SESSION), "role": meta.get(K_ROLE), "text": r.text,
                          "tokens": int(self.db.token_counter(r.text)), "created": t, "deleted": None,
                          "superseded_at": None, "superseded_by": None, "derived_from": list(derived_from),
                          "expires": meta.get(K_EXPIRES), "created_by": self.at, "deleted_by": None,
                          "deleted_how": None}
        for lab in labels:
            self.label_ids.setdefault(lab, []).append(mid)
        for old in meta.get(K_SUPERSEDES) or ():
            if old in self.rows and self.rows[old]["superseded_at"] is None:
                self.rows[old]["superseded_at"] = t
                self.rows[old]["superseded_by"] = mid

    def _deleted(self, before: list[str], t: float) -> int:
        n = 0
        for mid in before:
            if mid not in self.db:
                row = self.rows[mid]
                row["deleted"], row["deleted_by"], row["deleted_how"] = t, self.at, self.conv.events[self.at].type
                n += 1
        return n

    def _live(self) -> list[str]:
        return [mid for mid, r in self.rows.items() if r["deleted"] is None]

    def _id_of(self, label: str) -> str | None:
        live = [m for m in self.label_ids.get(label, ()) if self.rows[m]["deleted"] is None]
        return live[0] if live else None

    # -------------------------------------------------------------- events

    def run(self) -> Replay:
        events = self.conv.events
        bar = Reporter(self.progress, len(events), f"replay {self.conv.name}", unit="event")
        live = 0
        try:
            for i, ev in enumerate(events):
                self.at = i
                row: dict[str, Any] = {
                    "index": i, "time": ev.time, "type": ev.type, "label": ev.label, "session": ev.session,
                    "text": ev.text or ev.correction or ev.query, "memory_id": None, "status": "ok", "deleted": 0,
                    "tokens_before": None, "tokens_after": None, "write_ms": np.nan}
                before = len(self.rows)
                getattr(self, f"_{ev.type}")(ev, row)
                live += len(self.rows) - before - row["deleted"]
                row["memories"] = live
                self.events.append(row)
                bar.update()
        finally:
            bar.close()
        pools = padded_pools(self.pools, self.ideals, self.n_sessions, self.rerank_scores, self.s["pool_limit"],
                             self.final_scores)
        meta = {"conversation": self.conv.name, "description": self.conv.description,
                "conversation_meta": {k: v for k, v in self.conv.meta.items() if k != "settings"},
                "embedder": getattr(self.db.embedder, "name", type(self.db.embedder).__name__),
                "policy": self.policy.name, "rerank": self.reranker,
                "mode": self.pool_mode or check_mode(self.s.get("mode")),
                "hybrid_weight": self.mem.hybrid_weight, "preset": self.mem.preset,
                "pool_floor": self.floors[0], "rerank_floor": self.floors[1], "smoothed": self.smoothed,
                "cascade": self.final is not None,
                "low_relevance": _low_relevance(self.mem, self.pool_mode or self.s.get("mode"), self.s.get("rerank"))}
        settings = {k: (_name_of(v) if k in ("judge", "summarizer", "reranker") else v) for k, v in self.s.items()}
        settings.setdefault("judge", _name_of(self.mem.judge))
        settings.setdefault("summarizer", _name_of(self.summarizer))
        return Replay(name=self.conv.name, settings=settings, events=self.events,
                      memories=list(self.rows.values()), probes=self.probes, pools=pools,
                      pool_ids=[p.ids for p in self.pools], meta=meta, extras=self.extras)

    # The event handlers take ``Any``: an event's fields are optional in general, and
    # datasets.check_events has made sure the ones its type needs are there.

    def _turn(self, ev: Any, row: dict[str, Any]) -> None:
        started = time.perf_counter()
        mid = self.mem.remember(ev.text, session=ev.session, role=ev.role, timestamp=ev.time, ttl_days=ev.ttl_days)
        row["write_ms"] = (time.perf_counter() - started) * 1000.0  # the live write's own time
        self._stored(mid, ev.time, [ev.label] if ev.label else [])
        row["memory_id"] = mid

    def _fact(self, ev: Any, row: dict[str, Any]) -> None:
        started = time.perf_counter()
        mid = self.mem.remember(ev.text, session=ev.session, role=ev.role, timestamp=ev.time, pinned=ev.pinned,
                                kind=None if ev.pinned else "fact", ttl_days=ev.ttl_days)
        row["write_ms"] = (time.perf_counter() - started) * 1000.0
        self._stored(mid, ev.time, [ev.label] if ev.label else [])
        row["memory_id"] = mid

    def _feedback(self, ev: Any, row: dict[str, Any]) -> None:
        target = self._id_of(ev.target)
        if target is None:
            row["status"] = f"skipped: the memory labelled {ev.target!r} is gone"
            return
        new = self.mem.feedback(target, ev.outcome, correction=ev.correction, timestamp=ev.time)
        if new is not None:
            self._stored(new, ev.time, [ev.label] if ev.label else [])
            row["memory_id"] = new

    def _forget(self, ev: Any, row: dict[str, Any]) -> None:
        before = self._live()
        if ev.targets:
            ids = [m for lab in ev.targets for m in self.label_ids.get(lab, ())]
            self.mem.forget(ids=ids, now=ev.time)
        else:
            self.mem.forget(session=ev.session, kinds=ev.kinds or ("turn",), older_than=ev.older_than,
                            superseded=ev.superseded, now=ev.time)
        row["deleted"] = self._deleted(before, ev.time)

    def _expire(self, ev: Any, row: dict[str, Any]) -> None:
        before = self._live()
        self.mem.expire(now=ev.time)
        row["deleted"] = self._deleted(before, ev.time)

    def _consolidate(self, ev: Any, row: dict[str, Any]) -> None:
        before = self._live()
        report = self.mem.consolidate(ev.session, self.summarizer, keep_recent=ev.keep_recent,
                                      older_than=ev.older_than, batch_turns=ev.batch_turns, now=ev.time)
        for fid in report.facts:
            src = self.db.get(fid).metadata.get(K_CONSOLIDATED_FROM) or []
            labels = {lab for s in src if s in self.rows for lab in self.rows[s]["labels"]}
            self._stored(fid, ev.time, labels, derived_from=src)
        row["deleted"] = self._deleted(before, ev.time)
        row["tokens_before"], row["tokens_after"] = report.tokens_before, report.tokens_after

    # -------------------------------------------------------------- probes

    def _eligible(self, mid: str, ev: Event) -> bool:
        r = self.rows[mid]
        if r["deleted"] is not None or r["kind"] not in self.kinds:
            return False
        if ev.session is not None and r["session"] != ev.session:
            return False
        meta = self.db.get(mid).metadata
        if meta.get(K_SUPERSEDED_BY) is not None:
            return False
        expires = meta.get(K_EXPIRES)
        return expires is None or expires > ev.time

    def _grade(self, mid: str, ev: Event) -> float:
        return max((ev.relevant.get(lab, 0.0) for lab in self.rows[mid]["labels"]), default=0.0)

    def _probe(self, ev: Any, row: dict[str, Any]) -> None:
        s, t = self.s, ev.time
        limit = ev.limit or s["limit"]
        request = RecallRequest(ev.query, session=ev.session, limit=limit, token_budget=s["token_budget"],
                                score_gap=s["score_gap"], kinds=self.kinds, mode=s["mode"], now=t, rerank=s["rerank"])
        started = time.perf_counter()
        res = self.mem.recall_request(request)
        recall_ms = (time.perf_counter() - started) * 1000.0  # the live recall's own time, nothing around it
        # Reranked: the whole first-stage pool, and the reranker's score of every candidate a
        # recall with some limit up to pool_limit would rerank (see Replay.pool and the sweep).
        # Ages from creation: a ranking that ages from access counts its own accesses.
        widest = max(limit, s["pool_limit"])
        pool = self.mem.pool_for(request.replace(limit=widest, rerank=False, recency_from="created"),
                                 scoring.pool_size(widest, self.floors[0]), first_only=True)
        scores, final = self._stage_scores(pool, ev.query)
        self.rerank_scores.append(scores)
        self.final_scores.append(final)
        if self.on_probe is not None:
            self.extras.append(self.on_probe(self.mem, ev, t))
        sess_bit = {sid: 1 << j for j, sid in enumerate(ev.relevant_sessions[:MAX_SESSION_BITS])}
        pool.limit, pool.positions = limit, None  # cached: ranked for the probe's own limit, off the mirror
        self.pool_mode = pool.mode
        pool = self._label(pool, ev, sess_bit)
        relevant_ids = {m for lab in ev.relevant for m in self.label_ids.get(lab, ())}
        ideal = sorted((self._grade(m, ev) for m in relevant_ids if self._eligible(m, ev)), reverse=True)
        self.pools.append(pool)
        self.ideals.append(ideal)
        self.n_sessions.append(len(sess_bit))
        # the ranking this probe row reports: the live recall, or the policy over the same pool
        if self.policy.name == "blend":
            shipped = res.ids
        else:
            p = resolve_params(self.policy, {}, s)
            log = self.policy_access
            ranked = pool if log is None else pool.aged_from_access(log.seen(pool.ids, t))
            if self.reranker is not None and scores is not None:  # a cascade reorders the policy's top
                ranked = reranked_pool(ranked, scores, self.reranker, floors=self.floors, final=final,
                                       score=lambda kept: self.policy.score(kept, p))
            elif self.smoothed:
                ranked = smoothed_pool(ranked)
            else:
                ranked = ranked.floored()
            shipped = [ranked.ids[j] for j in rank_pool(ranked, self.policy, limit=limit,
                                                      token_budget=s["token_budget"], **p)]
            if log is not None:
                log.returned(shipped, t)
        met, tokens_used = self._metrics(pool, ev, shipped, ideal, sess_bit)
        self.probes.append({
            "probe": len(self.probes), "label": ev.label, "time": t, "query": ev.query, "session": ev.session,
            "category": ev.category, "limit": limit, "pool": len(pool), "n_relevant": len(ideal),
            "relevant": sorted(ev.relevant), "stale": list(ev.stale),
            "recalled_ids": list(res.ids), "recalled_labels": [self.rows[m]["labels"] for m in res.ids],
            "ranked_ids": list(shipped), "tokens": int(tokens_used), **met, "recall_ms": recall_ms, "meta": ev.meta})
        row["status"] = f"recalled {len(res)}"

    def _stage_scores(self, pool: CandidatePool, query: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The second stage's scores of the probe's pool and, in a cascade, the final stage's
        (see :mod:`vxmem.workbench.replay.stage_scores`); None where there is no such stage."""
        if not self.reranker:
            return None, None
        read = read_scores(pool, self.floors, lambda slots: self.mem.stage_scores(query, [pool.ids[j] for j in slots]))
        if self.final is None:
            return read, None
        return read, kept_scores(pool, query, self.floors, read, self.final,
                                 lambda slots: self.mem.in_context([pool.ids[j] for j in slots]))

    def _is_stale(self, mid: str, ev: Event) -> bool:
        return bool(set(ev.stale) & set(self.rows[mid]["labels"]))

    def _label(self, pool: CandidatePool, ev: Event, sess_bit: dict[Any, int]) -> LabelledPool:
        """``pool`` with what the probe says of each candidate: its grade, whether it is stale,
        from another session, and which answer session it belongs to."""
        return LabelledPool.of(
            pool, grade=np.array([self._grade(m, ev) for m in pool.ids], dtype=np.float64),
            stale=np.array([self._is_stale(m, ev) for m in pool.ids], dtype=bool),
            foreign=np.array([ev.session is not None and sx != ev.session for sx in pool.sessions], dtype=bool),
            session_bits=np.array([sess_bit.get(sx, 0) for sx in pool.sessions], dtype=np.int64))

    def _metrics(self, pool: LabelledPool, ev: Event, shipped: list[str], ideal: list[float],
                 sess_bit: dict[Any, int]) -> tuple[dict[str, float], int]:
        """The probe's metrics of the ``shipped`` ids, and the tokens they hold."""
        slot = {m: j for j, m in enumerate(pool.ids)}
        gains = [pool.grade[slot[m]] if m in slot else self._grade(m, ev) for m in shipped]
        stale = [self._is_stale(m, ev) for m in shipped]
        foreign = [ev.session is not None and self.rows[m]["session"] != ev.session for m in shipped]
        bits = [sess_bit.get(self.rows[m]["session"], 0) for m in shipped]
        tokens_used = sum(self.rows[m]["tokens"] for m in shipped)
        met = M.ranked_metrics(
            np.array([gains], dtype=np.float64).reshape(1, -1), np.array([stale], dtype=bool).reshape(1, -1),
            len(ideal), np.array([ideal + [0.0]]), foreign=np.array([foreign], dtype=bool).reshape(1, -1),
            session_bits=np.array([bits], dtype=np.int64).reshape(1, -1), n_sessions=len(sess_bit),
            tokens_used=tokens_used, token_budget=self.s["token_budget"])
        return {k: float(np.ravel(v)[0]) for k, v in met.items()}, tokens_used


def replay_many(conversations: Sequence[Conversation], settings: dict[str, Any] | None = None,
                embedder: EmbedderArg = None, *, n_jobs: int | None = None, progress: Progress = None,
                **kwargs: Any) -> list[Replay]:
    """Replay several conversations, in parallel through joblib; results in input order.

    ``n_jobs`` is joblib's: None (the default) is what the active backend says (one job
    outside a ``joblib.parallel_config``; every worker of a Dask cluster inside
    ``parallel_config(backend="dask")``), ``-1`` every core. With the default embedder each
    worker process builds its own; a given ``embedder`` object is shared with threads
    instead, since embedders hold a lock and models do not pickle cheaply.

    ``progress`` reports conversations done (see :class:`Reporter`); a callable run in this
    process hears each replay's events too, as one count over every conversation.
    """
    from joblib import Parallel, delayed, effective_n_jobs

    conversations = list(conversations)
    par = Parallel(n_jobs=n_jobs, return_as="generator", prefer="threads" if embedder is not None else None)
    if callable(progress) and effective_n_jobs(n_jobs) == 1:
        return _replay_in_turn(conversations, settings, embedder, progress, kwargs)
    bar = Reporter(progress, len(conversations), "replays", unit="conv")
    out = []
    try:
        for r in par(delayed(replay)(c, settings, embedder, **kwargs) for c in conversations):
            out.append(r)
            bar.update()
    finally:
        bar.close()
    return out


def _replay_in_turn(conversations: list[Conversation], settings: dict[str, Any] | None, embedder: EmbedderArg,
                    progress: ProgressFn, kwargs: dict[str, Any]) -> list[Replay]:
    """One after the other in this process, ``progress`` counting events over them all."""
    total = sum(len(c.events) for c in conversations)
    out: list[Replay] = []
    offset = 0
    for c in conversations:
        def told(done: int, _total: int, desc: str, base: int = offset) -> None:
            progress(base + done, total, desc)

        out.append(replay(c, settings, embedder, progress=told, **kwargs))
        offset += len(c.events)
    return out
