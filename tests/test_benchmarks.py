"""The benchmarks' harness computes and reports right, and every benchmark imports and answers --help.

The benchmarks themselves are never run here: they time things, and tests never do.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import corpora
from benchmarks.harness import Report, flags, interleaved, markdown_table, percentiles, timed

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(f"benchmarks.{p.stem}" for p in (ROOT / "benchmarks").glob("bench_*.py"))


def test_percentiles_of_one_to_a_hundred():
    got = percentiles(range(1, 101))
    assert got["n"] == 100
    assert got["mean"] == pytest.approx(50.5)
    assert got["p50"] == pytest.approx(50.5)
    assert got["p95"] == pytest.approx(95.05)
    assert got["p99"] == pytest.approx(99.01)
    assert got["max"] == 100


def test_percentiles_scale_seconds_to_milliseconds():
    got = percentiles([0.001, 0.002, 0.003], scale=1e3)
    assert got["p50"] == pytest.approx(2.0)
    assert got["mean"] == pytest.approx(2.0)


def test_percentiles_of_no_samples_are_nan():
    got = percentiles([])
    assert got["n"] == 0
    assert math.isnan(got["p50"])


def test_timed_calls_once_per_round_after_the_warmup():
    calls: list[int] = []
    got = timed(calls.append, rounds=5, warmup=2)
    assert calls == [0, 1, 0, 1, 2, 3, 4]
    assert len(got.wall) == len(got.cpu) == 5
    assert all(w >= 0 for w in got.wall)


def test_interleaved_takes_turns_call_by_call():
    order: list[str] = []
    got = interleaved({"a": lambda i: order.append("a"), "b": lambda i: order.append("b")}, rounds=3)
    assert order == ["a", "b"] * 3
    assert [len(t.wall) for t in got.values()] == [3, 3]


def test_flags_map_an_old_spelling_onto_rounds():
    ap = flags(argparse.ArgumentParser(), rounds=3, aliases=("--reps",))
    assert ap.parse_args([]).rounds == 3
    assert ap.parse_args(["--reps", "7"]).rounds == 7
    args = ap.parse_args(["--rounds", "2", "--json", "a.json", "--markdown", "a.md"])
    assert (args.rounds, args.json, args.markdown) == (2, "a.json", "a.md")


def test_report_round_trips_through_json(tmp_path):
    report = Report("latency")
    report.table("recall", [{"op": "recall", "p50 ms": 1.25, "n": 200}], note="ratios: to the first row")
    report.raw = {"samples": [1, 2]}
    report.write(json_path=str(tmp_path / "r.json"))
    back = Report.from_json(json.loads((tmp_path / "r.json").read_text()))
    assert back.tables == report.tables
    assert back.notes == report.notes
    assert back.raw == report.raw
    assert back.meta["machine"]["cores"] >= 1
    assert set(back.meta["versions"]) >= {"vxmem", "numpy", "onnxruntime", "usearch"}
    assert back.meta["command"].startswith("python -m ")


def test_markdown_table_has_a_header_a_rule_and_a_line_per_row():
    text = markdown_table([{"op": "recall", "p50 ms": 1.25, "n": 1200},
                           {"op": "a|b", "p50 ms": None, "n": 3}])
    assert text.splitlines() == ["| op | p50 ms | n |", "|---|---|---|", "| recall | 1.250 | 1,200 |",
                                 "| a\\|b | - | 3 |"]


def test_report_markdown_holds_every_table(tmp_path):
    report = Report("t")
    report.table("one", [{"a": 1}])
    report.table("two", [{"b": 2.0}])
    report.write(markdown_path=str(tmp_path / "r.md"))
    text = (tmp_path / "r.md").read_text()
    assert "## one" in text and "## two" in text and "| b |" in text


def test_one_word_list_for_every_generator():
    rng = np.random.default_rng(0)
    words = set(corpora.WORDS) | {w for o in corpora.OPENERS for w in o.split()}
    import random

    for text in (corpora.sentence(rng), corpora.short_sentence(random.Random(0)),
                 corpora.bare_sentence(random.Random(0))):
        assert set(text.rstrip(".").split()) <= words


HELP_ALL = """
import contextlib, importlib, io, sys
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            module.main(["--help"])
    except SystemExit as stop:
        assert stop.code in (0, None), (name, stop.code)
    else:
        raise AssertionError(name + ": --help did not exit")
    assert "usage:" in out.getvalue(), name
    print(name, "ok")
"""


def test_every_benchmark_imports_without_running_and_answers_help():
    assert len(MODULES) >= 20
    got = subprocess.run([sys.executable, "-c", HELP_ALL, *MODULES], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert got.returncode == 0, got.stderr
    assert got.stdout.count(" ok") == len(MODULES)


def test_importing_bench_peers_imports_no_peer_library():
    code = ("import sys, benchmarks.bench_peers; "
            "print(sorted(m for m in ('chromadb', 'lancedb', 'vectrixdb', 'faiss', 'usearch', 'vxmem') "
            "if m in sys.modules))")
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "[]"


def test_the_recency_sweep_breaks_a_tie_towards_the_defaults():
    import pandas as pd

    from benchmarks.bench_recency import best_point

    points = pd.DataFrame({"half_life_days": [1.0, 7.0, 90.0, 30.0], "recency_weight": [0.0, 0.5, 1.0, 0.25],
                           "ndcg": [0.9, 0.9, 0.9, 0.8]})
    best = best_point(points)
    assert (best["half_life_days"], best["recency_weight"]) == (7.0, 0.5)
    points.loc[3, "ndcg"] = 0.95
    assert best_point(points)["half_life_days"] == 30.0
