"""A/B comparison, honest tuning, inert parameters, Pareto fronts, stale-above-replacement and
why (not) recalled: on hand-built replays whose scores are worked out here by hand, and on
replayed conversations where they must agree with the recorded recall()."""

import math

import numpy as np
import pandas as pd
import pytest

from vxmem.workbench.analysis.questions import (
    ab_compare,
    ab_summary,
    inert_parameters,
    pareto_front,
    replay_stale_above_replacement,
    stale_above_replacement,
    stale_above_replacement_rate,
    stale_replacement_pairs,
)
from vxmem.workbench.analysis.reasons import REASONS
from vxmem.workbench.analysis.why import why_recalled
from vxmem.workbench.replay.record import Replay
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.holdout import ProbeSplit, bootstrap_ci, split_probes, split_report, tune_holdout
from vxmem.workbench.sweep.run import rankings, sweep
from vxmem.workbench.synth import generate

DAY = 86400.0
SETTINGS = {"half_life_days": 7.0, "recency_weight": 0.5, "feedback_weight": 0.25, "feedback_half_life_days": 30.0,
            "limit": 10, "token_budget": None, "score_gap": None, "mode": None, "pool_limit": 10}


def make_replay(probes, memories=None, settings=None, name="hand"):
    """A Replay built by hand: each probe lists its candidate pool, best relevance first.

    A candidate is ``(id, relevance, age_days)`` plus optional ``tokens``, ``grade``,
    ``stale`` and ``feedback`` (a list of ``(sign, age_days)``). Memories default to one
    turn per candidate id, in the probe's session, created ``age_days`` before the probe.
    """
    s = dict(SETTINGS, **(settings or {}))
    P = len(probes)
    N = max(len(p["cands"]) for p in probes)
    E = max([len(c.get("feedback", ())) for p in probes for c in p["cands"]] + [0])
    R = max([sum(1 for c in p["cands"] if c.get("grade", 0) > 0) for p in probes] + [1])
    pools = {k: np.zeros((P, N)) for k in ("relevance", "dense", "ts", "age_days", "grade")}
    pools["lexical"] = np.full((P, N), np.nan)
    pools.update(tokens=np.zeros((P, N), dtype=np.int64), kind=np.zeros((P, N), dtype=np.int8),
                 stale=np.zeros((P, N), bool), foreign=np.zeros((P, N), bool),
                 session_bits=np.zeros((P, N), dtype=np.int64), feedback_signs=np.zeros((P, N, E)),
                 feedback_ages=np.zeros((P, N, E)), n=np.zeros(P, dtype=np.int64), ideal=np.zeros((P, R)),
                 n_relevant=np.zeros(P, dtype=np.int64), n_sessions=np.zeros(P, dtype=np.int64),
                 limit=np.zeros(P, dtype=np.int64), now=np.zeros(P), pool_limit=np.array(s["pool_limit"]))
    rows, mems, ids = [], {}, []
    for i, p in enumerate(probes):
        now = p["now"] * DAY
        cands = p["cands"]
        pools["n"][i] = len(cands)
        pools["limit"][i] = p.get("limit", s["limit"])
        pools["now"][i] = now
        grades = sorted((c.get("grade", 0.0) for c in cands if c.get("grade", 0) > 0), reverse=True)
        pools["ideal"][i, :len(grades)] = grades
        pools["n_relevant"][i] = len(grades)
        for j, c in enumerate(cands):
            pools["relevance"][i, j] = pools["dense"][i, j] = c["rel"]
            pools["age_days"][i, j] = c["age"]
            pools["ts"][i, j] = now - c["age"] * DAY
            pools["tokens"][i, j] = c.get("tokens", 10)
            pools["grade"][i, j] = c.get("grade", 0.0)
            pools["stale"][i, j] = c.get("stale", False)
            for k, (sign, age) in enumerate(c.get("feedback", ())):
                pools["feedback_signs"][i, j, k] = sign
                pools["feedback_ages"][i, j, k] = age
            mems.setdefault(c["id"], {"id": c["id"], "labels": [c["id"]], "kind": "turn",
                                      "session": p.get("session", "u"), "role": "user", "text": f"text {c['id']}",
                                      "tokens": c.get("tokens", 10), "created": now - c["age"] * DAY,
                                      "deleted": None, "superseded_at": None, "superseded_by": None,
                                      "derived_from": []})
        ids.append([c["id"] for c in cands])
        rows.append({"probe": i, "label": f"q{i}", "time": now, "query": f"query {i}", "session": p.get("session", "u"),
                     "category": p.get("category"), "limit": int(pools["limit"][i]),
                     "relevant": sorted(c["id"] for c in cands if c.get("grade", 0) > 0),
                     "stale": sorted(c["id"] for c in cands if c.get("stale")), "recalled_ids": []})
    for m in memories or ():
        mems[m["id"]] = {**mems.get(m["id"], {"labels": [m["id"]], "kind": "turn", "session": "u", "role": "user",
                                              "text": f"text {m['id']}", "tokens": 10, "deleted": None,
                                              "superseded_at": None, "superseded_by": None, "derived_from": []}),
                         **m}
    return Replay(name=name, settings=s, events=[], memories=list(mems.values()), probes=rows, pools=pools,
                  pool_ids=ids)


