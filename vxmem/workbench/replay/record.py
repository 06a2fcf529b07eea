"""The record of one replay: :class:`Replay`, its cached pools, and its ``.npz`` file.

:func:`vxmem.workbench.replay.run.replay` makes one, its probes' pools laid out as arrays by
:func:`padded_pools`; :meth:`Replay.pool` gives a probe's cached
:class:`~vxmem.ranking.pool.LabelledPool` back, :meth:`Replay.rank` ranks every probe under a
policy, and :meth:`Replay.save` / :meth:`Replay.load` write and read it as arrays plus a
JSON part (no pickle). :mod:`vxmem.workbench.sweep.run` re-ranks the pools of many at once.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.checks import check_choice, check_limit
from ...core.keys import KIND_CODES, KINDS
from ...ranking import deep, scoring
from ...ranking.blend import Blend
from ...ranking.pool import AccessLog, LabelledPool
from ...ranking.scoring import HYBRID_WEIGHT, RECENCY_FROM, pool_size
from ..datasets.model import DatasetError
from ..sweep.policies import Policy, get_policy, rank_pool, resolve_params

ScoreFn = Callable[[LabelledPool], np.ndarray]  # a pool blended: a cascade reorders its top

POOL_COLUMNS = ["probe", "slot", "id", "label", "kind", "relevance", "relevance_norm", "age_days", "recency",
                "feedback", "score", "rank", "tokens", "n_feedback", "grade", "stale", "foreign"]
FORMAT = "vxmem-replay/1"


# The pool arrays a replay saves, one row per probe (see Replay).
SLOT_ARRAYS = ("relevance", "dense", "lexical", "ts", "age_days", "tokens", "grade", "stale", "foreign",
               "session_bits", "neighbour_key", "asks")


@dataclass
class Replay:
    """What a replay saw: events, memories over time, probe results and cached pools.

    ``pools`` holds the probes' :class:`~vxmem.ranking.pool.LabelledPool` s as padded arrays (the
    form :meth:`save` writes), one row per probe and one column per pool slot
    (``relevance``, ``dense``, ``lexical``, ``ts``, ``age_days``, ``tokens``, ``kind``,
    ``grade``, ``stale``, ``foreign``, ``session_bits``, ``n``, and ``feedback_signs`` /
    ``feedback_ages`` with a third axis), plus per-probe ``ideal`` grades, ``n_relevant``,
    ``n_sessions``, ``limit`` and ``now``. :meth:`pool` gives one back;
    :mod:`vxmem.workbench.sweep.run` re-ranks them all at once. Each row of ``probes`` holds the
    live recall, its metrics and ``recall_ms``, the milliseconds that recall took (NaN in a
    file saved before replays were timed); each row of ``events`` that wrote a turn or a fact
    has ``write_ms``, the milliseconds its ``remember()`` took (NaN for the other events, and
    in a file saved before writes were timed).
    """

    name: str
    settings: dict[str, Any]
    events: list[dict[str, Any]]
    memories: list[dict[str, Any]]
    probes: list[dict[str, Any]]
    pools: dict[str, np.ndarray]
    pool_ids: list[list[str]]
    meta: dict[str, Any] = field(default_factory=dict)
    extras: list[Any] = field(default_factory=list)
    # A replay narrowed by select(): the whole one and which of its probes these are, so
    # ages counted from access still see the accesses of the probes left out.
    source: Replay | None = field(default=None, repr=False, compare=False)
    source_index: list[int] | None = field(default=None, repr=False, compare=False)

    @property
    def n_probes(self) -> int:
        """How many probes the replay recorded."""
        return len(self.probes)

    def pool(self, i: int, limit: int | None = None) -> LabelledPool:
        """Probe ``i``'s cached pool, unpadded, with the replay's labels (``grade``,
        ``stale``, ``foreign``, ``session_bits``). In a reranked replay, the candidates the
        probe's recall reranked, in first-stage order, their ``relevance`` the reranker's
        score (the recorded arrays hold every candidate of ``pool_limit``); in a cascade, the
        ``limit`` the replay's blend ranks best, with the final stage's score mixed in (ages as
        recorded, even when the replay's ages count from access).

        With ``limit``, only the pool ``recall(limit=limit)`` would have blended: the first
        ``max(4 x limit, 40)`` slots by relevance (of a hybrid pool, the members within that
        limit's two top lists, fused again over them; of a reranked one, the candidates that
        limit reranks).
        """
        n = int(self.pools["n"][i])
        pool_floor, rerank_floor = self.floors
        if limit is not None and self.mode != "hybrid" and self.rerank is None:
            n = min(n, pool_size(limit, pool_floor))
        pool = self.first_stage(i, n)
        if self.rerank is not None:
            final = self.pools["final_score"][i, :n] if self.cascade else None
            return reranked_pool(pool, self.pools["rerank_score"][i, :n], self.rerank, limit, self.floors, final,
                                 self._blend_score)
        if self.smoothed:
            return smoothed_pool(pool, limit)
        if limit is not None and self.mode == "hybrid":  # the members within that limit's two top lists, fused
            valid, fused = scoring.searched_slots(pool.dense, pool.lexical, pool.relevance, n, check_limit(limit),
                                                  True, pool.hybrid_weight, pool_floor)
            slots = np.flatnonzero(valid)
            return pool.take(slots, relevance=fused[slots]).floored()
        return pool.floored()

    def first_stage(self, i: int, n: int | None = None) -> LabelledPool:
        """Probe ``i``'s recorded first-stage pool as gathered (its first ``n`` slots; default:
        all), before any second stage: what :meth:`pool` takes a second stage's cut of."""
        n = int(self.pools["n"][i]) if n is None else n
        row: dict[str, Any] = {k: self.pools[k][i, :n] if k in self.pools else np.full(n, np.nan)
                               for k in SLOT_ARRAYS}  # pools made without neighbour keys have none
        return LabelledPool(
            **row, feedback_signs=self.pools["feedback_signs"][i, :n], feedback_ages=self.pools["feedback_ages"][i, :n],
            kinds=[KINDS[c] for c in self.pools["kind"][i, :n]], ids=list(self.pool_ids[i][:n]),
            limit=int(self.pools["limit"][i]), now=float(self.pools["now"][i]),
            mode=self.mode, hybrid_weight=self.hybrid_weight)

    @property
    def mode(self) -> str:
        """The search mode the probes recalled with (a replay records it resolved; None in
        older files' settings: the one the memory used, else dense)."""
        return self.settings.get("mode") or self.meta.get("mode") or "dense"

    @property
    def floors(self) -> tuple[int, int]:
        """The (pool, rerank) floors the probes recalled with (see
        :func:`vxmem.ranking.scoring.stage_floors`; a file without them: the classic 40 and 20)."""
        return (int(self.meta.get("pool_floor", scoring.POOL_FLOOR)),
                int(self.meta.get("rerank_floor", scoring.RERANK_FLOOR)))

    @property
    def cascade(self) -> bool:
        """Whether the probes recalled with a cascade (the accurate preset): a final stage
        reorders the blend's top limit; ``pools["final_score"]`` holds its scores of every
        candidate the deep stage kept, so any blend's top is scored."""
        return bool(self.meta.get("cascade", False))

    @property
    def smoothed(self) -> bool:
        """Whether the probes recalled with the fast preset's smoothed first stage."""
        return bool(self.meta.get("smoothed", False))

    @property
    def rerank(self) -> str | None:
        """The reranker the probes' pools were reranked with (its name), or None: a reranked
        pool's ``relevance`` is the reranker's score."""
        return self.meta.get("rerank")

    @property
    def hybrid_weight(self) -> float:
        """The hybrid weight the probes recalled with (the default when not set)."""
        w = self.settings.get("hybrid_weight")
        if w is None:
            w = self.meta.get("hybrid_weight")
        return HYBRID_WEIGHT if w is None else float(w)

    @property
    def blend(self) -> Blend:
        """The blend the probes recalled with: the replay's settings, the spec's defaults
        for what they leave out."""
        return Blend.of(self.settings, base=Blend(hybrid_weight=self.hybrid_weight))

    def _blend_score(self, pool: LabelledPool) -> np.ndarray:
        """``pool`` blended as the probes recalled (what a cascade's final stage reorders the top of)."""
        b = self.blend
        return pool.blend(b.half_life_days, b.recency_weight, b.feedback_weight, b.feedback_half_life_days)[0]

    def to_frames(self) -> dict[str, Any]:
        """DataFrames: ``events``, ``memories`` (one row per memory, with when it was
        created, superseded and deleted), ``probes`` (the recorded recall and its metrics)
        and ``pools`` (one row per probe and candidate, with the blend's score parts at the
        replay's settings)."""
        import pandas as pd

        def times(frame: Any, cols: list[str]) -> Any:
            for c in cols:
                if c in frame:
                    frame[c] = pd.to_datetime(frame[c], unit="s", utc=True)
            return frame

        events = times(pd.DataFrame(self.events), ["time"])
        memories = times(pd.DataFrame(self.memories), ["created", "deleted", "superseded_at"])
        probes = times(pd.DataFrame(self.probes), ["time"])
        accessed = self._recorded_accesses() if self.recency_for("blend") == "accessed" else None
        rows = [pd.DataFrame(self._pool_rows(i, accessed)) for i in range(self.n_probes) if self.pools["n"][i]]
        pools = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=POOL_COLUMNS)
        return {"events": events, "memories": memories, "probes": probes, "pools": pools}

    def _recorded_accesses(self) -> list[dict[str, float]]:
        """For each probe, its pool's latest accesses before it: what the live recall of the
        probes before it returned (a replay that ages from access; its memory recorded them so)."""
        whole, index = self.history()
        wanted = {j: k for k, j in enumerate(index)}
        out: list[dict[str, float]] = [{} for _ in index]
        log = AccessLog()
        for j, probe in enumerate(whole.probes):
            now = float(whole.pools["now"][j])
            if j in wanted:
                ids = list(whole.pool_ids[j][: int(whole.pools["n"][j])])
                out[wanted[j]] = dict(zip(ids, log.seen(ids, now).tolist()))
            log.returned(list(probe["recalled_ids"]), now)
        return out

    def _pool_rows(self, i: int, accessed: list[dict[str, float]] | None = None) -> dict[str, Any]:
        """Probe ``i``'s pool as columns, scored at the replay's settings (aged from the
        recorded accesses when ``accessed`` holds them)."""
        pool, s = self.pool(i), self.settings
        if accessed is not None:
            pool = pool.aged_from_access(np.array([accessed[i][m] for m in pool.ids], dtype=np.float64))
        n = len(pool)
        score, rel_norm, rec, fb = pool.blend(s["half_life_days"], s["recency_weight"], s["feedback_weight"],
                                              s["feedback_half_life_days"])
        rank = np.empty(n, dtype=np.int64)
        rank[pool.rank_order(score)] = np.arange(1, n + 1)
        labels = {m["id"]: m["labels"] for m in self.memories}
        return {"probe": i, "slot": np.arange(n), "id": pool.ids, "label": [labels.get(x) for x in pool.ids],
                "kind": pool.kinds, "relevance": pool.raw_relevance, "relevance_norm": rel_norm,
                "age_days": pool.age_days, "recency": rec, "feedback": fb, "score": score, "rank": rank,
                "tokens": pool.tokens,
                "n_feedback": np.count_nonzero(pool.feedback_signs, axis=-1), "grade": pool.grade,
                "stale": pool.stale, "foreign": pool.foreign}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the replay to one ``.npz`` file (arrays plus a JSON part; no pickle)."""
        blob = {"format": FORMAT, "name": self.name, "settings": self.settings, "events": self.events,
                "memories": self.memories, "probes": self.probes, "pool_ids": self.pool_ids, "meta": self.meta}
        data = json.dumps(blob, default=_json_default).encode("utf-8")
        buf = io.BytesIO()
        arrays: dict[str, Any] = dict(self.pools)
        np.savez_compressed(buf, _json=np.frombuffer(data, dtype=np.uint8), **arrays)
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Replay:
        """Read a replay written by :meth:`save`."""
        spath = os.fspath(path)
        try:
            with np.load(spath, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise DatasetError("no such file", path=spath) from None
        except (OSError, ValueError, EOFError, zipfile.BadZipFile):
            # Not numpy's message: it suggests allow_pickle=True, which would run code from the file.
            raise DatasetError("not a saved replay (an .npz archive of arrays, written by vxmem replay --save)",
                               path=spath) from None
        try:
            blob = json.loads(arrays.pop("_json").tobytes().decode("utf-8"))
        except (KeyError, ValueError):
            raise DatasetError("not a saved replay (no JSON part)", path=spath) from None
        if blob.get("format") != FORMAT:
            raise DatasetError(f"not a {FORMAT} file", path=spath)
        for k in ("rerank_score", "neighbour_key", "final_score"):  # saved before reranked replays, deep stages...
            if k not in arrays and "relevance" in arrays:
                arrays[k] = np.full(arrays["relevance"].shape, np.nan)
        probes = [p if "recall_ms" in p else {**p, "recall_ms": math.nan} for p in blob["probes"]]  # saved untimed
        events = [e if "write_ms" in e else {**e, "write_ms": math.nan} for e in blob["events"]]
        return cls(name=blob["name"], settings=blob["settings"], events=events, memories=blob["memories"],
                   probes=probes, pools=arrays, pool_ids=blob["pool_ids"], meta=blob.get("meta", {}))

    def recency_for(self, policy: str | Policy = "blend", recency_from: str | None = None) -> str:
        """What ages count from when ``policy`` ranks this replay's pools: ``recency_from``
        if given, else the replay's own ``recency_from`` setting for the blend (what its
        ``recall()`` used) and the policy's own for the others (``"accessed"`` for LangChain's
        and Generative Agents')."""
        if recency_from is not None:
            return check_choice(recency_from, "recency_from", RECENCY_FROM)
        pol = get_policy(policy)
        if pol.name == "blend":
            return str(self.settings.get("recency_from") or "created")
        return pol.recency_from

    def history(self) -> tuple[Replay, list[int]]:
        """The whole replay these probes come from and their indices in it (this one and
        ``range(n_probes)`` unless narrowed by :meth:`select`)."""
        if self.source is not None and self.source_index is not None:
            return self.source, list(self.source_index)
        return self, list(range(self.n_probes))

    def rank(self, policy: str | Policy = "blend", limit: int | None = None, token_budget: Any = ...,
             recency_from: str | None = None, **params: Any) -> list[list[str]]:
        """Ids each probe's cached pool ships under ``policy`` (default parameters: the replay's).

        With ages counted from access (:meth:`recency_for`), the probes are ranked in order
        and each one's ages count from the last probe whose ranking here returned the memory.

        :param limit: how many per probe (default: each probe's own).
        :param token_budget: the budget to cut to (default: the replay's; None: no budget).
        :param recency_from: ``"created"`` or ``"accessed"`` (default: :meth:`recency_for`).
        :param params: the policy's parameters.
        """
        pol = get_policy(policy)
        p = resolve_params(pol, params, self.settings)
        budget = self.settings["token_budget"] if token_budget is ... else token_budget
        if budget is not None:
            budget = check_limit(budget, "token_budget")
        if limit is not None:
            limit = check_limit(limit)
        accessed = self.recency_for(pol, recency_from) == "accessed"
        whole, index = self.history() if accessed else (self, list(range(self.n_probes)))
        wanted = {j: k for k, j in enumerate(index)}
        out: list[list[str]] = [[] for _ in index]
        log = AccessLog()  # when each memory was last returned
        for i in range(whole.n_probes):  # whole is self unless ages count from access
            # the pool recall() blends for this limit, as the sweep ranks it: relevance is
            # normalised across exactly those candidates
            pool = whole.pool(i, limit=limit if limit is not None else int(whole.pools["limit"][i]))
            if accessed:
                pool = pool.aged_from_access(log.seen(pool.ids, pool.now))
            shipped = [pool.ids[j] for j in rank_pool(pool, pol, limit=limit, token_budget=budget, **p)]
            if accessed:
                log.returned(shipped, pool.now)
            if i in wanted:
                out[wanted[i]] = shipped
        return out

    def select(self, keep: Sequence[bool]) -> Replay:
        """A replay with only the probes where ``keep`` is True (events and memories unchanged).

        Pools, probe rows and their numbering follow, so a sweep of the result scores only
        those probes (``vxmem sweep --categories`` uses it). Ages counted from access still
        see the accesses of every probe (the whole replay is kept beside it, in memory only:
        a narrowed replay that was saved and loaded again has only its own).
        """
        mask = np.asarray(keep, dtype=bool)
        if mask.shape != (self.n_probes,):
            raise ValueError(f"keep must hold one bool per probe ({self.n_probes}), got shape {mask.shape}")
        idx = np.nonzero(mask)[0]
        pools = {k: (v[idx] if v.ndim and v.shape[0] == self.n_probes and k != "pool_limit" else v)
                 for k, v in self.pools.items()}
        probes = [dict(self.probes[i], probe=j) for j, i in enumerate(idx.tolist())]
        whole, index = self.history()
        return Replay(name=self.name, settings=dict(self.settings), events=self.events, memories=self.memories,
                      probes=probes, pools=pools, pool_ids=[self.pool_ids[i] for i in idx.tolist()],
                      meta=dict(self.meta), extras=[self.extras[i] for i in idx.tolist()] if
                      len(self.extras) == self.n_probes else list(self.extras),
                      source=whole, source_index=[index[i] for i in idx.tolist()])

    def __repr__(self) -> str:
        return (f"Replay({self.name!r}, {len(self.events)} events, {len(self.memories)} memories, "
                f"{self.n_probes} probes)")


