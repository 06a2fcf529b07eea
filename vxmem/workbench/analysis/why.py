"""Why a memory was or was not recalled, in the vocabulary of :data:`~vxmem.workbench.analysis.reasons.REASONS`.

- :func:`why_recalled`: for one probe of a replay, every memory that existed then and why
  it was or was not returned, from the cached pool.
- :func:`why_recalled_live`: the same of a live memory (the dashboard's Playground).

Both rank with the very :mod:`vxmem.ranking.scoring` functions ``recall()`` calls, in the order it
calls them: one scoring path (DESIGN rule 1). What existed at a probe is
:class:`~vxmem.workbench.replay.probe_timeline.ProbeTimeline`'s to say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ...core.clock import to_epoch
from ...core.keys import K_EXPIRES, K_KIND, K_SESSION, K_SUPERSEDED_AT, K_SUPERSEDED_BY, K_TS, KINDS
from ...ranking import scoring
from ...ranking.pool import CandidatePool, LabelledPool
from ..replay.probe_timeline import ProbeTimeline, expiry_times, memory_label
from ..replay.record import Replay
from ..replay.stage_cuts import StageCuts, stage_cuts
from ..sweep.grid import as_point
from ..sweep.policies import POLICIES, check_param, resolve_params
from .reasons import REASONS

if TYPE_CHECKING:
    from ...memory.conversation import ConversationMemory
    from ..datasets.model import Conversation

_CHECK_ORDER = ("deleted", "kind_excluded", "other_session", "superseded")  # recorded facts first
SCORE_PARTS = ("relevance_norm", "recency", "feedback")

# ---------------------------------------------------------------------------- why (not) recalled

_WHY_KEYS = frozenset(POLICIES["blend"].params) | {"limit", "token_budget", "score_gap", "hybrid_weight"}
_WHY_COLUMNS = ["probe", "id", "label", "kind", "session", "text", "reason", "rank", "pool_rank", "score",
                "relevance", "relevance_norm", "recency", "feedback", "tokens", "relevant", "stale",
                "superseded_by", "versus", "versus_label", "score_deficit", "d_relevance_norm", "d_recency",
                "d_feedback", "deciding_part", "detail", "created", "expires"]


@dataclass
class _Stages:
    """One pool taken through recall()'s stages (:func:`vxmem.ranking.scoring.ship`), slot by slot."""

    score: np.ndarray
    rel: np.ndarray
    rel_norm: np.ndarray
    rec: np.ndarray
    fb: np.ndarray
    tokens: np.ndarray
    order: np.ndarray
    n_gap: int
    keep: np.ndarray
    limit: int
    gap: float | None
    budget: int | None
    weighted: dict[str, np.ndarray]

    @property
    def top(self) -> np.ndarray:
        return self.order[: self.limit]

    @property
    def shipped(self) -> np.ndarray:
        return self.top[: self.n_gap][self.keep]

    @property
    def pool_rank(self) -> np.ndarray:
        out = np.empty(self.order.size, dtype=np.int64)
        out[self.order] = np.arange(1, self.order.size + 1)
        return out


def _stages(rel, age_days, feedback_signs, feedback_ages, ts, tokens, blend: Mapping[str, float], limit: int,
            gap: float | None, budget: int | None) -> _Stages:
    """Blend a pool's relevance and ship it, with the very functions and order of recall()."""
    score, rel_norm, rec, fb = scoring.score_pool(
        rel, age_days, feedback_signs, feedback_ages, blend["half_life_days"], blend["recency_weight"],
        blend["feedback_weight"], blend["feedback_half_life_days"])
    order, n_gap, keep = scoring.ship(score, ts, tokens, limit, gap, budget)
    fbc = np.clip(fb, -scoring.FEEDBACK_CLAMP, scoring.FEEDBACK_CLAMP)
    weighted = {"relevance_norm": rel_norm, "recency": blend["recency_weight"] * rec,
                "feedback": blend["feedback_weight"] * fbc}
    return _Stages(score=score, rel=np.asarray(rel, dtype=np.float64), rel_norm=rel_norm, rec=rec, fb=fb,
                   tokens=np.asarray(tokens), order=order, n_gap=n_gap, keep=keep, limit=limit, gap=gap,
                   budget=budget, weighted=weighted)