# Probe 0: the relevant m1 is the most relevant but ten days old; m2 is fresh.
# Probe 1: the relevant m4 is fresh but less relevant than the month-old m5.
# Probe 2: one candidate, relevant. Probe 3: nothing relevant.
AB_PROBES = [
    {"now": 10, "category": "old", "cands": [dict(id="m1", rel=0.9, age=10, grade=1), dict(id="m2", rel=0.5, age=0),
                                             dict(id="m3", rel=0.1, age=3)]},
    {"now": 30, "category": "new", "cands": [dict(id="m5", rel=0.8, age=30), dict(id="m4", rel=0.6, age=0, grade=1),
                                             dict(id="m6", rel=0.4, age=30)]},
    {"now": 31, "category": "new", "cands": [dict(id="m7", rel=0.7, age=1, grade=1)]},
    {"now": 32, "cands": [dict(id="m8", rel=0.3, age=0)]},
]
A = {"recency_weight": 0.0, "feedback_weight": 0.0}
B = {"recency_weight": 1.0, "half_life_days": 1.0, "feedback_weight": 0.0}
# By hand, relevance normalised across each pool:
#   probe 0: m1 1, m2 0.5, m3 0. A ranks by it: m1 first. B adds 0.5 ** age:
#            m1 1 + 0.5**10, m2 0.5 + 1 = 1.5, m3 0 + 0.125: m2, m1, m3 -> m1 at rank 2.
#   probe 1: m5 1, m4 0.5, m6 0. A: m5, m4 -> m4 at rank 2. B: m4 1.5, m5 1 + 0.5**30: m4 first.
NDCG_RANK2 = 1 / math.log2(3)


@pytest.fixture()
def ab_replay():
    return make_replay(AB_PROBES)


def test_ab_compare_puts_each_probe_under_a_and_b_side_by_side(ab_replay):
    f = ab_compare(ab_replay, A, B)
    assert list(f["probe"]) == [0, 1, 2, 3]
    assert list(f["category"]) == ["old", "new", "new", None]
    assert list(f["query"]) == ["query 0", "query 1", "query 2", "query 3"]
    np.testing.assert_array_equal(f["rank_a"], [1, 2, 1, np.nan])
    np.testing.assert_array_equal(f["rank_b"], [2, 1, 1, np.nan])
    np.testing.assert_array_equal(f["rank_delta"], [1, -1, 0, np.nan])
    np.testing.assert_allclose(f["rr_a"], [1, 0.5, 1, np.nan])
    np.testing.assert_allclose(f["rr_delta"], [-0.5, 0.5, 0, np.nan])
    np.testing.assert_allclose(f["ndcg_a"], [1, NDCG_RANK2, 1, np.nan])
    np.testing.assert_allclose(f["ndcg_b"], [NDCG_RANK2, 1, 1, np.nan])
    assert f["ranked_a"][0] == ["m1", "m2", "m3"] and f["ranked_b"][0] == ["m2", "m1", "m3"]
    assert list(f["tokens_a"]) == [30, 30, 10, 10]


def test_ab_compare_limit_cuts_both_sides_and_an_unshipped_relevant_memory_has_no_rank(ab_replay):
    f = ab_compare(ab_replay, A, B, limit=1)
    np.testing.assert_array_equal(f["rank_a"], [1, np.nan, 1, np.nan])
    np.testing.assert_array_equal(f["rank_b"], [np.nan, 1, 1, np.nan])
    np.testing.assert_allclose(f["rr_b"], [0, 1, 1, np.nan])
    assert f["ranked_b"][0] == ["m2"]