def padded_pools(pools: Sequence[LabelledPool], ideals: Sequence[Sequence[float]], n_sessions: Sequence[int],
                 rerank_scores: Sequence[np.ndarray | None], pool_limit: int,
                 final_scores: Sequence[np.ndarray | None] = ()) -> dict[str, np.ndarray]:
    """Probes' labelled pools as the padded arrays a :class:`Replay` holds, one row per probe,
    with each probe's ``ideals`` (the grades of every relevant memory that existed),
    ``n_sessions`` (how many answer sessions it names) and ``rerank_scores`` (the reranker's
    score of each candidate, or None), the replay's ``pool_limit`` and, of a cascade, each
    probe's ``final_scores`` (the final stage's score of the candidates it may keep)."""
    probes = len(pools)
    width = max((len(p) for p in pools), default=0)
    events = max((p.feedback_signs.shape[1] if p.feedback_signs.ndim == 2 else 0 for p in pools), default=0)
    relevant = max((len(ideal) for ideal in ideals), default=0)
    grid = (probes, width)
    out = {
        "relevance": np.zeros(grid), "dense": np.zeros(grid), "lexical": np.full(grid, np.nan),
        "ts": np.zeros(grid), "age_days": np.zeros(grid), "tokens": np.zeros(grid, dtype=np.int64),
        "kind": np.zeros(grid, dtype=np.int8), "grade": np.zeros(grid), "stale": np.zeros(grid, bool),
        "foreign": np.zeros(grid, bool), "session_bits": np.zeros(grid, dtype=np.int64),
        "feedback_signs": np.zeros(grid + (events,)), "feedback_ages": np.zeros(grid + (events,)),
        "rerank_score": np.full(grid, np.nan), "neighbour_key": np.full(grid, np.nan),
        "final_score": np.full(grid, np.nan), "asks": np.zeros(grid, bool),
        "n": np.zeros(probes, dtype=np.int64), "ideal": np.zeros((probes, max(relevant, 1))),
        "n_relevant": np.zeros(probes, dtype=np.int64), "n_sessions": np.array(n_sessions, dtype=np.int64),
        "limit": np.array([p.limit for p in pools], dtype=np.int64),
        "now": np.array([p.now for p in pools], dtype=np.float64),
    }
    for i, (p, ideal) in enumerate(zip(pools, ideals)):
        n = len(p)
        out["n"][i] = n
        for k in SLOT_ARRAYS:
            if getattr(p, k) is not None:  # a pool without neighbour keys leaves them NaN
                out[k][i, :n] = getattr(p, k)
        out["kind"][i, :n] = [KIND_CODES[k] for k in p.kinds]
        e = p.feedback_signs.shape[1] if p.feedback_signs.ndim == 2 else 0
        out["feedback_signs"][i, :n, :e] = p.feedback_signs
        out["feedback_ages"][i, :n, :e] = p.feedback_ages
        out["ideal"][i, :len(ideal)] = ideal
        if rerank_scores[i] is not None:
            out["rerank_score"][i, :n] = rerank_scores[i]
        if i < len(final_scores) and final_scores[i] is not None:
            out["final_score"][i, :n] = final_scores[i]
        out["n_relevant"][i] = len(ideal)
    out["pool_limit"] = np.array(pool_limit)
    return out


