"""Standard benchmarks from a file on disk: how long a replay will take, said first, and the table papers print."""

from pathlib import Path

import pandas as pd

from vxmem.cli import main
from vxmem.workbench.analysis import metrics as M
from vxmem.workbench.datasets import load
from vxmem.workbench.replay.estimate import Estimate, estimate
from vxmem.workbench.sweep.holdout import bootstrap_ci
from vxmem.workbench.synth import generate

LOCOMO = Path(__file__).resolve().parent.parent / "datasets" / "fixtures" / "locomo_sample.json"


def test_an_estimate_counts_the_whole_dataset_and_scales_the_sample(hashing_embedder):
    convs = [generate("many_users", users=2), generate("preference_drift")]
    e = estimate(convs, {}, hashing_embedder, sample=12, probes=3)
    writes = sum(1 for c in convs for ev in c.events if ev.type in ("turn", "fact", "feedback"))
    assert (e.writes, e.probes, e.sampled) == (writes, sum(len(c.probes) for c in convs), 12)
    assert e.seconds == (e.writes * e.ms_per_write + e.probes * e.ms_per_probe) / 1000.0
    assert str(e).startswith("about ") and f"{writes:,} writes" in str(e) and "measured on 12 writes" in str(e)
    assert str(Estimate(5400.0, 1, 1, 1.0, 1.0, 1)).startswith("about 1.5 h")
    assert str(Estimate(600.0, 1, 1, 1.0, 1.0, 1)).startswith("about 10 min")


def test_the_benchmark_table_gives_each_category_and_conversation_with_intervals():
    frame = pd.DataFrame({"conversation": ["a", "a", "b", "b", "b"], "category": ["x", "y", "x", "x", "y"],
                          "recall": [1.0, 0.0, 0.5, None, 1.0]})
    table = M.by_category_and_conversation(frame, "recall").set_index("category")
    assert table.loc["x", "a"] == "1.000" and table.loc["x", "b"] == "0.500" and table.loc["x", "all"] == "0.750"
    assert table.loc["all", "all"] == "0.625" and table.loc["all", "probes"] == 4  # the None is not scored
    with_ci = M.by_category_and_conversation(frame, "recall", bootstrap_ci).set_index("category")
    assert with_ci.loc["y", "all"].startswith("0.500 [0.000, 1.000]")
    only_a = M.by_category_and_conversation(frame[frame["conversation"] == "a"], "recall").set_index("category")
    assert list(only_a.columns) == ["a", "all", "probes"]


def test_the_cli_replay_prints_the_table_per_category_and_conversation(capsys):
    assert main(["replay", str(LOCOMO), "--format", "locomo", "--embedder", "hashing"]) == 0
    out = capsys.readouterr().out
    names = [c.name for c in load(str(LOCOMO), format="locomo")]
    assert "recall@10 by category and conversation" in out
    header = next(line for line in out.splitlines() if line.split()[:1] == ["category"] and names[0] in line)
    assert header.split() == ["category", *names, "all", "probes"]