def test_ab_summary_counts_wins_losses_and_ties_and_lists_the_biggest_changes(ab_replay):
    s = ab_summary(ab_compare(ab_replay, A, B), "rr", top=5)
    assert (s.probes, s.scored, s.wins, s.losses, s.ties) == (4, 3, 1, 1, 1)
    assert s.mean_a == pytest.approx(2.5 / 3) and s.mean_b == pytest.approx(2.5 / 3)
    assert s.mean_delta == pytest.approx(0.0)
    assert s.delta_lo <= 0.0 <= s.delta_hi
    assert list(s.most_changed["probe"]) == [0, 1]
    assert list(s.most_changed["change"]) == [-0.5, 0.5]
    assert s.as_dict()["wins"] == 1


def test_ab_summary_on_a_leak_counts_less_leaking_as_a_win():
    frame = pd.DataFrame({"probe": [0, 1, 2], "stale_leak_a": [1.0, 0.0, 1.0], "stale_leak_b": [0.0, 0.0, 1.0]})
    s = ab_summary(frame, "stale_leak")
    assert (s.wins, s.losses, s.ties) == (1, 0, 2)


def test_ab_summary_rejects_a_metric_the_frame_lacks(ab_replay):
    with pytest.raises(KeyError, match="metric 'mrr' is not in this comparison"):
        ab_summary(ab_compare(ab_replay, A, B), "mrr")


def test_ab_compare_rejects_a_parameter_the_policy_lacks(ab_replay):
    with pytest.raises(ValueError, match="cannot sweep 'decay_rate' with policy 'blend'"):
        ab_compare(ab_replay, {"decay_rate": 0.1}, B)
    with pytest.raises(TypeError, match="params_a must be a dict"):
        ab_compare(ab_replay, [("recency_weight", 0)], B)


def test_ab_compare_can_put_two_policies_against_each_other(ab_replay):
    f = ab_compare(ab_replay, {}, {}, policy_a="cosine", policy_b="blend")
    np.testing.assert_array_equal(f["rank_a"], [1, 2, 1, np.nan])  # cosine: raw relevance


# ---------------------------------------------------------------------------- honest tuning


def test_bootstrap_ci_of_hand_checkable_samples():
    # Resampling [0, 1] gives means 0, 0.5, 1 with chances 1/4, 1/2, 1/4.
    assert bootstrap_ci([0.0, 1.0], n_boot=4000) == (0.5, 0.0, 1.0)
    assert bootstrap_ci([0.0, 1.0], n_boot=4000, ci=0.4) == (0.5, 0.5, 0.5)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    assert bootstrap_ci([1.0, np.nan, 3.0], n_boot=10)[0] == 2.0
    assert all(math.isnan(x) for x in bootstrap_ci([np.nan]))
    assert bootstrap_ci(np.arange(50.0), seed=3) == bootstrap_ci(np.arange(50.0), seed=3)


@pytest.mark.parametrize("kwargs,message", [(dict(n_boot=0), "n_boot must be an int >= 1"),
                                            (dict(ci=1.0), "ci must be a fraction strictly between 0 and 1")])
def test_bootstrap_ci_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_ci([1.0, 2.0], **kwargs)


def _convs(n, probes_each=2):
    return [make_replay([{"now": 1 + k, "cands": [dict(id=f"{c}m{k}", rel=0.5, age=0, grade=1)]}
                         for k in range(probes_each)], name=f"conv{c}") for c in range(n)]


def test_split_by_conversation_keeps_each_conversation_on_one_side_whatever_the_order():
    reps = _convs(5)
    split = split_probes(reps, holdout=0.4, seed=0)
    assert split.by == "conversation"
    held = split.holdout.reshape(5, 2)
    assert (held[:, 0] == held[:, 1]).all()  # whole conversations
    assert held[:, 0].sum() == 2  # round(0.4 * 5)
    assert not (split.tune & split.holdout).any() and (split.tune | split.holdout).all()
    names = {r.name for r, h in zip(reps, held[:, 0]) if h}
    again = split_probes(reps[::-1], holdout=0.4, seed=0)
    assert {r.name for r, h in zip(reps[::-1], again.holdout.reshape(5, 2)[:, 0]) if h} == names
    assert any(set(np.flatnonzero(split_probes(reps, 0.4, seed=s).holdout)) != set(np.flatnonzero(split.holdout))
               for s in range(1, 6))