def as_replays(replays: Replay | Iterable[Replay]) -> list[Replay]:
    """``replays`` (a Replay or a non-empty list of Replays) as a list; TypeError otherwise."""
    out = [replays] if isinstance(replays, Replay) else list(replays)
    if not out or not all(isinstance(r, Replay) for r in out):
        raise TypeError("replays must be a Replay or a non-empty list of Replays")
    return out


def reranked_pool(pool: LabelledPool, scores: np.ndarray, name: str, limit: int | None = None,
                  floors: tuple[int, int] = (scoring.POOL_FLOOR, scoring.RERANK_FLOOR),
                  final: np.ndarray | None = None, score: ScoreFn | None = None) -> LabelledPool:
    """Of a recorded first-stage pool, the candidates a recall with ``limit`` (default: the
    probe's own) reranked, in first-stage order, with the reranker's ``scores`` as their
    relevance (a deep stage's fusion). In a cascade, only the ``limit`` best by ``score`` (of
    the deep stage's pool; default: the blend's defaults), their relevance mixed with the
    ``final`` stage's recorded scores (see :func:`~vxmem.ranking.deep.cascade_slots`)."""
    lim = pool.limit if limit is None else check_limit(limit)
    valid, first = scoring.searched_slots(pool.dense, pool.lexical, pool.relevance, len(pool), lim,
                                          pool.mode == "hybrid", pool.hybrid_weight, floors[0])
    if floors[1] > scoring.RERANK_FLOOR:
        return _deep_pool(pool, scores, name, lim, first, valid, floors[1], final, score)
    slots = np.flatnonzero(scoring.rerank_slots(first, pool.ts, valid, lim, floors[1]))
    slots = slots[scoring.rank_order(first[slots], pool.ts[slots])]
    if np.isnan(scores[slots]).any():
        raise ValueError(f"limit {lim} reranks candidates this replay did not score: replay with pool_limit={lim}")
    return pool.take(slots, relevance=scores[slots], first_stage=first[slots], rerank=name).floored()


