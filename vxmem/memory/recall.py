"""Recall's ends: gather a candidate pool from the collection, and rank it into results.

:func:`gather` asks the collection for the mode's top candidates among the eligible
memories and reads what ranking needs (time, feedback, tokens) into a
:class:`~vxmem.ranking.pool.CandidatePool`. The stages between (rerankers, smoothing, the
cut by ``min_relevance``) are in :mod:`vxmem.memory.stages`. :func:`rank` blends the pool with
:meth:`CandidatePool.blend <vxmem.ranking.pool.CandidatePool.blend>`, the one scoring path the
sweep engine uses too, then applies the limit, the score gap and the token budget.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.clock import DAY
from ..core.keys import K_FEEDBACK, K_KIND, K_ROLE, K_SCORING, K_SESSION, K_TS, K_TURN, KINDS, NO_KIND, RESERVED_PREFIX
from ..ranking import deep, scoring
from ..ranking.asking import asking_mask
from ..ranking.blend import Blend
from ..ranking.pool import CandidatePool
from ..store.seam import MemoryStore, MemoryView, Result, Results, SessionArg

_FRAME_KEYS = (K_KIND, K_SESSION, K_ROLE, K_TURN, K_TS)
_NONE: dict[str, Any] = {}  # the metadata of a candidate without feedback, as _feedback_matrix reads it


class MemoryResults(Results):
    """Results of a memory collection: ``to_frame()`` adds each result's score parts (from
    ``_vx_scoring``: ``relevance``, ``relevance_norm``, ``recency``, ``feedback``, ``score``,
    ``age_days``, ``recency_from``, ``mode``, ``first_stage``, ``rerank``, ``fused``,
    ``second_stage``, ``asks_only``, and ``dense`` / ``lexical`` outside dense mode) and its kind, session,
    role, turn and time as columns."""

    def frame_columns(self, result: Result) -> dict[str, Any]:
        """The score parts and the reserved columns of ``result``'s row."""
        meta = result.metadata
        row = dict(meta.get(K_SCORING) or {})
        for k in _FRAME_KEYS:
            if k in meta:
                row[k[len(RESERVED_PREFIX):]] = meta[k]
        return row


def gather(store: MemoryStore, m: MemoryView, query: str, positions: np.ndarray, *, size: int, mode: str,
           hybrid_weight: float, session: SessionArg, now_ts: float, limit: int) -> CandidatePool:
    """The pool of the ``size`` best candidates of ``mode`` among ``positions``, at ``now_ts``
    (lexical scores and feedback as they stood then).

    Call it inside ``store.locked()`` (``m`` is the view it yields): the pool's
    ``positions`` are valid only there.
    """
    cand = store.candidates(query, positions, size, mode, hybrid_weight, session=session, as_of=now_ts)
    pos = cand.positions
    plist = pos.tolist()
    # The columns say what the metadata would (a memory's kind and session; whether it has
    # feedback), so only the few metadata with feedback are read.
    metas: list[Any] = [m.metas[p] if f else _NONE for p, f in zip(plist, m.feedback[pos].tolist())]
    signs, ages = _feedback_matrix(metas, now_ts)
    ts = m.ts[pos]
    codes = m.kind[pos].tolist()
    kinds: list[Any] = [KINDS[c] if c != NO_KIND else m.metas[p].get(K_KIND) for p, c in zip(plist, codes)]
    sessions = [m.session_value(s) if c != NO_KIND else m.metas[p].get(K_SESSION)
                for p, c, s in zip(plist, codes, m.session[pos].tolist())]
    return CandidatePool(
        relevance=cand.relevance, ts=ts, age_days=(now_ts - ts) / DAY, feedback_signs=signs, feedback_ages=ages,
        tokens=m.tokens[pos].copy(), dense=cand.dense, lexical=cand.lexical, ids=[m.ids[p] for p in plist],
        kinds=kinds, sessions=sessions, limit=limit, now=now_ts, mode=mode, hybrid_weight=hybrid_weight,
        neighbour_key=deep.neighbour_keys(sessions, m.turn[pos]), positions=pos,
        asks=asking_mask(m.texts[p] for p in plist))