def test_split_of_one_conversation_goes_probe_by_probe():
    split = split_probes(_convs(1, probes_each=10), holdout=0.3, seed=0)
    assert split.by == "probe" and split.holdout.sum() == 3 and split.tune.sum() == 7
    assert np.array_equal(split.holdout, split_probes(_convs(1, probes_each=10), 0.3, seed=0).holdout)


@pytest.mark.parametrize("kwargs,message", [(dict(holdout=0.0), "holdout must be a fraction"),
                                            (dict(holdout=1), "holdout must be a fraction"),
                                            (dict(by="user"), "by must be 'conversation' or 'probe'")])
def test_split_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        split_probes(_convs(3), **kwargs)


def test_split_needs_two_probes():
    with pytest.raises(ValueError, match="cannot split 1 probe"):
        split_probes(_convs(1, probes_each=1))


def _hand_split(tune):
    tune = np.array(tune)
    return ProbeSplit(tune=tune, holdout=~tune, by="probe")


def test_split_report_gives_tune_and_holdout_means_with_intervals(ab_replay):
    rep = split_report(ab_replay, A, _hand_split([True, True, False, False]), metrics=("rr",), n_boot=4000)
    rows = {r.subset: r for r in rep.itertuples()}
    # Tune: rr 1 and 0.5 (resampled means 1, 0.75, 0.5). Holdout: rr 1 and an unscorable probe.
    assert (rows["tune"].metric, rows["tune"].mean, rows["tune"].lo, rows["tune"].hi, rows["tune"].probes) == \
        ("mrr", 0.75, 0.5, 1.0, 2)
    assert (rows["holdout"].mean, rows["holdout"].lo, rows["holdout"].hi, rows["holdout"].probes) == (1, 1, 1, 1)


def test_the_point_best_on_tune_probes_is_reported_on_holdout_ones(ab_replay):
    grid = {"half_life_days": [1.0], "recency_weight": [0.0, 1.0], "feedback_weight": [0.0]}
    res = tune_holdout(ab_replay, grid, _hand_split([False, True, True, False]), metric="rr")
    # Tune (probes 1, 2): recency_weight 0 -> (0.5 + 1) / 2, 1 -> (1 + 1) / 2. Holdout (probe 0): 1 and 0.5.
    np.testing.assert_allclose(res.points["tune_mrr"], [0.75, 1.0])
    np.testing.assert_allclose(res.points["holdout_mrr"], [1.0, 0.5])
    assert res.best == {"half_life_days": 1.0, "recency_weight": 1.0, "feedback_weight": 0.0}
    hold = res.report[(res.report["metric"] == "mrr") & (res.report["subset"] == "holdout")].iloc[0]
    assert hold["mean"] == 0.5 and hold["probes"] == 1


def test_tuning_rejects_a_split_of_other_replays(ab_replay):
    with pytest.raises(ValueError, match="split covers 2 probes; these replays have 4"):
        split_report(ab_replay, A, _hand_split([True, False]))


# ---------------------------------------------------------------------------- inert parameters, Pareto


@pytest.mark.parametrize("params,policy,inert", [
    ({"recency_weight": 0.0}, "blend", {"half_life_days"}),
    ({"recency_weight": 0.5, "feedback_weight": 0}, "blend", {"feedback_half_life_days"}),
    ({"recency_weight": 0, "feedback_weight": 0}, "blend", {"half_life_days", "feedback_half_life_days"}),
    ({}, "blend", set()),
    ({"hybrid_weight": 0.3}, "blend", set()),  # recall's default mode is hybrid
    ({"hybrid_weight": 0.3, "mode": "dense"}, "blend", {"hybrid_weight"}),
    ({"hybrid_weight": 0.3, "mode": "hybrid"}, "blend", set()),
    ({"decay_rate": 0.1}, "blend", {"decay_rate"}),
    ({"half_life_days": 3.0}, "cosine", {"half_life_days"}),
    ({"half_life_days": 3.0, "recency_weight": 0.0}, "multiplicative", {"recency_weight"}),
])
def test_inert_parameters_are_flagged_with_a_reason(params, policy, inert):
    out = inert_parameters(params, policy)
    assert set(out) == inert
    assert all(isinstance(v, str) and v for v in out.values())


def test_inert_parameters_name_the_policy_that_owns_a_foreign_parameter():
    assert inert_parameters({"half_life_days": 3.0}, "cosine")["half_life_days"].startswith(
        "a parameter of blend, multiplicative")


