"""The `vxmem` command: synth, replay, sweep; bad input gets one line and exit code 2."""

from pathlib import Path

import pandas as pd
import pytest

from vxmem.cli import main
from vxmem.datasets import load_jsonl
from vxmem.synth import generate

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "datasets" / "fixtures"


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "mu.jsonl"
    generate("many_users", users=2).save(path)
    return path


def _error_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vxmem: error: ")
    return err


def test_synth_writes_the_generated_conversation(tmp_path, capsys):
    out = tmp_path / "d.jsonl"
    assert main(["synth", "preference_drift", "--seed", "2", "--weeks", "3", "-o", str(out)]) == 0
    assert load_jsonl(out).events == generate("preference_drift", seed=2, weeks=3).events
    assert "wrote" in capsys.readouterr().out


def test_synth_regenerates_the_shipped_dataset_byte_for_byte(tmp_path):
    out = tmp_path / "many_users.jsonl"
    assert main(["synth", "many_users", "--seed", "0", "-o", str(out)]) == 0
    assert out.read_bytes() == (ROOT / "datasets" / "many_users.jsonl").read_bytes()


def test_synth_refuses_an_unknown_size(capsys):
    assert main(["synth", "many_users", "--weeks", "3"]) == 2
    assert "many_users has no size --weeks" in _error_line(capsys)


def test_replay_prints_a_table_and_writes_csv(small, tmp_path, capsys):
    out = tmp_path / "probes.csv"
    assert main(["replay", str(small), "--half-life", "3", "--limit", "5", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "category" in text and "overall:" in text
    frame = pd.read_csv(out)
    assert {"hit", "rr", "ndcg", "stale_leak", "query"} <= set(frame.columns)
    assert (frame["limit"] == 5).all()


def test_replay_reads_locomo_and_writes_parquet(tmp_path, capsys):
    out = tmp_path / "probes.parquet"
    assert main(["replay", str(FIXTURES / "locomo_sample.json"), "--format", "locomo", "-o", str(out)]) == 0
    frame = pd.read_parquet(out)
    assert set(frame["conversation"]) == {"conv-fx1", "conv-fx2"}


def test_replay_of_locomo_leaves_adversarial_questions_out_unless_asked(tmp_path):
    data = str(FIXTURES / "locomo_sample.json")
    default, every, chosen = (tmp_path / f"{n}.csv" for n in ("default", "all", "chosen"))
    assert main(["replay", data, "-o", str(default)]) == 0
    assert main(["replay", data, "--categories", "all", "-o", str(every)]) == 0
    assert main(["replay", data, "--categories", "temporal,4", "-o", str(chosen)]) == 0
    assert sorted(pd.read_csv(default)["category"]) == ["multi-hop", "open-domain", "single-hop", "single-hop",
                                                        "temporal"]
    assert sorted(pd.read_csv(every)["category"]) == sorted([*pd.read_csv(default)["category"], "adversarial"])
    assert sorted(pd.read_csv(chosen)["category"]) == ["single-hop", "single-hop", "temporal"]


def test_the_cli_embedder_names_are_the_librarys(monkeypatch):
    from vxmem import cli
    from vxmem.embed import get_embedder

    assert cli._embedder("default") is None  # Vectrix()'s own, whatever it is
    assert cli._embedder("hashing") == "hashing"  # by name: never the default model instead
    assert get_embedder(cli._embedder("hashing")).name == get_embedder("hashing").name


def test_replay_reads_longmemeval(capsys):
    assert main(["replay", str(FIXTURES / "longmemeval_sample.json")]) == 0
    assert "knowledge-update" in capsys.readouterr().out


def test_sweep_prints_points_and_writes_results(small, tmp_path, capsys):
    out, per_probe = tmp_path / "results.csv", tmp_path / "pp.csv"
    assert main(["sweep", str(small), "--half-life", "1,3,7,30", "--recency-weight", "0:1:0.5",
                 "--token-budget", "none,40", "-o", str(out), "--per-probe", str(per_probe)]) == 0
    assert "24 points" in capsys.readouterr().out
    points = pd.read_csv(out)
    assert len(points) == 4 * 3 * 2
    assert sorted(points["recency_weight"].unique()) == [0.0, 0.5, 1.0]
    assert len(pd.read_csv(per_probe)) == 24 * len(generate("many_users", users=2).probes)


def test_sweep_over_a_saved_replay(small, tmp_path, capsys):
    saved = tmp_path / "r.npz"
    assert main(["replay", str(small), "--save", str(saved)]) == 0
    assert main(["sweep", str(saved), "--policy", "langchain", "--decay-rate", "0.01,0.1"]) == 0
    assert "2 points" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["sweep", "DATA", "--half-life", "1,x"], "--half-life: expected numbers"),
    (["sweep", "DATA", "--limit", "2.5"], "--limit: expected whole numbers"),
    (["sweep", "DATA", "--half-life", "0"], "half_life_days must be in"),
    (["sweep", "DATA", "--decay-rate", "0.1"], "cannot sweep 'decay_rate' with policy 'blend'"),
    (["sweep", "DATA", "--sort", "speed"], "--sort 'speed': not a metric"),
    (["replay", "DATA", "-o", "out.xlsx"], "use a .csv or .parquet file name"),
    (["replay", "DATA", "--policy", "magic"], "unknown policy 'magic'"),
    (["replay", "DATA", "--limit", "0"], "limit must be an int >= 1"),
    (["replay", "DATA", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["bogus"], "invalid choice: 'bogus'"),
    (["replay", "DATA", "--categories", "temporal"], "categories chooses LoCoMo questions"),
    (["replay", str(FIXTURES / "locomo_sample.json"), "--categories", "gossip"], "unknown LoCoMo category 'gossip'"),
])
def test_bad_arguments_get_one_line_and_exit_code_2(small, tmp_path, capsys, argv, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [str(small) if a == "DATA" else a for a in argv]
    assert main(argv) == 2
    assert message in _error_line(capsys)


def test_missing_file_gets_one_line_and_exit_code_2(capsys):
    assert main(["replay", "/no/such/file.jsonl"]) == 2
    assert "no such file" in _error_line(capsys)


def test_bad_dataset_line_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "vxmem-conversation/1", "name": "x"}\n{"time": "2024-01-01", "type": "turn"}\n')
    assert main(["replay", str(bad)]) == 2
    assert "line 2: 'text' must be a non-empty string" in _error_line(capsys)