def smoothed_pool(pool: LabelledPool, limit: int | None = None) -> LabelledPool:
    """What the fast preset blends of a recorded pool, as ``recall()`` runs it: the pool
    ``limit`` (default: the probe's own) gathered, smoothed over neighbouring turns, its best kept."""
    lim = pool.limit if limit is None else check_limit(limit)
    valid, first = scoring.searched_slots(pool.dense, pool.lexical, pool.relevance, len(pool), lim,
                                          pool.mode == "hybrid", pool.hybrid_weight)
    prev, nxt = pool.neighbours()
    smoothed, kept = deep.read_slots(first, pool.ts, valid, prev, nxt, lim, scoring.RERANK_FLOOR)
    slots = np.flatnonzero(kept)
    return pool.take(slots, relevance=smoothed[slots], first_stage=first[slots]).floored()


def _deep_pool(pool: LabelledPool, scores: np.ndarray, name: str, lim: int, first: np.ndarray, valid: np.ndarray,
               floor: int, final: np.ndarray | None, score: ScoreFn | None) -> LabelledPool:
    """What a deep second stage kept of a recorded pool, as ``recall()`` runs it (see
    :mod:`vxmem.ranking.deep`): its best fused candidates, in slot order (of a cascade, the
    ``lim`` best by ``score``, their relevance mixed with the ``final`` stage's recorded scores)."""
    prev, nxt = pool.neighbours()
    smoothed, read = deep.read_slots(first, pool.ts, valid, prev, nxt, lim, floor)
    if np.isnan(scores[read]).any():
        raise ValueError(f"limit {lim} reads candidates this replay did not score: replay with pool_limit={lim}")
    stage = np.where(read, np.nan_to_num(scores), 0.0)
    fused, kept = deep.fused_slots(stage, smoothed, pool.ts, read, prev, nxt, lim)
    slots = np.flatnonzero(kept)
    deep_pool = pool.take(slots, relevance=fused[slots], first_stage=first[slots], rerank=name,
                          second_stage=stage[slots]).floored()
    if final is None:
        return deep_pool
    last = final[slots]
    if np.isnan(last).any():
        raise ValueError(f"limit {lim} keeps candidates this replay's final stage did not score: replay with "
                         f"pool_limit={lim}")
    blend = get_policy("blend")
    blended = score(deep_pool) if score is not None else blend.score(deep_pool, resolve_params(blend, {}))
    top = np.flatnonzero(deep.cascade_slots(np.broadcast_to(blended, (len(deep_pool),)), deep_pool.ts,
                                            np.ones(len(deep_pool), dtype=bool), lim))
    mixed = deep.cascade_relevance(deep_pool.relevance[top], last[top], np.ones(top.size, dtype=bool))
    return deep_pool.take(top, relevance=mixed, final_stage=last[top])


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if callable(o):
        return getattr(o, "name", type(o).__name__)
    raise TypeError(f"cannot save {type(o).__name__} in a replay")