def test_feedback_parameters_are_inert_on_replays_without_feedback(ab_replay):
    assert set(inert_parameters({"feedback_weight": 1.0}, replays=ab_replay)) == {"feedback_weight",
                                                                                 "feedback_half_life_days"}
    with_fb = make_replay([{"now": 1, "cands": [dict(id="x", rel=1, age=0, feedback=[(1.0, 0.5)])]}])
    assert inert_parameters({"feedback_weight": 1.0}, replays=with_fb) == {}


def test_inert_parameters_reject_an_unknown_name():
    with pytest.raises(ValueError, match="unknown parameter 'half_life'"):
        inert_parameters({"half_life": 3})


def test_pareto_front_keeps_the_rows_nothing_beats_on_every_objective():
    frame = pd.DataFrame({"ndcg": [0.8, 0.7, 0.6, 0.8, 0.5, np.nan], "stale_leak": [0.1, 0.1, 0.0, 0.1, 0.0, 0.0],
                          "tokens": [100, 100, 300, 100, 400, 50]}, index=list("abcdef"))
    # b loses to a on nDCG alone; e loses to c on nDCG and tokens; a and d tie (neither
    # dominates); c has the least leak; f, with no nDCG (the worst), has the fewest tokens.
    front = pareto_front(frame)
    assert front.to_dict() == {"a": True, "b": False, "c": True, "d": True, "e": False, "f": True}
    assert list(pareto_front(frame, maximize=("ndcg",), minimize=())) == [True, False, False, True, False, False]


def test_pareto_front_names_a_missing_column():
    with pytest.raises(KeyError, match="column 'tokens' is not in the frame"):
        pareto_front(pd.DataFrame({"ndcg": [1.0], "stale_leak": [0.0]}))


def test_a_sweeps_per_point_frame_carries_the_mean_tokens_and_results_shipped(ab_replay):
    res = sweep(ab_replay, {"recency_weight": [0.0, 1.0], "limit": [1, 10]})
    f = res.per_point
    # Every candidate holds 10 tokens: limit 1 ships 10 per probe; limit 10 ships 30, 30, 10, 10.
    assert dict(zip(f["limit"], f["tokens"])) == {1: 10.0, 10: 20.0}
    assert dict(zip(f["limit"], f["n_results"])) == {1: 1.0, 10: 2.0}
    assert len(pareto_front(f, minimize=("stale_leak", "tokens"))) == 4


# ---------------------------------------------------------------------------- stale above its replacement


def test_stale_above_replacement_per_pair_and_as_a_rate():
    stale = [1, 3, np.nan, 2]
    new = [2, 1, 1, np.nan]
    np.testing.assert_array_equal(stale_above_replacement(stale, new), [1.0, 0.0, np.nan, np.nan])
    assert stale_above_replacement_rate(stale, new) == 0.5
    batch = stale_above_replacement_rate([[1, 2], [np.nan, 1]], [[2, 1], [1, np.nan]])
    np.testing.assert_array_equal(batch, [0.5, np.nan])


SUPERSEDED = [{"id": "old", "created": 0.0, "superseded_at": 5 * DAY, "superseded_by": "new"},
              {"id": "new", "created": 5 * DAY}, {"id": "later", "created": 20 * DAY, "superseded_by": "newest",
                                                  "superseded_at": 25 * DAY}, {"id": "newest", "created": 25 * DAY}]


def test_superseded_by_pairs_are_ranked_only_where_the_ranking_holds_both():
    rep = make_replay([{"now": 10, "cands": [dict(id="new", rel=0.9, age=5), dict(id="x", rel=0.1, age=1)]}],
                      memories=SUPERSEDED)
    # At day 10 "later" and "newest" do not exist yet: one pair, old -> new.
    pairs = stale_replacement_pairs(rep, ranked=[["old", "new", "x"]])
    assert pairs[["stale", "replacement", "stale_rank", "replacement_rank", "above"]].values.tolist() == [
        ["old", "new", 1.0, 2.0, 1.0]]
    assert replay_stale_above_replacement(rep, ranked=[["x", "new", "old"]]) == 0.0
    # The recorded pool leaves the superseded memory out, as recall() does: nothing ranked.
    default = stale_replacement_pairs(rep)
    assert math.isnan(default["stale_rank"].iloc[0]) and math.isnan(default["above"].iloc[0])
    assert math.isnan(replay_stale_above_replacement(rep))