def _slot_parts(st: _Stages, j: int) -> dict[str, Any]:
    """Slot ``j``'s rank in the pool and its score parts."""
    return {"pool_rank": int(st.pool_rank[j]), "score": float(st.score[j]), "relevance": float(st.rel[j]),
            "relevance_norm": float(st.rel_norm[j]), "recency": float(st.rec[j]), "feedback": float(st.fb[j]),
            "tokens": int(st.tokens[j])}


def _ranked_reason(st: _Stages, j: int, ids: Sequence[str], name: Any, row: dict[str, Any]) -> str:
    """Why blended slot ``j`` was or was not shipped; fills ``row``'s rank, detail and, for an
    out-ranked slot, who out-ranked it and by how much of each part. ``name(id)`` labels a memory."""
    shipped = st.shipped
    ship_rank = {int(x): r for r, x in enumerate(shipped, 1)}
    top, n_gap, score, pool_rank = st.top, st.n_gap, st.score, st.pool_rank
    if j in ship_rank:
        row["rank"] = ship_rank[j]
        row["detail"] = f"rank {ship_rank[j]} of {len(shipped)}, score {score[j]:.3f}"
        return "returned"
    if j in {int(x) for x in top[n_gap:]}:
        prev = score[top[n_gap - 1]]
        row["detail"] = (f"rank {pool_rank[j]} is within the limit, but the list was cut after rank {n_gap}, "
                         f"where the score falls {prev - score[top[n_gap]]:.3f} (score_gap {st.gap:g})")
        return "cut_by_score_gap"
    used = 0
    for x, ok in zip(top[:n_gap].tolist(), st.keep.tolist()):
        if ok:
            used += int(st.tokens[x])
        elif x == j:
            row["detail"] = (f"{int(st.tokens[j])} tokens did not fit: {used} of the "
                             f"{st.budget}-token budget were taken by the results above it")
            return "cut_by_budget"
    if shipped.size:
        last = int(shipped[-1])
        parts = {p: float(st.weighted[p][last] - st.weighted[p][j]) for p in SCORE_PARTS}
        part = max(SCORE_PARTS, key=lambda p: parts[p])
        row.update(versus=ids[last], versus_label=name(ids[last]), score_deficit=float(score[last] - score[j]),
                   deciding_part=part, **{f"d_{p}": parts[p] for p in SCORE_PARTS})
        row["detail"] = (f"rank {pool_rank[j]}, below the limit of {st.limit}: {score[last] - score[j]:.3f} "
                         f"short of {row['versus_label']} (rank {ship_rank[last]}), "
                         f"mostly on {part} ({parts[part]:+.3f})")
    else:
        row["detail"] = f"rank {pool_rank[j]}, below the limit of {st.limit}"
    return "out_ranked"


