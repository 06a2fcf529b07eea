"""The `vxmem` command: synth, replay, sweep; bad input gets one line and exit code 2."""

from pathlib import Path

import pandas as pd
import pytest

from vxmem.cli import main
from vxmem.workbench.datasets import load_jsonl
from vxmem.workbench.synth import generate

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
    assert "category" in text and "mean [95% bootstrap interval]" in text
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
    from vxmem.cli.workbench import embedder_named
    from vxmem.models.embed import get_embedder

    assert embedder_named("default") is None  # Vectrix()'s own, whatever it is
    assert embedder_named("hashing") == "hashing"  # by name: never the default model instead
    assert get_embedder(embedder_named("hashing")).name == get_embedder("hashing").name


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


# ---------------------------------------------------------------- import, categories, early checks


OPENAI_CHAT = (
    '{"conversation_id": "bike", "messages": [{"role": "system", "content": "be brief"}, '
    '{"role": "user", "content": "I ordered a wide gel saddle for my road bike"}, '
    '{"role": "assistant", "content": "Nice, gel saddles help on long rides"}]}\n'
    '{"conversation_id": "food", "messages": [{"role": "user", "content": "I am allergic to peanuts"}]}\n')


def test_import_writes_a_chat_log_as_a_vxmem_dataset(tmp_path, capsys):
    src, out = tmp_path / "chats.jsonl", tmp_path / "mine.jsonl"
    src.write_text(OPENAI_CHAT)
    assert main(["import", str(src), "--format", "openai", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 sessions, 3 turns" in text and "1 system" in text and "wrote" in text
    conv = load_jsonl(out)
    assert [e.label for e in conv.events] == ["bike:0", "bike:1", "food:0"]
    assert conv.events[0].text == "I ordered a wide gel saddle for my road bike"


def test_import_guesses_the_format_and_refuses_a_non_jsonl_output(tmp_path, capsys):
    src = tmp_path / "chats.jsonl"
    src.write_text(OPENAI_CHAT)
    assert main(["import", str(src)]) == 0
    assert capsys.readouterr().out.startswith('{"format": "vxmem-conversation/1"')
    assert main(["import", str(src), "-o", str(tmp_path / "out.csv")]) == 2
    assert "written as .jsonl" in _error_line(capsys)


def test_replay_of_a_chat_log_says_to_write_probes_first(tmp_path, capsys):
    src = tmp_path / "chats.jsonl"
    src.write_text(OPENAI_CHAT)
    assert main(["replay", str(src)]) == 2
    assert "has no probes" in _error_line(capsys)


@pytest.mark.parametrize("argv, message", [
    (["replay", "DATA", "-o", "out.txt"], "-o 'out.txt': use a .csv or .parquet file name"),
    (["replay", "DATA", "--save", "r.zip"], "--save 'r.zip': a replay is saved as .npz"),
    (["sweep", "DATA", "-o", "points.txt"], "-o 'points.txt': use a .csv or .parquet"),
    (["sweep", "DATA", "--per-probe", "pp.json"], "--per-probe 'pp.json': use a .csv or .parquet"),
])
def test_output_names_are_refused_before_the_replay_runs(tmp_path, capsys, argv, message, monkeypatch):
    import vxmem.workbench.replay.run

    def no_replay(*a, **k):  # the check must come first: a replay here fails the test
        raise AssertionError("replayed before checking the output name")

    monkeypatch.setattr(vxmem.workbench.replay.run, "replay_many", no_replay)
    argv = [str(tmp_path / "missing-but-never-read.jsonl") if a == "DATA" else a for a in argv]
    assert main(argv) == 2
    assert message in _error_line(capsys)


def test_a_binary_file_error_names_the_file(tmp_path, capsys):
    for name in ("blob.jsonl", "blob.json"):
        path = tmp_path / name
        path.write_bytes(bytes(range(256)) * 8)
        assert main(["replay", str(path)]) == 2
        err = _error_line(capsys)
        assert name in err and "not UTF-8" in err


def test_a_bad_npz_does_not_pass_on_numpys_allow_pickle_hint(tmp_path, capsys):
    import numpy as np

    objects = tmp_path / "objects.npz"
    np.savez(objects, a=np.array([{"x": 1}], dtype=object))
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"\x00not a zip" * 50)
    for path in (objects, junk):
        assert main(["sweep", str(path)]) == 2
        err = _error_line(capsys)
        assert "not a saved replay" in err and path.name in err and "allow_pickle" not in err


def test_version_and_python_dash_m(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("vxmem ")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "vxmem", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("vxmem ")


def test_locomo_adversarial_probes_are_left_out_unless_asked_for(capsys):
    data = str(FIXTURES / "locomo_sample.json")
    assert main(["sweep", data]) == 0
    text = capsys.readouterr().out
    assert "left out 1 adversarial probes" in text and "x 5 probes" in text
    assert main(["sweep", data, "--categories", "all"]) == 0
    assert "x 6 probes" in capsys.readouterr().out


@pytest.mark.parametrize("spec", ["4", "single-hop", "SINGLE-HOP,4"])
def test_categories_take_names_and_locomo_numbers(spec, capsys, tmp_path):
    out = tmp_path / "pp.csv"
    assert main(["sweep", str(FIXTURES / "locomo_sample.json"), "--categories", spec, "--per-probe", str(out)]) == 0
    assert "x 2 probes" in capsys.readouterr().out
    assert set(pd.read_csv(out)["category"].astype(str)) <= {"4", "single-hop"}


def test_replay_categories_choose_the_probes_reported(tmp_path, capsys):
    out = tmp_path / "probes.csv"
    assert main(["replay", str(FIXTURES / "locomo_sample.json"), "--categories", "temporal,1", "-o", str(out)]) == 0
    assert len(pd.read_csv(out)) == 2


def test_an_unknown_category_is_named_with_the_ones_there(capsys):
    assert main(["sweep", str(FIXTURES / "locomo_sample.json"), "--categories", "nope"]) == 2
    err = _error_line(capsys)
    assert "no probe has category 'nope'" in err and "single-hop" in err


def test_replay_save_of_several_conversations_is_refused_before_any_replay(tmp_path, capsys, monkeypatch):
    from vxmem.workbench.replay import run as replay_module

    def no_replay(*args, **kwargs):
        raise AssertionError("a replay started before the arguments were checked")

    monkeypatch.setattr(replay_module, "replay_many", no_replay)
    src = ROOT / "datasets" / "fixtures" / "longmemeval_sample.json"
    out = tmp_path / "r.npz"
    assert main(["replay", str(src), "--embedder", "hashing", "--save", str(out)]) == 2
    assert "--save keeps one replay" in _error_line(capsys) and not out.exists()


def test_replay_summary_gives_intervals_and_probe_counts_and_warns_below_30_probes(tmp_path, capsys):
    small_set = tmp_path / "few.jsonl"
    assert main(["synth", "contradicting_facts", "--seed", "0", "-o", str(small_set)]) == 0
    capsys.readouterr()
    assert main(["replay", str(small_set), "--embedder", "hashing"]) == 0
    many = capsys.readouterr().out
    n = load_jsonl(small_set).probes
    assert f"overall, {len(n)} probes" in many and "ndcg=" in many and "[" in many
    assert ("caveat:" in many) == (len(n) < 30)
    few = tmp_path / "two.jsonl"
    conv = load_jsonl(small_set)
    keep = [e for e in conv.events if e.type != "probe"] + conv.probes[:2]
    type(conv)(name="two", events=sorted(keep, key=lambda e: e.time)).save(few)
    assert main(["replay", str(few), "--embedder", "hashing"]) == 0
    out = capsys.readouterr().out
    assert "overall, 2 probes" in out and "caveat: 2 probes, fewer than 30" in out


def _help(capsys, *command: str) -> str:
    assert main([*command, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_serve_mcp_and_restore_offer_the_same_embedders(capsys):
    import re

    from vxmem.models.embed import EMBEDDERS

    offered = {c: re.search(r"--embedder \{([^}]*)\}", _help(capsys, *c)).group(1).split(",")
               for c in (("serve",), ("mcp",), ("restore",))}
    assert offered[("serve",)] == offered[("mcp",)] == list(EMBEDDERS)
    assert offered[("restore",)] == ["auto", *EMBEDDERS]


def test_mcp_help_says_its_user_is_the_one_every_tool_acts_for(capsys):
    text = _help(capsys, "mcp")
    assert "the user of requests that name none" not in text
    assert "every tool reads and writes" in text
    assert "the user of requests that name none" in _help(capsys, "serve")


def test_sweep_help_explains_the_grid_options(capsys):
    assert main(["sweep", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "a comma list (1,3,7), a start:stop:step range, stop included" in text
    assert "--half-life VALUES half_life_days values (the replay's default 7)" in text
    assert "--decay-rate VALUES decay_rate values, for --policy langchain" in text


def test_sweep_prints_each_tied_result_once_nearest_the_defaults(capsys):
    # at recency weight 0 every half-life ranks alike: one row for them, not five
    drift = str(ROOT / "datasets" / "preference_drift.jsonl")
    assert main(["sweep", drift, "--half-life", "1,3,7,30,90", "--recency-weight", "0,0.5", "--top", "20"]) == 0
    out = capsys.readouterr().out
    assert "10 points" in out and "distinct results" in out
    rows = [line.split() for line in out.splitlines()]
    header = next(r for r in rows if "tied" in r and "half_life_days" in r)
    body = [dict(zip(header, r)) for r in rows[rows.index(header) + 1:] if len(r) == len(header)]
    at_zero = [r for r in body if float(r["recency_weight"]) == 0]
    assert len(at_zero) == 1 and at_zero[0]["tied"] == "5" and float(at_zero[0]["half_life_days"]) == 7
    assert len(body) == len({tuple(v for k, v in r.items() if k not in ("half_life_days", "recency_weight",
                                                                           "tied", "point")) for r in body})


def test_sweep_draws_a_progress_bar_on_a_terminal_and_none_in_a_pipe(small, monkeypatch):
    import io
    import sys

    class Terminal(io.StringIO):  # what stderr is in a shell: a terminal
        def isatty(self):
            return True

    argv = ["sweep", str(small), "--embedder", "hashing", "--half-life", "1,3"]
    for stream, bar in ((io.StringIO(), False), (Terminal(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        assert main(argv) == 0
        drawn = stream.getvalue()
        assert ("%|" in drawn) is bar, drawn  # a log file or a pipe gets no bar
        if bar:
            assert "replay many_users" in drawn and "sweep" in drawn  # the replay's events, then the sweep