def test_probe_pairs_rank_a_stale_statement_against_the_relevant_one_under_each_parameter_set():
    rep = make_replay([{"now": 20, "cands": [dict(id="old", rel=0.9, age=20, stale=True),
                                             dict(id="new", rel=0.6, age=0, grade=1),
                                             dict(id="filler", rel=0.1, age=5)]}])
    # Normalised relevance: old 1, new 0.625, filler 0. Without recency old comes first;
    # with recency_weight 1 and a one-day half-life new scores 1.625 against old's 1 + 0.5**20.
    assert replay_stale_above_replacement(rep, pairs="probe", **A) == 1.0
    assert replay_stale_above_replacement(rep, pairs="probe", **B) == 0.0
    pairs = stale_replacement_pairs(rep, pairs="probe", **B)
    assert pairs[["stale", "replacement", "stale_rank", "replacement_rank"]].values.tolist() == [
        ["old", "new", 2.0, 1.0]]
    # The default ranking is what ships: with a limit of 1 one side of the pair is never ranked.
    assert math.isnan(replay_stale_above_replacement(rep, pairs="probe", limit=1, **B))


def test_stale_pairs_reject_a_ranking_of_the_wrong_length(ab_replay):
    with pytest.raises(ValueError, match="ranked has 1 lists; the replay has 4 probes"):
        stale_replacement_pairs(ab_replay, ranked=[["m1"]])
    with pytest.raises(ValueError, match="pairs must be 'superseded_by' or 'probe'"):
        stale_replacement_pairs(ab_replay, pairs="labels")
    gapped = make_replay(AB_PROBES, settings={"score_gap": 0.2})
    with pytest.raises(ValueError, match="do not apply score_gap"):
        stale_replacement_pairs(gapped)


# ---------------------------------------------------------------------------- why (not) recalled

WHY_SETTINGS = {"limit": 3, "token_budget": 25, "kinds": ("turn", "pinned"), "ttl_days": {"turn": 20}}
WHY_POOL = [dict(id="a", rel=0.9, age=1, feedback=[(1.0, 2.0)]), dict(id="b", rel=0.8, age=2),
            dict(id="c", rel=0.7, age=0.5), dict(id="d", rel=0.2, age=10, tokens=5)]
WHY_MEMORIES = [
    {"id": "e", "session": "v", "created": 25 * DAY},                                  # another session
    {"id": "f", "created": 20 * DAY, "superseded_by": "a", "superseded_at": 29 * DAY},  # replaced by a
    {"id": "g", "kind": "fact", "created": 22 * DAY},                                  # not a kind recalled
    {"id": "h", "created": 5 * DAY},                                                   # 25 days old, TTL 20
    {"id": "i", "created": 3 * DAY, "deleted": 20 * DAY},                              # gone before the probe
    {"id": "j", "created": 31 * DAY},                                                  # after the probe
    {"id": "k", "created": 28 * DAY},                                                  # missing, no TTL: not expired
]
# By hand (probe at day 30; half-life 7, recency weight 0.5, feedback weight 0.25 and half-life 30):
REL_NORM = {"a": 1.0, "b": 0.6 / 0.7, "c": 0.5 / 0.7, "d": 0.0}
RECENCY = {"a": 0.5 ** (1 / 7), "b": 0.5 ** (2 / 7), "c": 0.5 ** (0.5 / 7), "d": 0.5 ** (10 / 7)}
FEEDBACK = {"a": 0.5 ** (2 / 30), "b": 0.0, "c": 0.0, "d": 0.0}
SCORE = {m: REL_NORM[m] + 0.5 * RECENCY[m] + 0.25 * FEEDBACK[m] for m in "abcd"}
# a 1.692, b 1.267, c 1.190, d 0.186: a, b, c make the limit of 3; a and b take 20 of the
# 25 tokens, so c (10 tokens) does not fit; d is out-ranked by the last shipped, b.


@pytest.fixture()
def why_replay():
    return make_replay([{"now": 30, "cands": WHY_POOL}], memories=WHY_MEMORIES, settings=WHY_SETTINGS)


def test_every_memory_that_existed_gets_one_reason(why_replay):
    f = why_recalled(why_replay, 0)
    assert dict(zip(f["id"], f["reason"])) == {
        "a": "returned", "b": "returned", "c": "cut_by_budget", "d": "out_ranked", "k": "outside_pool",
        "h": "expired", "f": "superseded", "e": "other_session", "g": "kind_excluded"}
    assert set(f["reason"].cat.categories) == set(REASONS)
    assert list(f["rank"][:2]) == [1, 2] and f["rank"][2:].isna().all()