def _why_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as :func:`why_recalled` returns them: typed columns, best reason first."""
    frame = pd.DataFrame(rows, columns=_WHY_COLUMNS)
    frame["reason"] = pd.Categorical(frame["reason"], categories=list(REASONS))
    for c in ("rank", "pool_rank"):
        frame[c] = frame[c].astype("Int64")
    for c in ("score", "relevance", "relevance_norm", "recency", "feedback", "score_deficit", "d_relevance_norm",
              "d_recency", "d_feedback", "created", "expires"):
        frame[c] = pd.to_numeric(frame[c], errors="coerce").astype(np.float64)
    frame = frame.sort_values(["reason", "rank", "pool_rank", "created"], kind="stable", na_position="last")
    return frame.reset_index(drop=True)


def _accessed_before(replay: Replay, i: int, ids: list[str], point: Mapping[str, Any]) -> np.ndarray:
    """Each of ``ids``' latest access before probe ``i``, -inf where none: what the probes
    before it returned at ``point`` (the sweep engine's rankings, which equal the live
    recall's at the replay's own settings)."""
    from ...ranking.pool import AccessLog
    from ..sweep.grid import SWEEP_KEYS
    from ..sweep.run import rankings

    whole, index = replay.history()
    keys = set(POLICIES["blend"].params) | set(SWEEP_KEYS)
    if whole.mode != "hybrid" or whole.rerank is not None:
        keys.discard("hybrid_weight")  # why_recalled reads it only where it changes a ranking
    shipped = rankings(whole, **{k: v for k, v in point.items() if k in keys})
    at = index[i]
    log = AccessLog()
    for j in range(at):
        log.returned(shipped[j], float(whole.pools["now"][j]))
    return log.seen(list(ids), float(whole.pools["now"][at]))


@dataclass
class _Probe:
    """One probe of a replay at a point: its pool (the first ``n_valid`` slots the ones its
    ``limit`` blends, ``slot`` each id's), the stages they went through, where the recorded
    stages left the others out (``stages``), and what the probe asks (``kinds``, ``session``,
    ``relevant`` and ``stale`` labels) against what existed then (``alive``, ``expires``)."""

    i: int
    pool: LabelledPool
    st: _Stages
    n_valid: int
    limit: Any
    mode: str
    slot: dict[str, int]
    alive: ProbeTimeline
    expires: dict[str, float | None]
    kinds: tuple[str, ...]
    session: str | None
    relevant: set[str]
    stale: set[str]
    stages: StageCuts


def why_recalled(replay: Replay, probe: int, params: Mapping[str, Any] | None = None, *,
                 conversation: Conversation | None = None, include_deleted: bool = False) -> pd.DataFrame:
    """For one probe, every memory that existed then and why it was or was not returned.

    One row per memory with its :data:`REASONS` entry and a readable ``detail``: its rank
    and score parts when returned; for one out-ranked, the last result shipped
    (``versus``) and how much of the score gap each part makes (``d_relevance_norm``,
    ``d_recency``, ``d_feedback``, weighted as the blend weighs them; they sum to
    ``score_deficit``). ``params`` overrides the replay's blend parameters, ``limit``,
    ``token_budget``, ``score_gap`` and ``hybrid_weight``; at the replay's own settings the
    returned rows are the ``recall()`` the replay recorded. ``conversation`` (the one
    replayed) supplies per-event ``ttl_days``, which replays do not record;
    ``include_deleted`` adds the memories deleted before the probe.
    """
    if not isinstance(replay, Replay):
        raise TypeError(f"replay must be a Replay, not {type(replay).__name__}")
    if isinstance(probe, bool) or not isinstance(probe, (int, np.integer)) or not 0 <= probe < replay.n_probes:
        raise ValueError(f"probe must be an index in [0, {replay.n_probes}), got {probe!r}")
    point = as_point(params, "params")
    bad = sorted(set(point) - _WHY_KEYS)
    if bad:
        raise ValueError(f"why_recalled has no parameter {bad[0]!r}; known: {', '.join(sorted(_WHY_KEYS))}")
    p = _probe_at(replay, int(probe), point, conversation)
    rows = []
    for m in replay.memories:
        if not p.alive.created(m):
            continue
        is_deleted = p.alive.deleted(m)
        if is_deleted and not include_deleted:
            continue
        rows.append(_recorded_row(p, m, is_deleted))
    return _why_frame(rows)


def _ship_settings(point: Mapping[str, Any], settings: Mapping[str, Any],
                   pool_limit: int) -> tuple[Any, Any, float | None]:
    """The ``limit``, ``token_budget`` and ``score_gap`` a point ships with, checked (the
    replay's ``settings`` and the probe's ``pool_limit`` for what it leaves out)."""
    limit = point.get("limit", pool_limit)
    budget = point.get("token_budget", settings.get("token_budget"))
    gap = point.get("score_gap", settings.get("score_gap"))
    for name, v in (("limit", limit), ("token_budget", budget)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
            raise ValueError(f"{name} must be an int >= 1{' or None' if name != 'limit' else ''}, got {v!r}")
    if gap is not None:
        gap = check_param("score_gap", gap)
        if gap < 0:
            raise ValueError(f"score_gap must be >= 0, got {gap!r}")
    return limit, budget, gap


def _probe_at(replay: Replay, i: int, point: Mapping[str, Any], conversation: Conversation | None) -> _Probe:
    """Probe ``i``'s pool at ``point``, taken through recall()'s stages, and what existed then."""
    s = replay.settings
    blend = resolve_params("blend", {k: v for k, v in point.items() if k in POLICIES["blend"].defaults}, s)
    pool = replay.pool(i)
    limit, budget, gap = _ship_settings(point, s, pool.limit)
    mode = s.get("mode") or "dense"
    n = len(pool.ids)
    floor = replay.floors[0]
    cap = scoring.pool_size(max(int(pool.limit), int(s.get("pool_limit") or pool.limit)), floor)
    size = scoring.pool_size(int(limit), floor)
    full = n >= cap
    if size > cap and full:
        raise ValueError(f"limit {limit} needs pools of {size} candidates; this replay recorded {cap} "
                         f"(replay with pool_limit={limit})")
    if mode == "hybrid" or replay.rerank is not None or replay.smoothed:
        # the members within that limit's two top lists, fused over them (reranked: the ones it reranked)
        pool = replay.pool(i, limit=int(limit))
        n_valid = len(pool.ids)
    else:
        n_valid = min(n, size)

    if replay.recency_for("blend") == "accessed":  # ages from the accesses of the probes before, at this point
        pool = pool.aged_from_access(_accessed_before(replay, i, pool.ids, point))

    # The ranking, with the same functions in the same order as recall() (scoring.ship).
    rel = pool.relevance[:n_valid]
    if mode == "hybrid" and "hybrid_weight" in point and replay.rerank is None:
        w = check_param("hybrid_weight", point["hybrid_weight"])
        assert pool.dense is not None and pool.lexical is not None  # a replay's pool carries both parts
        rel = scoring.fuse_relevance(pool.dense[:n_valid], pool.lexical[:n_valid], w)
    st = _stages(rel, pool.age_days[:n_valid], pool.feedback_signs[:n_valid], pool.feedback_ages[:n_valid],
                 pool.ts[:n_valid], pool.tokens[:n_valid], blend, int(limit), gap, budget)
    pr = replay.probes[i]
    return _Probe(i=i, pool=pool, st=st, n_valid=n_valid, limit=limit, mode=mode,
                  slot={mid: j for j, mid in enumerate(pool.ids)}, alive=ProbeTimeline(replay, i),
                  expires=expiry_times(replay, conversation), kinds=tuple(s.get("kinds") or KINDS),
                  session=pr.get("session"), relevant=set(pr.get("relevant") or ()), stale=set(pr.get("stale") or ()),
                  stages=stage_cuts(replay, i, int(limit), cap))


def _recorded_row(p: _Probe, m: Mapping[str, Any], is_deleted: bool) -> dict[str, Any]:
    """Memory ``m``'s row at the probe: what it is, its score parts if blended, and why."""
    mid = m["id"]
    labels = set(m.get("labels") or ())
    row: dict[str, Any] = {c: None for c in _WHY_COLUMNS}
    row.update(probe=p.i, id=mid, label=memory_label(m, mid) if labels else None, kind=m.get("kind"),
               session=m.get("session"), text=m.get("text"), tokens=m.get("tokens"),
               relevant=bool(labels & p.relevant), stale=bool(labels & p.stale), created=m["created"],
               expires=p.expires.get(mid))
    sup = m.get("superseded_by") if p.alive.superseded(m) else None
    row["superseded_by"] = sup
    j = p.slot.get(mid)
    if j is not None and j < p.n_valid:
        row.update(_slot_parts(p.st, j))
    if j is not None:  # on its stage's own scale (a deep stage's score, not the fusion the blend used)
        row["relevance"] = float(p.pool.raw_relevance[j])
    checks = {
        "deleted": is_deleted,
        "kind_excluded": m.get("kind") not in p.kinds,
        "other_session": p.session is not None and m.get("session") != p.session,
        "superseded": sup is not None,
    }
    reason = next((c for c in _CHECK_ORDER if checks[c]), None)
    if reason == "deleted":
        row["detail"] = f"deleted at {_when(m['deleted'])}"
    elif reason == "kind_excluded":
        row["detail"] = f"a {m.get('kind')}; this recall asks for {', '.join(p.kinds)}"
    elif reason == "other_session":
        row["detail"] = f"in session {m.get('session')!r}; the probe recalls from {p.session!r}"
    elif reason == "superseded":
        row["detail"] = (f"superseded by {memory_label(p.alive.mems.get(sup), str(sup))} at "
                         f"{_when(m.get('superseded_at'))}")
    elif j is not None and j < p.n_valid:
        reason = _ranked_reason(p.st, j, p.pool.ids, lambda x: memory_label(p.alive.mems.get(x), x), row)
    elif j is not None:  # in the recorded pool, past the smaller pool this limit blends
        reason = "outside_pool"
        row["detail"] = (f"not among the {p.n_valid} most relevant eligible memories blended for limit {p.limit} "
                         f"(relevance {row['relevance']:.3f})")
    else:
        reason = _unpooled_reason(p, mid, row)
    row["reason"] = reason
    return row


def _unpooled_reason(p: _Probe, mid: str, row: dict[str, Any]) -> str:
    """Why an eligible memory missing from the pool the blend saw was not returned: the stage
    that left it out, as far as the recorded pool tells; fills ``row``'s detail. Expired only
    when its time to live is known to have run out (a pool's room says nothing of it)."""
    exp = p.expires.get(mid)
    if exp is not None and exp <= p.alive.t:
        row["detail"] = f"its time to live ran out at {_when(exp)}"
        return "expired"
    c = p.stages
    if c.kept is not None and mid in c.kept:  # a cascade: the blend ranked it below what the final stage reads
        row["detail"] = (f"kept by the {c.stage}, but the blend ranked it below the limit of {p.limit} "
                         "that the final stage reorders")
        return "out_ranked"
    if c.read is not None and mid in c.read:
        row["detail"] = (f"read by the {c.stage}, but not among the {c.keep} best it keeps for the blend "
                         f"(limit {p.limit})")
        return "cut_by_second_stage"
    if c.read is not None and mid in c.gathered:
        row["detail"] = (f"gathered by the first stage, but not among the {c.depth} the {c.stage} reads "
                         f"(limit {p.limit})")
        return "cut_by_second_stage"
    if c.room and mid not in c.recorded:
        row["detail"] = ("not in the lexical pool: it shares no word with the query" if p.mode == "lexical" else
                         "not in the first stage's pool, which had room for it: the replay records no reason")
        return "outside_pool"
    row["detail"] = (f"not among the {c.size} most relevant eligible memories the first stage gathers "
                     f"for limit {p.limit}")
    return "outside_pool"


def _when(t: float | None) -> str:
    if t is None:
        return "an unknown time"
    return pd.Timestamp(t, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M")


def why_recalled_live(memory: ConversationMemory, query: str, session: str | None = None, *, limit: int = 10,
                      token_budget: int | None = None, score_gap: float | None = None, kinds=KINDS,
                      mode: str | None = None, now=None, hybrid_weight: float | None = None,
                      labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Why each memory of a live ``memory`` is or is not returned by this ``recall()``.

    The arguments are ``recall()``'s (``labels`` maps memory ids to names for the
    ``label`` column). One row per memory in the collection, with the columns and the
    :data:`REASONS` vocabulary of :func:`why_recalled` (``probe`` is None): the
    candidate pool is the memory's own ``candidate_pool()``, blended and shipped with the
    memory's settings through :func:`vxmem.ranking.scoring.ship`, so the ``returned`` rows are
    exactly what ``recall()`` returns.
    """
    if token_budget is not None and (isinstance(token_budget, bool) or not isinstance(token_budget, int)
                                     or token_budget < 1):
        raise ValueError(f"token_budget must be an int >= 1 or None, got {token_budget!r}")
    if score_gap is not None:
        score_gap = check_param("score_gap", score_gap)
    now_ts = to_epoch(now)
    pool = memory.candidate_pool(query, session=session, limit=limit, kinds=kinds, mode=mode, now=now_ts,
                                 hybrid_weight=hybrid_weight)
    blend = {k: getattr(memory, k) for k in POLICIES["blend"].defaults}
    st = _stages(pool.relevance, pool.age_days, pool.feedback_signs, pool.feedback_ages, pool.ts, pool.tokens,
                 blend, int(pool.limit), score_gap, token_budget)
    live = _Live(pool=pool, st=st, slot={mid: j for j, mid in enumerate(pool.ids)}, names=dict(labels or {}),
                 kinds=tuple(kinds), session=session, now=now_ts)
    docs = {r.id: r for r in memory.db.scan()}
    rows = [_live_row(live, mid, r, int(memory.db.token_counter(r.text))) for mid, r in docs.items()
            if K_KIND in r.metadata]  # a document without a kind is a plain one of the collection, not a memory
    return _why_frame(rows)


@dataclass
class _Live:
    """One live recall: its candidate ``pool`` and the stages it went through (``slot``: each
    id's), the ``names`` a table gives memories, and what the recall asks."""

    pool: CandidatePool
    st: _Stages
    slot: dict[str, int]
    names: dict[str, str]
    kinds: tuple[str, ...]
    session: str | None
    now: float

    def name(self, mid: str) -> str:
        return self.names.get(mid, mid)


def _live_row(live: _Live, mid: str, r: Any, tokens: int) -> dict[str, Any]:
    """The row of live memory ``mid`` (its record ``r``, ``tokens`` long): its score parts if
    in the pool, and why it is or is not returned."""
    meta = r.metadata
    row: dict[str, Any] = {c: None for c in _WHY_COLUMNS}
    row.update(id=mid, label=live.names.get(mid), kind=meta.get(K_KIND), session=meta.get(K_SESSION), text=r.text,
               tokens=tokens, relevant=False, stale=False, created=meta.get(K_TS), expires=meta.get(K_EXPIRES),
               superseded_by=meta.get(K_SUPERSEDED_BY))
    j = live.slot.get(mid)
    if j is not None:
        row.update(_slot_parts(live.st, j))
    exp = meta.get(K_EXPIRES)
    sup = meta.get(K_SUPERSEDED_BY)
    pool, session = live.pool, live.session
    if meta.get(K_KIND) not in live.kinds:
        reason = "kind_excluded"
        row["detail"] = f"a {meta.get(K_KIND)}; this recall asks for {', '.join(live.kinds)}"
    elif session is not None and meta.get(K_SESSION) != session:
        reason = "other_session"
        row["detail"] = f"in session {meta.get(K_SESSION)!r}; the recall is in {session!r}"
    elif sup is not None:
        reason = "superseded"
        row["detail"] = f"superseded by {live.name(sup)} at {_when(meta.get(K_SUPERSEDED_AT))}"
    elif exp is not None and exp <= live.now:
        reason = "expired"
        row["detail"] = f"its time to live ran out at {_when(exp)}"
    elif j is not None:
        reason = _ranked_reason(live.st, j, pool.ids, live.name, row)
    else:
        reason = "outside_pool"
        row["detail"] = (f"not among the {len(pool)} most relevant eligible memories" if
                         (pool.mode != "lexical" or len(pool) >= scoring.pool_size(int(pool.limit)))
                         else "not in the lexical pool: it shares no word with the query")
    row["reason"] = reason
    return row
