"""`vxmem probes`: users write probes for their own chats (expected and stale memories), saved in the dataset."""

import pytest

from vxmem.cli import main
from vxmem.workbench.datasets import load_jsonl
from vxmem.workbench.replay.run import replay

from helpers import ROOT


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("vxmem: error: ") and err.count("\n") == 1
    return err


def test_a_probe_added_to_an_imported_chat_can_mark_a_memory_stale(imported, capsys, hashing_embedder):
    path, (lisbon, cat, porto) = imported
    assert main(["probes", "add", str(path), "--query", "Where do I live now?", "--expect", porto,
                 "--stale", lisbon, "--session", "me", "--category", "moves"]) == 0
    assert "added probe 'q1'" in capsys.readouterr().out
    conv = load_jsonl(path)
    probe = conv.probes[0]
    assert (probe.query, dict(probe.relevant), probe.stale, probe.category) == (
        "Where do I live now?", {porto: 1.0}, (lisbon,), "moves")
    rep = replay(conv, embedder=hashing_embedder)
    row = rep.probes[0]
    assert row["stale"] == [lisbon] and row["relevant"] == [porto]
    assert row["stale_leak"] > 0  # nothing superseded the old fact, so recall still shows it: now measurable
    assert main(["probes", "list", str(path)]) == 0
    assert "Where do I live now?" in capsys.readouterr().out
    assert main(["probes", "add", str(path), "--query", "My cat?", "--expect", cat]) == 0  # no session, no category
    assert main(["probes", "list", str(path)]) == 0
    listed = capsys.readouterr().out
    assert "(every)" in listed and "None" not in listed, listed


@pytest.mark.parametrize("bad, words", [(["--expect", "no-such-label"], "not the label of a memory"),
                                        (["--session", "nobody"], "has no memories"),
                                        (["--time", "2023-01-01T00:00:00Z", "--expect", "LISBON"],
                                         "said after the probe's time")])
def test_a_bad_probe_is_refused_and_the_file_is_unchanged(imported, capsys, bad, words):
    path, labels = imported
    bad = [labels[0] if b == "LISBON" else b for b in bad]
    before = path.read_bytes()
    assert main(["probes", "add", str(path), "--query", "Where do I live?", *bad]) == 2
    assert words in _error(capsys)
    assert path.read_bytes() == before


def test_a_probe_is_deleted_by_its_label_and_an_unknown_one_is_refused(imported, capsys):
    path, labels = imported
    assert main(["probes", "add", str(path), "--query", "My cat?", "--expect", labels[1], "--label", "cat"]) == 0
    assert main(["probes", "delete", str(path), "cat"]) == 0
    assert load_jsonl(path).probes == []
    before = path.read_bytes()
    capsys.readouterr()
    assert main(["probes", "delete", str(path), "cat"]) == 2
    assert "no probe labelled 'cat'" in _error(capsys) and path.read_bytes() == before


def test_probes_are_written_into_vxmem_jsonl_only(tmp_path, capsys):
    locomo = tmp_path / "locomo.json"
    locomo.write_bytes((ROOT / "datasets" / "fixtures" / "locomo_sample.json").read_bytes())
    assert main(["probes", "add", str(locomo), "--query", "anything?"]) == 2
    assert "vxmem JSONL" in _error(capsys)
