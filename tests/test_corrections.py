"""Corrections in an imported chat: found by a judge on import, or marked by hand, then replayed as corrections."""

import json

import pytest

from vxmem import Vectrix
from vxmem.cli import main
from vxmem.workbench.datasets import DatasetError, load_jsonl
from vxmem.workbench.datasets.corrections import correction_pairs, find_corrections, mark_correction
from vxmem.workbench.replay.run import replay

from servers import llm_stub

CHAT = ("session,role,text,timestamp\n"
        "s1,user,Dana lives in Lisbon.,2024-01-01T10:00:00Z\n"
        "s1,assistant,Nice city!,2024-01-01T10:00:05Z\n"
        "s1,user,Dana likes green tea.,2024-01-02T10:00:00Z\n"
        "s2,user,Omar lives in Oslo.,2024-01-03T10:00:00Z\n"
        "s1,user,Dana has moved to Porto.,2024-02-01T10:00:00Z\n")


@pytest.fixture
def chat(tmp_path):
    path = tmp_path / "chat.csv"
    path.write_text(CHAT)
    return path


def imported(chat, tmp_path, *flags):
    out = tmp_path / "chat.jsonl"
    assert main(["import", str(chat), "--embedder", "hashing", "-o", str(out), *flags]) == 0
    return load_jsonl(out)


def test_the_rules_judge_finds_the_correction_in_its_session_only(chat, tmp_path, capsys):
    conv = imported(chat, tmp_path, "--judge", "rules")
    assert correction_pairs(conv) == [("s1:0", "s1:3")]  # Dana's move; Omar's Oslo is another session
    err = capsys.readouterr().err
    assert "s1:3 (Dana has moved to Porto.) corrects s1:0 (Dana lives in Lisbon.)" in err and "1 correction(s)" in err
    fixed = next(e for e in conv.events if e.label == "s1:3")
    assert (fixed.type, fixed.target, fixed.outcome, fixed.correction) == ("feedback", "s1:0", "corrected",
                                                                         "Dana has moved to Porto.")
    rep = replay(conv, {}, embedder="hashing")  # the replay retires the old turn as the library does
    by_label = {lab: m for m in rep.memories for lab in m["labels"]}
    assert by_label["s1:0"]["superseded_by"] == by_label["s1:3"]["id"]
    assert by_label["s1:3"]["superseded_at"] is None


def test_without_a_judge_nothing_is_marked(chat, tmp_path):
    assert correction_pairs(imported(chat, tmp_path)) == []


def test_an_llm_endpoint_judges_on_import_and_its_failure_is_one_line(chat, tmp_path, capsys):
    with llm_stub() as base:
        conv = imported(chat, tmp_path, "--judge-base-url", f"{base}/v1", "--judge-model", "judge-recorded")
        # the stub says "contradicted" to all it is asked: each turn retires the one before it
        assert correction_pairs(conv) == [("s1:0", "s1:2"), ("s1:2", "s1:3")]
        two = tmp_path / "two.csv"
        two.write_text("\n".join(CHAT.splitlines()[:4]) + "\n")  # one question asked, of one earlier turn
        assert correction_pairs(imported(two, tmp_path, "--judge-base-url", f"{base}/v1",
                                         "--judge-model", "judge-keeps")) == []
        capsys.readouterr()
        out = tmp_path / "failed.jsonl"
        assert main(["import", str(chat), "--embedder", "hashing", "-o", str(out), "--judge-base-url",
                     f"{base}/v1", "--judge-model", "judge-malformed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vxmem: error: the judge failed") and not out.exists()


def test_marking_by_hand_checks_what_it_is_given(chat, tmp_path):
    conv = imported(chat, tmp_path)
    fixed = mark_correction(conv, "s1:0", "s1:2")
    assert correction_pairs(fixed) == [("s1:0", "s1:2")] and correction_pairs(conv) == []
    for old, new, why in (("s1:2", "s1:0", "comes before"), ("s1:0", "s1:0", "cannot correct itself"),
                          ("nope", "s1:2", "no memory labelled 'nope'")):
        with pytest.raises(DatasetError, match=why):
            mark_correction(conv, old, new)
    with pytest.raises(DatasetError, match="not a turn or a fact"):
        mark_correction(fixed, "s1:1", "s1:2")  # already a correction
    assert json.loads(fixed.to_jsonl().splitlines()[-1])  # still a dataset that saves


def test_a_judge_is_asked_about_the_nearest_earlier_live_turns_only():
    asked = []

    def judge(new, old):
        asked.append((new, list(old)))
        return ["Lisbon" in o for o in old]

    conv = load_jsonl_text(CHAT)
    with Vectrix():  # nothing stored: the judge reads the dataset, not a memory
        pairs = find_corrections(conv, judge, "hashing", candidates=1)
    assert pairs == [("s1:0", "s1:2")]
    assert all(len(old) <= 1 for _, old in asked)


def load_jsonl_text(csv_text: str):
    import tempfile
    from pathlib import Path

    from vxmem.workbench.datasets.chatlogs import load_chatlog

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "chat.csv"
        path.write_text(csv_text)
        return load_chatlog(str(path), None)
