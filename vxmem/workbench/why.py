"""Why a memory was or was not recalled, in the vocabulary of :data:`~vxmem.core.reasons.REASONS`.

- :func:`why_recalled`: for one probe of a replay, every memory that existed then and why
  it was or was not returned, from the cached pool.
- :func:`why_recalled_live`: the same of a live memory (the dashboard's Playground).

Both rank with the very :mod:`vxmem.ranking.scoring` functions ``recall()`` calls, in the order it
calls them: one scoring path (DESIGN rule 1). :class:`_Timeline` (what existed at a probe)
and the point and label helpers are shared with :mod:`vxmem.workbench.analysis`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..core.keys import KINDS
from ..core.reasons import REASONS
from ..ranking import scoring
from .policies import POLICIES, check_param, resolve_params
from .record import Replay

if TYPE_CHECKING:
    from ..memory.conversation import ConversationMemory
    from .datasets.model import Conversation

DAY = 86400.0

_CHECK_ORDER = ("deleted", "kind_excluded", "other_session", "superseded")  # recorded facts first
SCORE_PARTS = ("relevance_norm", "recency", "feedback")


def _point(params: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"{name} must be a dict of parameter -> value, not {type(params).__name__}")
    return dict(params)


def _label(memory: Mapping[str, Any] | None, mid: str) -> str:
    labels = (memory or {}).get("labels") or []
    return ", ".join(labels) if labels else mid


# ---------------------------------------------------------------------------- why (not) recalled


class _Timeline:
    """What existed at probe ``i`` of a replay: creation and deletion against the probe's moment.

    Events at the probe's very timestamp count by their order in the conversation.
    """

    def __init__(self, replay: Replay, i: int):
        self.t = float(replay.probes[i]["time"])
        probe_events = [e["index"] for e in replay.events if e.get("type") == "probe"]
        self.at = probe_events[i] if i < len(probe_events) else None
        self.made = {e["memory_id"]: e["index"] for e in replay.events if e.get("memory_id")}
        self.events = replay.events
        self.mems = {m["id"]: m for m in replay.memories}

    def _before(self, t: float | None, index: int | None) -> bool:
        if t is None:
            return False
        if t != self.t or self.at is None:
            return t <= self.t
        return index is not None and index < self.at

    def _event_at(self, t: float, types: tuple[str, ...]) -> int | None:
        hits = [e["index"] for e in self.events if e.get("type") in types and e.get("time") == t]
        before = [k for k in hits if self.at is None or k < self.at]
        return before[0] if before else (hits[0] if hits else None)

    def created(self, m: Mapping[str, Any]) -> bool:
        idx = self.made.get(m["id"])
        if idx is None and m["created"] == self.t:  # a consolidation's fact: made by that event
            idx = self._event_at(m["created"], ("consolidate",))
        return self._before(m["created"], idx)

    def deleted(self, m: Mapping[str, Any]) -> bool:
        d = m.get("deleted")
        if d is None:
            return False
        idx = self._event_at(d, ("forget", "expire", "consolidate")) if d == self.t else None
        return self._before(d, idx)

    def exists(self, m: Mapping[str, Any] | None) -> bool:
        return m is not None and self.created(m) and not self.deleted(m)

    def superseded(self, m: Mapping[str, Any]) -> bool:
        new = self.mems.get(m.get("superseded_by") or "")
        if new is None:
            at = m.get("superseded_at")
            return at is not None and at <= self.t
        return self.created(new)


_WHY_KEYS = frozenset(POLICIES["blend"].params) | {"limit", "token_budget", "score_gap", "hybrid_weight"}
_WHY_COLUMNS = ["probe", "id", "label", "kind", "session", "text", "reason", "rank", "pool_rank", "score",
                "relevance", "relevance_norm", "recency", "feedback", "tokens", "relevant", "stale",
                "superseded_by", "versus", "versus_label", "score_deficit", "d_relevance_norm", "d_recency",
                "d_feedback", "deciding_part", "detail", "created", "expires"]


def _expiry(replay: Replay, conversation: Conversation | None) -> dict[str, float | None]:
    """When each memory expires: recorded, else its event's ``ttl_days``, else its kind's TTL."""
    ttl_kind = replay.settings.get("ttl_days") or {}
    ev_ttl: dict[str, float] = {}
    if conversation is not None:
        events = conversation.events
        for e in replay.events:
            k = e.get("index")
            ttl = events[k].ttl_days if e.get("memory_id") and isinstance(k, int) and k < len(events) else None
            if ttl is not None:
                ev_ttl[e["memory_id"]] = float(ttl)
    out: dict[str, float | None] = {}
    for m in replay.memories:
        if "expires" in m:
            out[m["id"]] = m["expires"]
            continue
        ttl = ev_ttl.get(m["id"], ttl_kind.get(m.get("kind")) if isinstance(ttl_kind, Mapping) else None)
        out[m["id"]] = None if ttl is None or math.isinf(ttl) else m["created"] + float(ttl) * DAY
    return out


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
    from ..ranking.pool import AccessLog
    from .sweep import SWEEP_KEYS, rankings

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
    point = _point(params, "params")
    bad = sorted(set(point) - _WHY_KEYS)
    if bad:
        raise ValueError(f"why_recalled has no parameter {bad[0]!r}; known: {', '.join(sorted(_WHY_KEYS))}")
    i = int(probe)
    s = replay.settings
    blend = resolve_params("blend", {k: v for k, v in point.items() if k in POLICIES["blend"].defaults}, s)
    pr = replay.probes[i]
    pool = replay.pool(i)
    limit = point.get("limit", pool.limit)
    budget = point.get("token_budget", s.get("token_budget"))
    gap = point.get("score_gap", s.get("score_gap"))
    for name, v in (("limit", limit), ("token_budget", budget)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
            raise ValueError(f"{name} must be an int >= 1{' or None' if name != 'limit' else ''}, got {v!r}")
    if gap is not None:
        gap = check_param("score_gap", gap)
        if gap < 0:
            raise ValueError(f"score_gap must be >= 0, got {gap!r}")
    mode = s.get("mode") or "dense"
    n = len(pool.ids)
    cap = scoring.pool_size(max(int(pool.limit), int(s.get("pool_limit") or pool.limit)))
    size = scoring.pool_size(int(limit))
    full = n >= cap
    if mode == "hybrid" or replay.rerank is not None:
        if size > cap and full:
            raise ValueError(f"limit {limit} needs pools of {size} candidates; this replay recorded {cap} "
                             f"(replay with pool_limit={limit})")
        # the members within that limit's two top lists, fused over them (reranked: the ones it reranked)
        pool = replay.pool(i, limit=int(limit))
        n_valid = len(pool.ids)
    else:
        if size > cap and full:
            raise ValueError(f"limit {limit} needs pools of {size} candidates; this replay recorded {cap} "
                             f"(replay with pool_limit={limit})")
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
    slot = {mid: j for j, mid in enumerate(pool.ids)}

    alive = _Timeline(replay, i)
    mems = alive.mems
    expires = _expiry(replay, conversation)
    kinds = tuple(s.get("kinds") or KINDS)
    session = pr.get("session")
    relevant, stale = set(pr.get("relevant") or ()), set(pr.get("stale") or ())
    rows = []
    for m in replay.memories:
        if not alive.created(m):
            continue
        is_deleted = alive.deleted(m)
        if is_deleted and not include_deleted:
            continue
        mid = m["id"]
        labels = set(m.get("labels") or ())
        row: dict[str, Any] = {c: None for c in _WHY_COLUMNS}
        row.update(probe=i, id=mid, label=_label(m, mid) if labels else None, kind=m.get("kind"),
                   session=m.get("session"), text=m.get("text"), tokens=m.get("tokens"),
                   relevant=bool(labels & relevant), stale=bool(labels & stale), created=m["created"],
                   expires=expires.get(mid))
        sup = m.get("superseded_by") if alive.superseded(m) else None
        row["superseded_by"] = sup
        j = slot.get(mid)
        if j is not None:
            row["relevance"] = float(pool.relevance[j])
        if j is not None and j < n_valid:
            row.update(_slot_parts(st, j))
        checks = {
            "deleted": is_deleted,
            "kind_excluded": m.get("kind") not in kinds,
            "other_session": session is not None and m.get("session") != session,
            "superseded": sup is not None,
        }
        reason = next((c for c in _CHECK_ORDER if checks[c]), None)
        if reason == "deleted":
            row["detail"] = f"deleted at {_when(m['deleted'])}"
        elif reason == "kind_excluded":
            row["detail"] = f"a {m.get('kind')}; this recall asks for {', '.join(kinds)}"
        elif reason == "other_session":
            row["detail"] = f"in session {m.get('session')!r}; the probe recalls from {session!r}"
        elif reason == "superseded":
            row["detail"] = f"superseded by {_label(mems.get(sup), str(sup))} at {_when(m.get('superseded_at'))}"
        elif j is not None and j < n_valid:
            reason = _ranked_reason(st, j, pool.ids, lambda x: _label(mems.get(x), x), row)
        elif j is not None:  # in the recorded pool, past the smaller pool this limit blends
            reason = "outside_pool"
            row["detail"] = (f"not among the {n_valid} most relevant eligible memories blended for limit {limit} "
                             f"(relevance {row['relevance']:.3f})")
        else:
            exp = expires.get(mid)
            if exp is not None and exp <= alive.t:
                reason = "expired"
                row["detail"] = f"its time to live ran out at {_when(exp)}"
            elif not full and mode != "lexical":
                # The pool had room, so every eligible memory was in it: this one was not
                # eligible, and past its TTL is the one way left (a TTL the replay did not record).
                reason = "expired"
                row["detail"] = "not in a pool that had room for it, so past its time to live (inferred)"
            elif not full:
                reason = "outside_pool"
                row["detail"] = "not in the lexical pool: it shares no word with the query"
            else:
                reason = "outside_pool"
                row["detail"] = f"not among the {n_valid} most relevant eligible memories"
        row["reason"] = reason
        rows.append(row)
    return _why_frame(rows)


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
    from ..core.clock import to_epoch
    from ..core.keys import K_EXPIRES, K_KIND, K_SESSION, K_SUPERSEDED_AT, K_SUPERSEDED_BY, K_TS

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
    slot = {mid: j for j, mid in enumerate(pool.ids)}
    names = dict(labels or {})
    docs = {r.id: r for r in memory.db.scan()}
    kinds = tuple(kinds)

    def name(mid: str) -> str:
        return names.get(mid, mid)

    rows = []
    for mid, r in docs.items():
        meta = r.metadata
        if K_KIND not in meta:  # a plain document of the collection, not a memory
            continue
        row: dict[str, Any] = {c: None for c in _WHY_COLUMNS}
        row.update(id=mid, label=names.get(mid), kind=meta.get(K_KIND), session=meta.get(K_SESSION), text=r.text,
                   tokens=int(memory.db.token_counter(r.text)), relevant=False, stale=False,
                   created=meta.get(K_TS), expires=meta.get(K_EXPIRES), superseded_by=meta.get(K_SUPERSEDED_BY))
        j = slot.get(mid)
        if j is not None:
            row.update(_slot_parts(st, j))
        exp = meta.get(K_EXPIRES)
        sup = meta.get(K_SUPERSEDED_BY)
        if meta.get(K_KIND) not in kinds:
            reason = "kind_excluded"
            row["detail"] = f"a {meta.get(K_KIND)}; this recall asks for {', '.join(kinds)}"
        elif session is not None and meta.get(K_SESSION) != session:
            reason = "other_session"
            row["detail"] = f"in session {meta.get(K_SESSION)!r}; the recall is in {session!r}"
        elif sup is not None:
            reason = "superseded"
            row["detail"] = f"superseded by {name(sup)} at {_when(meta.get(K_SUPERSEDED_AT))}"
        elif exp is not None and exp <= now_ts:
            reason = "expired"
            row["detail"] = f"its time to live ran out at {_when(exp)}"
        elif j is not None:
            reason = _ranked_reason(st, j, pool.ids, name, row)
        else:
            reason = "outside_pool"
            row["detail"] = (f"not among the {len(pool)} most relevant eligible memories" if
                             (pool.mode != "lexical" or len(pool) >= scoring.pool_size(int(pool.limit)))
                             else "not in the lexical pool: it shares no word with the query")
        row["reason"] = reason
        rows.append(row)
    return _why_frame(rows)
