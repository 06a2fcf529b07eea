"""The neutral harness: systems scored alike on the same probes, failures reported, names checked."""

import sys

import pytest

from vxmem.workbench.analysis.audit import audit, audit_summary
from vxmem.workbench.datasets.model import Conversation, Event
from vxmem.workbench.systems import parse_systems
from vxmem.workbench.systems.compare import compare, quality_cost

from helpers import DAY, ROOT, T0


def _conv():
    ev = [Event(T0, "turn", label="a", session="s", text="I live in Lisbon near the river."),
          Event(T0 + 60, "turn", label="b", session="s", text="The train was late this morning."),
          Event(T0 + 120, "turn", label="c", session="s", text="I drive a red Toyota."),
          Event(T0 + 9 * DAY, "turn", label="d", session="s", text="I live in Porto these days."),
          Event(T0 + 10 * DAY, "probe", label="q1", session="s", query="Where do I live?", relevant=["d"],
                stale=["a"]),
          Event(T0 + 10 * DAY + 60, "probe", label="q2", session="s", query="What car do I drive?",
                relevant=["c"])]
    return Conversation(name="tiny", events=ev)


class Oracle:
    """Answers every probe with the right labels: a user's own system, built with no arguments."""

    answers = {"Where do I live?": ["d"], "What car do I drive?": ["c", "a"]}

    def add(self, turn):
        pass

    def recall(self, query):
        return self.answers[query.text]


class Flaky(Oracle):
    """Fails on one probe."""

    def recall(self, query):
        if "car" in query.text:
            raise RuntimeError("boom")
        return super().recall(query)


sys.modules[__name__].Oracle = Oracle  # importable as test_compare:Oracle from a child too


def test_every_system_is_scored_on_the_same_probes():
    res = compare(_conv(), ["vxmem:fast@hashing", "bm25", parse_systems([f"{__name__}:Oracle"])[0]], k=5)
    assert list(res.table["system"]) == ["vxmem:fast@hashing", "bm25", f"{__name__}:Oracle"]
    assert set(res.table["probes"]) == {2}
    oracle = res.table.iloc[2]
    assert oracle["recall"] == 1.0 and oracle["mrr"] == 1.0 and oracle["stale_leak"] == 0.0
    assert len(res.per_probe) == 6 and set(res.per_probe["probe"]) == {"q1", "q2"}


def test_bm25_stems_and_never_sees_another_session():
    ev = [Event(T0, "turn", label="x", session="other", text="I am living in Oslo."),
          Event(T0 + 1, "turn", label="y", session="s", text="Living by the sea is nice."),
          Event(T0 + 2, "probe", label="q", session="s", query="where do I live", relevant=["y"])]
    res = compare(Conversation(name="bm", events=ev), ["bm25"], k=5)
    assert res.per_probe["ranked"].iloc[0] == ["y"]


def test_a_system_that_fails_on_one_probe_is_reported_not_fatal():
    res = compare(_conv(), [parse_systems([f"{__name__}:Flaky"])[0]], k=5)
    row = res.table.iloc[0]
    assert row["errors"] == 1 and "boom" in row["error"] and row["probes"] == 2
    assert list(res.per_probe["failed"]) == [False, True]
    assert row["recall"] == 0.5  # the failed probe scores as an empty answer


def test_an_unknown_system_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown system 'nope'"):
        parse_systems(["vxmem", "nope"])
    with pytest.raises(ValueError, match="unknown preset"):
        parse_systems(["vxmem:turbo"])


def test_chroma_without_chromadb_says_how_to_install_it():
    try:
        import chromadb  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="pip install chromadb"):
            parse_systems(["chroma"])
    else:  # pragma: no cover - chromadb installed
        pytest.skip("chromadb is installed")


def test_quality_cost_marks_the_pareto_front():
    import pandas as pd

    t = pd.DataFrame({"system": ["a", "b", "c"], "recall": [0.9, 0.8, 0.95], "ms_per_recall": [1.0, 2.0, 5.0]})
    assert list(quality_cost(t)["on_front"]) == [True, False, True]


def cli(capsys, *argv: str):
    """``vxmem *argv`` run in this process (the command's own code, no interpreter start): its
    exit code, stdout and stderr."""
    from vxmem.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_the_cli_prints_one_row_per_system_and_refuses_unknown_names(tmp_path, capsys):
    path = tmp_path / "tiny.jsonl"
    _conv().save(str(path))
    # The systems of the README's `vxmem compare` line (the default vxmem, bm25 and the vectrixdb
    # peer), on this small conversation rather than the shipped dataset.
    code, out, err = cli(capsys, "compare", str(path), "--system", "vxmem:fast@hashing", "--system", "bm25",
                         "--system", "vxmem", "--system", "vectrixdb", "-o", str(tmp_path / "out.csv"))
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert {"vxmem:fast@hashing", "bm25", "vxmem", "vectrixdb"} <= rows.keys(), out
    assert all(rows[name][-1] == "0" for name in ("vxmem", "vectrixdb")), out  # no errors column > 0
    assert (tmp_path / "out.csv").exists()
    code, _, err = cli(capsys, "compare", str(path), "--system", "nope")
    assert code == 2 and err.count("\n") == 1 and "unknown system 'nope'" in err