def test_returned_and_ranked_memories_carry_their_score_parts(why_replay):
    f = why_recalled(why_replay, 0).set_index("id")
    for m in "abcd":
        assert f.loc[m, "score"] == pytest.approx(SCORE[m])
        assert f.loc[m, "relevance_norm"] == pytest.approx(REL_NORM[m])
        assert f.loc[m, "recency"] == pytest.approx(RECENCY[m])
        assert f.loc[m, "feedback"] == pytest.approx(FEEDBACK[m])
    assert list(f.loc[["a", "b", "c", "d"], "pool_rank"]) == [1, 2, 3, 4]
    assert math.isnan(f.loc["e", "score"])


def test_an_out_ranked_memory_says_by_whom_and_by_how_much_of_each_part(why_replay):
    d = why_recalled(why_replay, 0).set_index("id").loc["d"]
    assert d["versus"] == "b" and d["versus_label"] == "b"
    assert d["score_deficit"] == pytest.approx(SCORE["b"] - SCORE["d"])
    assert d["d_relevance_norm"] == pytest.approx(REL_NORM["b"])
    assert d["d_recency"] == pytest.approx(0.5 * (RECENCY["b"] - RECENCY["d"]))
    assert d["d_feedback"] == 0.0
    assert d["d_relevance_norm"] + d["d_recency"] + d["d_feedback"] == pytest.approx(d["score_deficit"])
    assert d["deciding_part"] == "relevance_norm"
    assert "below the limit of 3" in d["detail"] and "short of b (rank 2)" in d["detail"]


def test_budget_supersession_and_expiry_details_name_their_cause(why_replay):
    f = why_recalled(why_replay, 0).set_index("id")
    assert f.loc["c", "detail"] == "10 tokens did not fit: 20 of the 25-token budget were taken by the results above it"
    assert f.loc["f", "superseded_by"] == "a" and f.loc["f", "detail"].startswith("superseded by a at 1970-01-30")
    assert f.loc["h", "expires"] == 25 * DAY and "ran out at 1970-01-26" in f.loc["h", "detail"]
    # k has no time to live: missing from a pool with room says nothing of expiry
    assert f.loc["k", "reason"] == "outside_pool" and "records no reason" in f.loc["k", "detail"]


def test_deleted_memories_appear_only_when_asked(why_replay):
    f = why_recalled(why_replay, 0, include_deleted=True).set_index("id")
    assert f.loc["i", "reason"] == "deleted" and "j" not in f.index


def test_score_gap_cuts_at_the_first_cliff(why_replay):
    f = why_recalled(why_replay, 0, {"score_gap": 0.3}).set_index("id")
    # Sorted scores 1.692, 1.267, 1.190: the first drop (0.424) is over 0.3, so only a ships.
    assert f.loc["a", "reason"] == "returned"
    assert f.loc[["b", "c"], "reason"].tolist() == ["cut_by_score_gap", "cut_by_score_gap"]
    assert f.loc["d", "versus"] == "a" and f.loc["d", "score_deficit"] == pytest.approx(SCORE["a"] - SCORE["d"])


def test_other_parameters_re_rank_the_same_pool(why_replay):
    f = why_recalled(why_replay, 0, {"token_budget": None, "limit": 2, "recency_weight": 0.0}).set_index("id")
    assert f.loc[["a", "b", "c", "d"], "reason"].tolist() == ["returned", "returned", "out_ranked", "out_ranked"]
    assert f.loc["c", "score"] == pytest.approx(REL_NORM["c"] + 0.25 * FEEDBACK["c"])


def test_a_smaller_limit_blends_a_smaller_pool_and_a_full_pool_hides_the_rest():
    cands = [dict(id=f"p{j:02d}", rel=1.0 - j / 100, age=1) for j in range(44)]
    rep = make_replay([{"now": 30, "limit": 11, "cands": cands}], settings={"pool_limit": 11},
                      memories=[{"id": "far", "created": 29 * DAY}])
    f = why_recalled(rep, 0, {"limit": 3}).set_index("id")
    # limit 3 blends the 40 most relevant; p40..p43 were recorded (for limit 11) but are past it.
    assert f.loc["p40", "reason"] == "outside_pool" and f.loc["p40", "relevance"] == pytest.approx(0.6)
    assert f.loc["p39", "reason"] == "out_ranked"
    # The recorded pool was full (44 = max(4 x 11, 40)): a memory missing from it was less relevant.
    assert f.loc["far", "reason"] == "outside_pool" and f.loc["far", "detail"].startswith("not among the 40")
    with pytest.raises(ValueError, match="limit 12 needs pools of 48 candidates; this replay recorded 44"):
        why_recalled(rep, 0, {"limit": 12})


