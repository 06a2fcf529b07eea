"""Constrained picking: the best point among the points that keep a bound on another metric."""

import itertools
from pathlib import Path

import pandas as pd
import pytest

from vxmem.cli import main
from vxmem.workbench import views
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.constraints import Constraint, parse_constraint, satisfied, unmet
from vxmem.workbench.sweep.holdout import split_probes, tune_holdout
from vxmem.workbench.synth import generate

DRIFT = str(Path(__file__).resolve().parent.parent / "datasets" / "preference_drift.jsonl")


def grid(half_lives, weights, ndcg, leak) -> pd.DataFrame:
    """A sweep frame over half-life x recency weight with nDCG and stale-leak from two functions."""
    rows = [{"half_life_days": h, "recency_weight": w, "ndcg": ndcg(h, w), "stale_leak": leak(h, w), "limit": 10,
             "token_budget": 0} for h, w in itertools.product(half_lives, weights)]
    return pd.DataFrame(rows)


def test_a_constraint_reads_from_text_and_refuses_what_it_cannot_mean():
    assert parse_constraint("stale_leak<=0.1") == Constraint("stale_leak", "<=", 0.1)
    assert parse_constraint(" ndcg >= .5 ") == Constraint("ndcg", ">=", 0.5)
    assert str(Constraint("stale_leak", "<=", 0.1)) == "stale_leak <= 0.1"
    for bad in ("stale_leak<0.1", "stale_leak<=", "<=0.1", "stale_leak<=0.1x", ""):
        with pytest.raises(ValueError, match="not a constraint"):
            parse_constraint(bad)
    with pytest.raises(ValueError, match="'leak' is not a metric here"):
        parse_constraint("leak<=0.1", ["ndcg", "stale_leak"])
    with pytest.raises(ValueError, match="<= or >="):
        Constraint("ndcg", "==", 0.5)
    with pytest.raises(ValueError, match="finite"):
        Constraint("ndcg", ">=", float("nan"))


def test_only_rows_keeping_every_bound_are_satisfied_and_nan_keeps_none():
    frame = pd.DataFrame({"ndcg": [0.9, 0.5, float("nan")], "stale_leak": [0.3, 0.05, 0.0]})
    assert satisfied(frame, [Constraint("stale_leak", "<=", 0.1)]).tolist() == [False, True, True]
    both = [Constraint("stale_leak", "<=", 0.1), Constraint("ndcg", ">=", 0.4)]
    assert satisfied(frame, both).tolist() == [False, True, False]
    with pytest.raises(ValueError, match="no such metric"):
        satisfied(frame, [Constraint("recall", ">=", 0.1)])
    assert "reaches 0.900" in unmet(frame, [Constraint("ndcg", ">=", 0.95)])


def test_the_best_point_subject_to_a_leak_bound_is_the_best_that_keeps_it():
    # nDCG rises with the recency weight, and so does the leak: unbounded, the heaviest weight wins
    frame = grid([7.0, 30.0], [0.0, 0.5, 1.0], lambda h, w: 0.5 + w / 4 + h / 1000, lambda h, w: w / 5)
    free = views.pick_best(frame, "ndcg", ("half_life_days", "recency_weight"), views.DEFAULT_POINT)
    assert free.values == {"half_life_days": 30.0, "recency_weight": 1.0}
    bound = [Constraint("stale_leak", "<=", 0.1)]
    pick = views.pick_best(frame, "ndcg", ("half_life_days", "recency_weight"), views.DEFAULT_POINT, subject_to=bound)
    assert pick.values == {"half_life_days": 30.0, "recency_weight": 0.5}
    assert pick.row["stale_leak"] <= 0.1
    assert any("picked among the 4 of 6 points that keep stale_leak <= 0.1" in n for n in pick.notes)
    with pytest.raises(ValueError, match=r"no point of the grid keeps stale_leak <= 0.01 \(the best point of the "
                                         r"grid reaches 0.000\)|no point of the grid keeps"):
        views.pick_best(frame, "ndcg", ("half_life_days", "recency_weight"), views.DEFAULT_POINT,
                        subject_to=[Constraint("stale_leak", "<=", -0.01)])


def test_honest_tuning_keeps_the_bound_on_the_tune_probes(hashing_embedder):
    reps = [replay(generate("preference_drift"), {"pool_limit": 20}, embedder=hashing_embedder)]
    space = {"half_life_days": [1.0, 7.0, 60.0], "recency_weight": [0.0, 0.5, 2.0]}
    split = split_probes(reps)
    loose = tune_holdout(reps, space, split, metric="ndcg", n_boot=50, subject_to=[Constraint("stale_leak", "<=", 1.0)])
    free = tune_holdout(reps, space, split, metric="ndcg", n_boot=50)
    assert loose.best == free.best  # a bound every point keeps changes nothing
    leaks = loose.points.set_index(["half_life_days", "recency_weight"])["tune_stale_leak"]
    free_leak = leaks.loc[(free.best["half_life_days"], free.best["recency_weight"])]
    assert free_leak > leaks.min()  # the unbounded best leaks more than the grid must: a bound has work to do
    bound = float(leaks.min())
    bounded = tune_holdout(reps, space, split, metric="ndcg", n_boot=50,
                           subject_to=[Constraint("stale_leak", "<=", bound)])
    at = bounded.points.set_index(["half_life_days", "recency_weight"])
    best = at.loc[(bounded.best["half_life_days"], bounded.best["recency_weight"])]
    assert best["tune_stale_leak"] <= bound
    assert best["tune_ndcg"] == pytest.approx(at[at["tune_stale_leak"] <= bound]["tune_ndcg"].max())
    with pytest.raises(ValueError, match="on the tune probes"):
        tune_holdout(reps, space, split, metric="ndcg", n_boot=50, subject_to=[Constraint("ndcg", ">=", 2.0)])


def test_the_cli_sweep_shows_only_points_keeping_the_bound(capsys):
    args = ["sweep", DRIFT, "--embedder", "hashing", "--half-life", "1,7,30", "--recency-weight", "0,0.5,2"]
    assert main([*args, "--subject-to", "stale_leak<=0.15"]) == 0
    out = capsys.readouterr().out
    assert "points keep stale_leak <= 0.15" in out
    rows = [line.split() for line in out.splitlines()]
    header = next(r for r in rows if "stale_leak" in r and "tied" in r)
    body = [dict(zip(header, r)) for r in rows[rows.index(header) + 1:] if len(r) == len(header)]
    assert body and all(float(r["stale_leak"]) <= 0.15 for r in body)
    assert main([*args, "--subject-to", "ndcg>=2"]) == 2
    assert "no point of the grid keeps ndcg >= 2" in capsys.readouterr().err
    assert main([*args, "--subject-to", "leak<0.1"]) == 2
    assert "is not a constraint" in capsys.readouterr().err