@pytest.mark.slow
def test_the_cli_charts_every_preset_and_policy_beside_the_systems(tmp_path, capsys):
    from vxmem.memory.stages import PRESETS
    from vxmem.workbench.sweep.policies import POLICIES

    # A small conversation: every preset and policy still gets its point, at a fraction of the
    # shipped dataset's replays (each preset replays the whole conversation).
    path = tmp_path / "tiny.jsonl"
    _conv().save(str(path))
    chart = tmp_path / "front.html"
    code, out, err = cli(capsys, "compare", str(path), "--system", "bm25", "--presets", "--embedder", "hashing",
                         "--chart", str(chart))
    assert code == 0, err
    rows = {line.rsplit(maxsplit=3)[0].strip() for line in out.splitlines() if " · " in line}
    assert {f"{p} · {q}" for p in PRESETS for q in POLICIES} <= rows
    front = next(line for line in out.splitlines() if line.startswith("quality-cost front: "))
    assert front.removeprefix("quality-cost front: ")  # at least one point on it
    page = chart.read_text()
    assert "vega" in page and '"ms_per_recall"' in page and '"strokeDash"' in page
    code, _, err = cli(capsys, "compare", str(path), "--chart", str(tmp_path / "front.png"))
    assert code == 2 and err.count("\n") == 1 and ".html" in err
    assert not (tmp_path / "front.png").exists()


# ---------------------------------------------------------------------------- the supersession audit


def _facts():
    """Dana moves (a correction the judge reads), Omar's job changes in words it cannot read (a miss),
    Lena's favourite is restated as 'still' (a wrongful retirement)."""
    ev = [Event(T0, "fact", label="d1", session="kb", text="Dana lives in Lisbon."),
          Event(T0 + 60, "fact", label="o1", session="kb", text="Omar works at Acme."),
          Event(T0 + 120, "fact", label="l1", session="kb", text="Lena's favourite tea is jasmine."),
          Event(T0 + DAY, "fact", label="d2", session="kb", text="Dana has moved to Porto.",
                meta={"supersedes": ["d1"]}),
          Event(T0 + DAY + 60, "fact", label="o2", session="kb", text="These days Omar is on the Globex payroll.",
                meta={"supersedes": ["o1"]}),
          Event(T0 + DAY + 120, "fact", label="l2", session="kb", text="Lena's favourite tea is still jasmine.",
                meta={"restates": ["l1"]})]
    return Conversation(name="facts", events=ev, meta={"judge": "rule_key_value"})


def test_the_audit_tells_a_right_retirement_a_wrongful_one_and_a_miss(hashing_embedder):
    rows = audit(_facts(), ["rules"], hashing_embedder)
    outcome = dict(zip(rows["label"], rows["outcome"]))
    assert outcome == {"d1": "retired", "o1": "missed", "l1": "wrongful"}
    s = audit_summary(rows).iloc[0]
    assert (s["retired"], s["missed"], s["wrongful"]) == (1, 1, 1)
    assert s["precision"] == 0.5 and s["recall"] == 0.5


def test_a_users_own_judge_is_audited_beside_the_rules(hashing_embedder):
    def mine(new, olds):
        return [("Dana" in old and "Porto" in new) or ("Omar" in old and "Globex" in new) for old in olds]

    mine.name = "mine"
    rows = audit(_facts(), ["rules", mine], hashing_embedder)
    summary = audit_summary(rows).set_index("judge")
    assert list(summary.index) == ["rules", "mine"]
    assert (summary.loc["mine", "retired"], summary.loc["mine", "missed"], summary.loc["mine", "kept"]) == (2, 0, 1)
    assert summary.loc["mine", "f1"] > summary.loc["rules", "f1"]


def test_the_judge_scenarios_ship_and_separate_judges(hashing_embedder):
    from vxmem.workbench.datasets import load_jsonl

    for name in ("restated_preference", "quiet_correction"):
        conv = load_jsonl(ROOT / "datasets" / f"{name}.jsonl")
        s = audit_summary(audit(conv, ["rules", "none"], hashing_embedder)).set_index("judge")
        assert s.loc["none", "retired"] == 0 and s.loc["none", "missed"] > 0
        assert s.loc["rules", "retired"] > 0
    assert s.loc["rules", "missed"] > 0  # quiet corrections: shapes the rules cannot read
