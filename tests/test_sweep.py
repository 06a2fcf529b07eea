"""Sweeps: cached pools re-ranked for a grid, equal to recall(); the ranking policies."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from vxmem import Blend, ConversationMemory
from vxmem.ranking import scoring
from vxmem.ranking.pool import CandidatePool
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep import engine as sweep_engine
from vxmem.workbench.sweep.policies import POLICIES, rank_pool
from vxmem.workbench.sweep.run import rankings, sweep
from vxmem.workbench.synth import generate

POINTS = [
    {"half_life_days": 7.0, "recency_weight": 0.5, "feedback_weight": 0.25, "feedback_half_life_days": 30.0,
     "limit": 10, "token_budget": None},
    {"half_life_days": 1.0, "recency_weight": 1.0, "feedback_weight": 0.0, "feedback_half_life_days": 5.0,
     "limit": 5, "token_budget": 40},
    {"half_life_days": 60.0, "recency_weight": 0.1, "feedback_weight": 1.0, "feedback_half_life_days": 2.0,
     "limit": 8, "token_budget": None},
    {"half_life_days": 3.0, "recency_weight": 0.0, "feedback_weight": 0.5, "feedback_half_life_days": 30.0,
     "limit": 3, "token_budget": 25},
]
MEMORY_KEYS = ("half_life_days", "recency_weight", "feedback_weight", "feedback_half_life_days")


def _recall_at_every_point(mem, ev, now):
    out = []
    for pt in POINTS:
        other = ConversationMemory(mem.db, **{k: pt[k] for k in MEMORY_KEYS})
        out.append(other.recall(ev.query, session=ev.session, limit=pt["limit"], token_budget=pt["token_budget"],
                                now=now).ids)
    return out


CONVERSATIONS = {
    "feedback_loop": dict(rounds=3),
    "preference_drift": dict(weeks=4, users=1),
    "long_thread": dict(days=14),
    "many_users": dict(users=3),
}


@pytest.fixture(scope="module")
def replays(request):
    emb = request.getfixturevalue("hashing_embedder")
    return {name: replay(generate(name, **size), embedder=emb, on_probe=_recall_at_every_point)
            for name, size in CONVERSATIONS.items()}


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("point", range(len(POINTS)))
def test_sweep_ranking_equals_recall_at_that_moment(replays, name, point):
    rep = replays[name]
    expected = [extra[point] for extra in rep.extras]
    assert rankings(rep, **POINTS[point]) == expected


def test_sweep_point_at_the_replay_settings_reproduces_the_probe_metrics(replays):
    rep = replays["feedback_loop"]
    res = sweep(rep, {"half_life_days": [1.0, 7.0], "recency_weight": [0.5, 0.9]})
    at = res.per_probe.query("half_life_days == 7.0 and recency_weight == 0.5")
    live = rep.to_frames()["probes"]
    for m in ("hit", "recall", "rr", "ndcg", "stale_leak"):
        np.testing.assert_allclose(at[m].to_numpy(), live[m].to_numpy(), equal_nan=True)


def test_sweep_has_one_row_per_point_and_probe_and_one_aggregate_per_point(replays):
    rep = replays["many_users"]
    grid = {"half_life_days": [1, 3, 7, 30], "recency_weight": list(np.linspace(0, 1, 5)), "limit": [1, 5]}
    res = sweep(rep, grid)
    assert len(res.per_probe) == 4 * 5 * 2 * rep.n_probes
    assert len(res.per_point) == 40
    assert (res.per_point["probes"] == rep.n_probes).all()
    assert {"hit", "recall", "mrr", "ndcg", "stale_leak"} <= set(res.per_point.columns)
    assert set(res.params) == {"half_life_days", "recency_weight", "limit"}


def test_hit_can_only_grow_with_the_limit(replays):
    res = sweep(replays["preference_drift"], {"limit": [1, 3, 10]})
    hits = res.per_probe.pivot(index="probe", columns="limit", values="hit").dropna()  # unanswerable: no hit
    assert len(hits) and (hits[1] <= hits[3]).all() and (hits[3] <= hits[10]).all()


def test_tighter_budgets_ship_fewer_tokens(replays):
    res = sweep(replays["long_thread"], {"token_budget": [None, 80, 20]})
    per_probe = res.per_probe
    tokens = per_probe.groupby("token_budget")["tokens"].mean()
    assert tokens[20] <= tokens[80]
    over = per_probe.query("token_budget == 20 and tokens > 20")
    assert (over["n_results"] == 1).all()  # only a lone top result may exceed the budget
    assert len(res.per_point) == 3
    fill = res.per_point.dropna(subset=["token_budget"])["budget_fill"]
    assert fill.notna().all() and res.per_point["budget_fill"].isna().sum() == 1  # no budget, no fill


def test_several_replays_sweep_together(replays):
    both = [replays["many_users"], replays["feedback_loop"]]
    res = sweep(both, {"recency_weight": [0.0, 1.0]})
    assert len(res.per_probe) == 2 * sum(r.n_probes for r in both)
    assert set(res.per_probe["conversation"]) == {"many_users", "feedback_loop"}
    by_cat = res.by_category()
    assert "category" in by_cat.columns


def test_category_split_follows_the_data(replays):
    res = sweep(replays["feedback_loop"], {"recency_weight": [0.5]})
    assert set(res.by_category()["category"]) == {"round_0", "round_1", "round_2", "unanswerable"}


def test_limit_beyond_the_recorded_pool_is_refused(replays):
    with pytest.raises(ValueError, match="limit 20 needs pools of 80 candidates"):
        sweep(replays["many_users"], {"limit": [20]})


def test_bigger_pool_limit_allows_bigger_limits(hashing_embedder):
    conv = generate("many_users", users=2)
    rep = replay(conv, {"pool_limit": 15}, embedder=hashing_embedder,
                 on_probe=lambda mem, ev, now: mem.recall(ev.query, session=ev.session, limit=15, now=now).ids)
    assert rankings(rep, limit=15) == rep.extras


def test_bad_grids_are_refused(replays):
    rep = replays["many_users"]
    with pytest.raises(ValueError, match="cannot sweep 'decay_rate' with policy 'blend'"):
        sweep(rep, {"decay_rate": [0.1]})
    with pytest.raises(ValueError, match=r"half_life_days must be in \(0, inf\)"):
        sweep(rep, {"half_life_days": [0]})
    with pytest.raises(ValueError, match="limit values must be ints >= 1"):
        sweep(rep, {"limit": [0]})
    with pytest.raises(ValueError, match="is empty"):
        sweep(rep, {"recency_weight": []})
    with pytest.raises(ValueError, match="unknown policy"):
        sweep(rep, policy="bm42")


def test_every_policy_sweeps(replays):
    rep = replays["preference_drift"]
    grids = {"blend": {"half_life_days": [1, 7]}, "cosine": {}, "multiplicative": {"half_life_days": [1, 30]},
             "langchain": {"decay_rate": [0.01, 0.1]}, "generative_agents": {"recency_decay": [0.99, 0.995]},
             "memorybank": {"strength_days": [1, 10]}}
    for name, grid in grids.items():
        res = sweep(rep, grid, policy=name)
        assert len(res.per_point) == max(1, len(next(iter(grid.values()), [0])))
        assert (res.per_point["policy"] == name).all()
        assert rankings(rep, policy=name, **{k: v[0] for k, v in grid.items()}) == \
            rep.rank(name, **{k: v[0] for k, v in grid.items()})


# -- policies on one hand-made pool: an old, clearly relevant memory against a fresh, weaker one

POOL = CandidatePool(relevance=np.array([0.9, 0.8]), age_days=np.array([100.0, 0.0]),
                     ts=np.array([0.0, 100 * 86400.0]), feedback_signs=np.zeros((2, 0)), feedback_ages=np.zeros((2, 0)),
                     tokens=np.array([5, 5]), limit=2)


def test_blend_lets_the_clearly_more_relevant_old_memory_win():
    # rel_norm [1, 0] + 0.5 * recency [~0, 1] -> 1.0 vs 0.5
    assert rank_pool(POOL, "blend").tolist() == [0, 1]


def test_cosine_ignores_age():
    assert rank_pool(POOL, "cosine").tolist() == [0, 1]


def test_multiplicative_decay_buries_the_old_memory():
    # 0.9 * 0.5 ** (100 / 7) ~ 0.00004 vs 0.8
    assert rank_pool(POOL, "multiplicative").tolist() == [1, 0]


def test_langchain_adds_hourly_decayed_recency():
    # 0.9 + 0.99 ** 2400 ~ 0.9 vs 0.8 + 1
    assert rank_pool(POOL, "langchain").tolist() == [1, 0]
    # with no decay both gain 1: relevance decides
    assert rank_pool(POOL, "langchain", decay_rate=0.0).tolist() == [0, 1]


def test_generative_agents_tie_goes_to_the_newer():
    # minmax recency [0, 1] + minmax relevance [1, 0]: 1 vs 1, ties to the newer
    assert rank_pool(POOL, "generative_agents").tolist() == [1, 0]


def test_memorybank_retention_grows_with_useful_feedback():
    assert rank_pool(POOL, "memorybank", strength_days=1.0).tolist() == [1, 0]
    # strength 1000 days: exp(-0.1) * 0.9 = 0.81 > 0.8
    assert rank_pool(POOL, "memorybank", strength_days=1000.0).tolist() == [0, 1]
    useful = dataclasses.replace(POOL, feedback_signs=np.array([[1.0] * 9, [0.0] * 9]), feedback_ages=np.zeros((2, 9)))
    # strength 100 * (1 + 9) = 1000 days for the old memory only
    assert rank_pool(useful, "memorybank", strength_days=100.0).tolist() == [0, 1]


def test_every_policy_is_listed():
    assert set(POLICIES) == {"blend", "cosine", "multiplicative", "langchain", "generative_agents", "memorybank"}


def test_batched_rank_order_equals_lexsort_with_ties():
    rng = np.random.default_rng(7)
    score = rng.integers(0, 3, (4, 6, 12)).astype(float)
    ts = rng.integers(0, 3, (6, 12)).astype(float)
    valid = rng.random((4, 6, 12)) > 0.2
    expected = np.lexsort((np.broadcast_to(-ts, score.shape), -np.where(valid, score, -np.inf)), axis=-1)
    np.testing.assert_array_equal(scoring.rank_order(score, ts, valid=valid), expected)
    for b in range(4):
        for p in range(6):
            np.testing.assert_array_equal(
                scoring.rank_order(np.where(valid[b, p], score[b, p], -np.inf), ts[p]), expected[b, p])


def test_batched_fit_budget_equals_one_row_at_a_time():
    tokens = np.array([[5, 3, 4, 1], [9, 1, 1, 1], [1, 1, 1, 9]])
    budgets = np.array([6, 6, 3])
    batched = scoring.fit_budget(tokens, budgets)
    for row, b, got in zip(tokens, budgets, batched):
        np.testing.assert_array_equal(got, scoring.fit_budget(row, int(b)))


def test_hybrid_weight_sweep_equals_recall(hashing_embedder):
    weights = [0.0, 0.3, 1.0]

    def on_probe(mem, ev, now):
        return [ConversationMemory(mem.db).recall(ev.query, session=ev.session, mode="hybrid", hybrid_weight=w,
                                                  now=now).ids for w in weights]

    rep = replay(generate("long_thread", days=14), {"mode": "hybrid"}, embedder=hashing_embedder, on_probe=on_probe)
    for j, w in enumerate(weights):
        assert rankings(rep, hybrid_weight=w) == [e[j] for e in rep.extras]
    assert len(sweep(rep, {"hybrid_weight": weights}).per_point) == 3


def test_lexical_mode_sweep_equals_recall(hashing_embedder):
    def on_probe(mem, ev, now):
        return ConversationMemory(mem.db, recency_weight=0.0).recall(ev.query, session=ev.session, mode="lexical",
                                                                     now=now).ids

    rep = replay(generate("many_users", users=3), {"mode": "lexical"}, embedder=hashing_embedder, on_probe=on_probe)
    assert rankings(rep, recency_weight=0.0) == rep.extras


def test_mode_as_a_grid_dimension_ranks_as_recall_in_each_mode(hashing_embedder):
    from vxmem.workbench.sweep.run import sweep_modes

    points = [{"half_life_days": 3.0, "recency_weight": 0.2}, {"half_life_days": 30.0, "recency_weight": 1.0}]
    modes = ("dense", "lexical", "hybrid")
    conv = generate("preference_drift", users=2)
    reps = {}
    for mode in modes:
        def on_probe(mem, ev, now, mode=mode):
            return [ConversationMemory(mem.db, **p).recall(ev.query, session=ev.session, mode=mode, now=now).ids
                    for p in points]

        reps[mode] = replay(conv, {"mode": mode}, embedder=hashing_embedder, on_probe=on_probe)
        for j, p in enumerate(points):
            assert rankings(reps[mode], **p) == [e[j] for e in reps[mode].extras]
    res = sweep_modes(reps, {"half_life_days": [3.0, 30.0], "recency_weight": [0.2, 1.0], "hybrid_weight": [0.5]})
    assert sorted(res.per_point["mode"].unique()) == sorted(modes)
    assert len(res.per_point) == 4 * 3
    alone = sweep(reps["lexical"], {"half_life_days": [3.0, 30.0], "recency_weight": [0.2, 1.0]}).per_point
    mine = res.per_point[res.per_point["mode"] == "lexical"].reset_index(drop=True)
    np.testing.assert_allclose(mine["mrr"].to_numpy(), alone["mrr"].to_numpy())
    with pytest.raises(ValueError, match="recorded with mode"):
        sweep_modes({"dense": reps["lexical"]})


def test_best_points_are_the_lowest_for_leak_metrics(hashing_embedder):
    rep = replay(generate("preference_drift", users=2), embedder=hashing_embedder)
    res = sweep(rep, {"half_life_days": [0.5, 7.0, 90.0], "recency_weight": [0.0, 2.0]})
    assert res.best("stale_leak", 1)["stale_leak"].iloc[0] == res.per_point["stale_leak"].min()
    assert res.best("ndcg", 1)["ndcg"].iloc[0] == res.per_point["ndcg"].max()


def test_a_hybrid_sweep_of_smaller_limits_equals_recall(hashing_embedder):
    limits = [3, 10, 12, 17, 20]

    def on_probe(mem, ev, now):
        return [mem.recall(ev.query, session=ev.session, limit=lim, now=now).ids for lim in limits]

    rep = replay(generate("knowledge_update"), {"pool_limit": 20}, embedder=hashing_embedder, on_probe=on_probe)
    assert rep.mode == "hybrid" and min(rep.pools["n"]) > scoring.pool_size(12)  # bigger than limit 12 searches
    assert max(rep.pools["n"]) > scoring.pool_size(20)  # a union of two top-80 lists
    for j, lim in enumerate(limits):
        assert rankings(rep, limit=lim) == [e[j] for e in rep.extras], lim


class _Overlap:
    """A deterministic stand-in reranker: the query words a text holds."""

    name = "overlap"

    def __call__(self, query, texts):
        q = set(query.lower().strip("?").split())
        return [len(q & set(t.lower().strip(".!").split())) + 0.01 * (len(t) % 7) for t in texts]


def test_a_reranked_replay_sweeps_exactly_as_recall_with_rerank(hashing_embedder):
    rr = _Overlap()
    points = POINTS + [dict(POINTS[0], limit=lim) for lim in (12, 17, 20)]

    def on_probe(mem, ev, now):
        return [ConversationMemory(mem.db, rerank=True, reranker=rr, **{k: p[k] for k in MEMORY_KEYS}).recall(
            ev.query, session=ev.session, limit=p["limit"], token_budget=p["token_budget"], now=now).ids
            for p in points]

    rep = replay(generate("knowledge_update"), {"rerank": True, "reranker": rr, "pool_limit": 20},
                 embedder=hashing_embedder, on_probe=on_probe)
    assert rep.rerank == "overlap" and rep.mode == "hybrid"
    for j, p in enumerate(points):
        assert rankings(rep, **p) == [e[j] for e in rep.extras], p
    assert len(sweep(rep, {"recency_weight": [0.0, 0.5, 1.0], "limit": [5, 20]}).per_point) == 6
    # the weight it was recorded with is no axis at all: allowed, and the same as leaving it out
    same = sweep(rep, {"hybrid_weight": [rep.hybrid_weight], "recency_weight": [0.0, 1.0]}).per_point
    bare = sweep(rep, {"recency_weight": [0.0, 1.0]}).per_point
    np.testing.assert_allclose(same["ndcg"].to_numpy(), bare["ndcg"].to_numpy())
    plain = replay(generate("knowledge_update"), {"pool_limit": 20}, embedder=hashing_embedder)
    with pytest.raises(ValueError, match="sweep replays recorded with one pipeline together"):
        sweep([rep, plain], {})


SWEPT = {"half_life_days": [1.0, 7.0, 60.0], "recency_weight": [0.0, 0.5, 1.0], "feedback_weight": [0.0, 1.0],
         "token_budget": [None, 30]}


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
@pytest.mark.parametrize("grid", [SWEPT, dict(SWEPT, limit=[3, 10]), {"limit": [5, 12, 20]}])
def test_a_reranked_sweep_ranks_only_the_reranked_slots_to_the_same_metrics(hashing_embedder, monkeypatch, mode,
                                                                              grid):
    # A reranked pool ranks max(2 x limit, 20) of its candidates: the sweep drops the slots no
    # point ranks before scoring (half the work), and every probe's metrics at every point stay.
    rep = replay(generate("knowledge_update"), {"rerank": True, "reranker": _Overlap(), "mode": mode,
                                                "pool_limit": 20}, embedder=hashing_embedder)
    narrowed = []
    real = sweep_engine.compacted

    def spy(s, kmax):
        out = real(s, kmax)
        narrowed.append(out.valid.shape[-1] < s.valid.shape[-1])
        if narrowed[-1]:  # each probe's slots valid at some point first, in slot order (the tie rule's last key)
            union = s.valid.reshape(-1, *s.valid.shape[-2:]).any(axis=0)
            for i, v in enumerate(union):
                n = int(v.sum())
                for k in ("ts", "tokens", "grade", "feedback_signs"):
                    np.testing.assert_array_equal(out.c[k][i, :n], s.c[k][i][v])
                np.testing.assert_array_equal(out.valid[..., i, :n], s.valid[..., i, v])
                np.testing.assert_array_equal(np.asarray(out.relevance)[..., i, :n],
                                              np.asarray(s.relevance)[..., i, v])
                assert not out.valid[..., i, n:].any()
        return out

    monkeypatch.setattr(sweep_engine, "compacted", spy)
    got = sweep(rep, grid).per_probe
    assert narrowed and all(narrowed)  # pools of 80 slots (pool_limit 20); 20 reranked up to limit 10, 40 at 20
    monkeypatch.setattr(sweep_engine, "compacted", lambda s, kmax: s)
    pd.testing.assert_frame_equal(got, sweep(rep, grid).per_probe)


def test_a_sweep_that_ranks_every_recorded_slot_drops_none(hashing_embedder, monkeypatch):
    rep = replay(generate("knowledge_update"), {"mode": "dense"}, embedder=hashing_embedder)
    narrowed = []
    real = sweep_engine.compacted

    def spy(s, kmax):
        out = real(s, kmax)
        narrowed.append(out is not s)
        return out

    monkeypatch.setattr(sweep_engine, "compacted", spy)
    sweep(rep, SWEPT)
    assert narrowed and not any(narrowed)


def test_a_reranked_replays_pool_is_the_pool_its_recall_reranked(hashing_embedder):
    rr = _Overlap()

    def on_probe(mem, ev, now):
        return mem.candidate_pool(ev.query, session=ev.session, limit=10, now=now, rerank=True)

    rep = replay(generate("knowledge_update"), {"rerank": True, "reranker": rr, "pool_limit": 20},
                 embedder=hashing_embedder, on_probe=on_probe)
    for i, live in enumerate(rep.extras):
        cached = rep.pool(i)
        assert cached.ids == live.ids and cached.rerank == live.rerank == "overlap"
        np.testing.assert_allclose(cached.relevance, live.relevance)
        np.testing.assert_allclose(cached.first_stage, live.first_stage)
    assert int(rep.pools["n"].max()) > len(rep.pool(len(rep.extras) - 1))  # the recorded first stage is bigger


def test_a_sweep_over_a_set_of_blends_ranks_as_the_same_grid_of_axes(replays):
    rep = replays["feedback_loop"]
    blends = Blend.grid(half_life_days=[1.0, 7.0], recency_weight=[0.5, 0.9])
    by_blends = sweep(rep, blends).per_point
    by_axes = sweep(rep, {"half_life_days": [1.0, 7.0], "recency_weight": [0.5, 0.9]}).per_point
    keys = ["half_life_days", "recency_weight"]
    merged = by_axes.merge(by_blends, on=keys, suffixes=("", "_b"))
    assert len(merged) == 4
    for m in ("hit", "recall", "ndcg", "stale_leak"):
        np.testing.assert_allclose(merged[m], merged[f"{m}_b"], equal_nan=True)


def test_a_blend_point_ranks_as_recall_with_that_blend(replays):
    rep = replays["preference_drift"]
    pt = POINTS[2]
    blend = Blend(**{k: pt[k] for k in MEMORY_KEYS})
    expected = [extra[2] for extra in rep.extras]
    params = {k: v for k, v in blend.as_dict().items() if k != "hybrid_weight"}  # the replay's own weight
    assert rankings(rep, **params, limit=pt["limit"], token_budget=pt["token_budget"]) == expected
    assert len(sweep(rep, blend).per_point) == 1


def test_a_set_of_blends_that_is_not_a_grid_is_refused(replays):
    with pytest.raises(ValueError, match="not a grid"):
        sweep(replays["feedback_loop"], [Blend(half_life_days=1.0), Blend(half_life_days=7.0, recency_weight=0.9)])
    with pytest.raises(TypeError, match="sweep grid"):
        sweep(replays["feedback_loop"], 3.0)


def test_a_replay_records_its_blend(hashing_embedder):
    rep = replay(generate("feedback_loop", rounds=2), {"half_life_days": 3.0, "recency_weight": 0.2},
                 embedder=hashing_embedder)
    assert rep.blend == Blend(half_life_days=3.0, recency_weight=0.2, hybrid_weight=rep.hybrid_weight)


def test_the_hybrid_weight_of_a_reranked_replay_sweeps_exactly_as_recall(hashing_embedder):
    rr = _Overlap()
    weights = [0.0, 0.3, 1.0]
    limits = [5, 10]

    def on_probe(mem, ev, now):
        return [ConversationMemory(mem.db, rerank=True, reranker=rr).recall(
            ev.query, session=ev.session, limit=lim, hybrid_weight=w, now=now).ids for w in weights for lim in limits]

    rep = replay(generate("knowledge_update"), {"rerank": True, "reranker": rr, "pool_limit": 10},
                 embedder=hashing_embedder, on_probe=on_probe)
    j = 0
    for w in weights:
        for lim in limits:
            assert rankings(rep, hybrid_weight=w, limit=lim) == [e[j] for e in rep.extras], (w, lim)
            j += 1
    assert len(sweep(rep, {"hybrid_weight": weights, "limit": limits}).per_point) == 6


def test_a_reranked_replay_without_every_score_takes_only_its_own_weight(hashing_embedder):
    rr = _Overlap()
    rep = replay(generate("knowledge_update"), {"rerank": True, "reranker": rr, "pool_limit": 10},
                 embedder=hashing_embedder)
    scores, n = rep.pools["rerank_score"], rep.pools["n"]
    last = n > 0
    scores[np.flatnonzero(last), n[last] - 1] = np.nan  # as a replay that scored only what its own weight reranked
    with pytest.raises(ValueError, match="hybrid_weight decides which candidates a reranked pool holds"):
        sweep(rep, {"hybrid_weight": [0.3, 0.7]})
    assert len(sweep(rep, {"hybrid_weight": [rep.hybrid_weight]}).per_point) == 1