def _feedback_matrix(metas: list[dict[str, Any]], now_ts: float) -> tuple[np.ndarray, np.ndarray]:
    """(signs, ages in days) of every candidate's feedback, zero-padded to the longest history."""
    graded = [(i, scoring.feedback_events(meta, now_ts)) for i, meta in enumerate(metas)
              if meta.get(K_FEEDBACK)]  # most memories have none
    width = max((len(s) for _, (s, _) in graded), default=0)
    signs = np.zeros((len(metas), width))
    ages = np.zeros((len(metas), width))
    for i, (s, a) in graded:
        signs[i, : len(s)] = s
        ages[i, : len(a)] = a
    return signs, ages


def rank(pool: CandidatePool, m: MemoryView, query: str, blend: Blend, score_gap: float | None,
         token_budget: int | None) -> MemoryResults:
    """The pool blended with ``blend``, best first, cut to ``pool.limit``,
    then at the first ``score_gap`` cliff, then to ``token_budget``.

    Each result's metadata gains ``_vx_scoring``: the parts of its score. ``relevance`` is
    raw: the reranker's score when the pool was reranked (``first_stage`` then holds the
    mode's relevance before it, and ``rerank`` the reranker's name; both None otherwise),
    else the mode's own (cosine, BM25 or the fused hybrid score); ``relevance_norm`` is the
    min-max over the pool of what the blend ranks by. After a deep stage, ``fused`` is its
    fusion with the first stage; in a cascade, ``relevance`` is the final stage's score and
    ``second_stage`` the deep stage's (None otherwise).
    """
    if pool.positions is None or pool.positions.size == 0:
        return MemoryResults([], query=query, token_budget=token_budget)
    score, rel_norm, recency, fb = pool.blend(blend.half_life_days, blend.recency_weight, blend.feedback_weight,
                                              blend.feedback_half_life_days)
    order, n_gap, keep = scoring.ship(score, pool.ts, pool.tokens, pool.limit, score_gap, token_budget)
    top = order[: pool.limit]
    shipped = top[:n_gap][keep]
    items = []
    for i in shipped.tolist():
        r = m.result(int(pool.positions[i]), float(score[i]))
        parts: dict[str, Any] = {
            "relevance": float(pool.raw_relevance[i]), "relevance_norm": float(rel_norm[i]),
            "recency": float(recency[i]), "feedback": float(fb[i]), "score": float(score[i]),
            "age_days": float(pool.age_days[i]), "mode": pool.mode,
            "first_stage": None if pool.first_stage is None else float(pool.first_stage[i]), "rerank": pool.rerank,
            "fused": None if pool.second_stage is None else float(pool.relevance[i]),
            "second_stage": None if pool.final_stage is None or pool.second_stage is None
            else float(pool.second_stage[i]),
            "recency_from": pool.recency_from,
            "asks_only": bool(pool.asks is not None and pool.asks[i]),
        }
        if pool.mode != "dense":  # which relevance parts contributed
            parts.update(_relevance_parts(pool, i))
        r.metadata[K_SCORING] = parts
        items.append(r)
    cut = int(top.size - shipped.size)
    return MemoryResults(items, query=query, truncated=cut > 0, cut_count=cut,
                         token_estimate=int(pool.tokens[shipped].sum()), token_budget=token_budget)


def _relevance_parts(pool: CandidatePool, i: int) -> dict[str, Any]:
    assert pool.dense is not None and pool.lexical is not None
    dense, lexical = float(pool.dense[i]), float(pool.lexical[i])
    parts: dict[str, Any] = {"dense": None if math.isnan(dense) else dense,
                             "lexical": None if math.isnan(lexical) else lexical}
    if pool.mode == "hybrid":
        parts["hybrid_weight"] = pool.hybrid_weight
    return parts