@pytest.mark.parametrize("probe,params,error,message", [
    (5, None, ValueError, r"probe must be an index in \[0, 1\)"),
    (0, {"decay_rate": 0.1}, ValueError, "why_recalled has no parameter 'decay_rate'"),
    (0, {"limit": 0}, ValueError, "limit must be an int >= 1"),
    (0, {"score_gap": -1.0}, ValueError, "score_gap must be >= 0"),
    (0, {"recency_weight": "high"}, TypeError, "recency_weight must be a number"),
])
def test_why_recalled_rejects_bad_arguments(why_replay, probe, params, error, message):
    with pytest.raises(error, match=message):
        why_recalled(why_replay, probe, params)


# ---------------------------------------------------------------------------- against recorded replays

LIVE = {"limit": 4, "token_budget": 40, "score_gap": 0.5}


@pytest.fixture(scope="module")
def recorded(request):
    emb = request.getfixturevalue("word_embedder")
    convs = {"contradicting_facts": generate("contradicting_facts", people=3, updates=2),
             "long_thread": generate("long_thread", days=10, per_day=3, consolidate_every=5),
             "many_users": generate("many_users", users=3)}
    return {k: (c, replay(c, LIVE, emb), replay(c, {"limit": 4}, emb)) for k, c in convs.items()}


@pytest.mark.parametrize("name", ["contradicting_facts", "long_thread", "many_users"])
def test_why_recalled_returns_exactly_what_recall_returned(recorded, name):
    conv, rep, _ = recorded[name]
    assert rep.n_probes > 0
    for i, probe in enumerate(rep.probes):
        f = why_recalled(rep, i, conversation=conv)
        shipped = f[f["reason"] == "returned"].sort_values("rank")["id"].tolist()
        assert shipped == probe["recalled_ids"], (name, i)
        assert f["id"].is_unique and f["reason"].notna().all()


@pytest.mark.parametrize("name", ["contradicting_facts", "long_thread", "many_users"])
def test_why_recalled_at_other_parameters_ships_what_the_sweep_ships(recorded, name):
    _, _, rep = recorded[name]
    point = {"half_life_days": 2.0, "recency_weight": 1.0, "limit": 3, "token_budget": 30}
    expected = rankings(rep, **point)
    for i in range(rep.n_probes):
        f = why_recalled(rep, i, point)
        assert f[f["reason"] == "returned"].sort_values("rank")["id"].tolist() == expected[i]


def test_superseded_and_expired_memories_are_named_as_such(recorded):
    _, rep, _ = recorded["contradicting_facts"]
    mems = {m["id"]: m for m in rep.memories}
    for i, probe in enumerate(rep.probes):
        f = why_recalled(rep, i)
        replaced = {m for m in f["id"] if mems[m]["superseded_by"] and mems[m]["superseded_at"] <= probe["time"]}
        assert set(f.loc[f["reason"] == "superseded", "id"]) == replaced
        assert f.loc[f["reason"] == "superseded", "superseded_by"].notna().all()
    assert any(m["superseded_by"] for m in rep.memories)
    conv, rep, _ = recorded["long_thread"]
    expired = [i for i, p in enumerate(rep.probes) if p["category"] == "expired"]
    assert expired
    for i in expired:
        f = why_recalled(rep, i, conversation=conv)
        gone = f[f["stale"]]
        assert len(gone) == 1 and gone["reason"].iloc[0] == "expired" and "(inferred)" not in gone["detail"].iloc[0]


def test_ab_compare_at_the_replay_settings_reproduces_the_recorded_probe_metrics(recorded):
    _, _, rep = recorded["many_users"]
    f = ab_compare(rep, {}, {"recency_weight": 0.0})
    live = rep.to_frames()["probes"]
    np.testing.assert_allclose(f["rr_a"], live["rr"], equal_nan=True)
    np.testing.assert_allclose(f["ndcg_a"], live["ndcg"], equal_nan=True)
    labels = {m["id"]: ", ".join(m["labels"]) for m in rep.memories}
    assert f["ranked_a"].tolist() == [[labels[x] for x in p["recalled_ids"]] for p in rep.probes]
