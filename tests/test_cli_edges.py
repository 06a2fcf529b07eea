"""The `vxmem` command at its edges: every file it writes is checked before any work, a file it
reads is never the one it writes, and what it refuses is one line on stderr and exit code 2."""

import os

import pandas as pd
import pytest

from vxmem import Vectrix
from vxmem.cli import main
from vxmem.workbench.datasets import load_jsonl
from vxmem.workbench.synth import generate

from helpers import CHAT_CSV


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "mu.jsonl"
    generate("many_users", users=2).save(path)
    return path


@pytest.fixture
def exported(tmp_path, capsys):
    """A database of two memories and its export."""
    db, out = tmp_path / "db.vxdb", tmp_path / "a.jsonl"
    with Vectrix(str(db), embedder="hashing") as vx:
        vx.remember("I live in Lisbon")
        vx.remember("My cat is called Miso")
    assert main(["export", str(db), "-o", str(out)]) == 0
    capsys.readouterr()
    return db, out


def _error_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vxmem: error: "), err
    return err


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ---------------------------------------------------------------- outputs checked before any work


@pytest.fixture
def no_work(monkeypatch):
    """Every long piece of work made to fail the test: a check that comes after one is too late."""
    import vxmem.workbench.analysis.audit
    import vxmem.workbench.replay.run
    import vxmem.workbench.sweep.run
    import vxmem.workbench.systems.compare

    def no(*args, **kwargs):
        raise AssertionError("the work started before every output was checked")

    for module, name in ((vxmem.workbench.replay.run, "replay_many"), (vxmem.workbench.sweep.run, "sweep"),
                         (vxmem.workbench.systems.compare, "compare"), (vxmem.workbench.analysis.audit, "audit")):
        monkeypatch.setattr(module, name, no)


@pytest.mark.parametrize("argv, message", [
    (["replay", "DATA", "--embedder", "hashing", "-o", "ok.csv", "--save", "nodir/x.npz"],
     "--save 'nodir/x.npz': no directory 'nodir'"),
    (["replay", "DATA", "--embedder", "hashing", "-o", "nodir/x.csv"], "-o 'nodir/x.csv': no directory 'nodir'"),
    (["replay", "DATA", "--embedder", "hashing", "-o", "afile/x.csv"], "'afile' is not a directory"),
    (["replay", "DATA", "--embedder", "hashing", "-o", "adir.csv"], "-o 'adir.csv': it is a directory"),
    (["sweep", "DATA", "--embedder", "hashing", "--half-life", "1,3", "-o", "p.csv", "--per-probe", "nodir/pp.csv"],
     "--per-probe 'nodir/pp.csv': no directory 'nodir'"),
    (["sweep", "DATA", "--embedder", "hashing", "-o", "nodir/p.csv"], "-o 'nodir/p.csv': no directory"),
    (["compare", "DATA", "-o", "ok.csv", "--per-probe", "nodir/pp.csv"], "--per-probe 'nodir/pp.csv'"),
    (["compare", "DATA", "--chart", "afile/c.html"], "--chart 'afile/c.html': 'afile' is not a directory"),
    (["audit", "DATA", "--embedder", "hashing", "-o", "nodir/a.csv"], "-o 'nodir/a.csv': no directory"),
    (["synth", "many_users", "-o", "nodir/d.jsonl"], "-o 'nodir/d.jsonl': no directory"),
    (["export", "DB", "-o", "adir.jsonl"], "-o 'adir.jsonl': it is a directory"),
])
def test_a_bad_output_is_refused_before_any_work_and_nothing_is_written(
        tmp_path, small, exported, capsys, monkeypatch, no_work, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("a file, not a directory")
    (tmp_path / "adir.csv").mkdir()
    (tmp_path / "adir.jsonl").mkdir()
    before = _files(tmp_path)
    argv = [{"DATA": str(small), "DB": str(exported[0])}.get(a, a) for a in argv]
    assert main(argv) == 2
    assert message in _error_line(capsys)
    assert _files(tmp_path) == before


def test_replay_and_sweep_with_one_bad_output_write_none(tmp_path, small, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["replay", str(small), "--embedder", "hashing", "-o", "ok.csv", "--save", "nodir/x.npz"]) == 2
    _error_line(capsys)
    assert not (tmp_path / "ok.csv").exists()
    assert main(["replay", str(small), "--embedder", "hashing", "--save", "r.npz"]) == 0
    capsys.readouterr()
    assert main(["sweep", "r.npz", "--half-life", "1,3", "-o", "p.csv", "--per-probe", "nodir/pp.csv"]) == 2
    _error_line(capsys)
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("argv", [["sweep", "DATA", "-o", "p.csv", "--per-probe", "./p.csv"],
                                  ["compare", "DATA", "-o", "x.csv", "--per-probe", "x.csv"]])
def test_two_outputs_naming_one_file_are_refused(tmp_path, small, capsys, monkeypatch, no_work, argv):
    monkeypatch.chdir(tmp_path)
    assert main([str(small) if a == "DATA" else a for a in argv]) == 2
    assert "-o and --per-probe name the same file" in _error_line(capsys)


# ---------------------------------------------------------------- a file read is never the one written


def test_export_refuses_to_write_over_the_database_it_reads(tmp_path, exported, capsys):
    db, _ = exported
    same = tmp_path / "same.jsonl"  # a database named like an export
    same.write_bytes(db.read_bytes())
    (tmp_path / "link.jsonl").symlink_to(same)
    before = same.read_bytes()
    for out in (same, tmp_path / "." / "same.jsonl", tmp_path / "link.jsonl"):
        assert main(["export", str(same), "-o", str(out)]) == 2
        assert "which this command reads" in _error_line(capsys)
        assert same.read_bytes() == before


def test_restore_and_import_refuse_to_write_over_the_file_they_read(tmp_path, exported, capsys):
    _, export = exported
    before = export.read_bytes()
    assert main(["restore", str(export), "--db", str(export)]) == 2
    assert f"cannot restore into {export}: that is" in _error_line(capsys)
    src = tmp_path / "chat.csv"
    src.write_text(CHAT_CSV)
    assert main(["import", str(src), "-o", str(tmp_path / "." / "chat.csv")]) == 2
    assert "which this command reads" in _error_line(capsys)
    assert export.read_bytes() == before and src.read_text() == CHAT_CSV


# ---------------------------------------------------------------- restore: an OSError is one line


def test_a_restore_the_file_system_refuses_is_one_line_and_leaves_nothing(tmp_path, exported, capsys):
    _, export = exported
    room = tmp_path / "room"
    room.mkdir()
    # A name the target fits in but the restore's temporary file beside it does not: ENAMETOOLONG, even for root.
    target = room / ("r" * (os.pathconf(room, "PC_NAME_MAX") - 10) + ".vxdb")
    assert main(["restore", str(export), "--db", str(target)]) == 2
    assert f"cannot restore into {target}: File name too long" in _error_line(capsys)
    assert os.listdir(room) == []


def test_a_restore_into_a_path_under_a_file_is_refused(tmp_path, exported, capsys):
    _, export = exported
    (tmp_path / "somefile").write_text("x")
    assert main(["restore", str(export), "--db", str(tmp_path / "somefile" / "r.vxdb")]) == 2
    err = _error_line(capsys)
    assert "cannot restore into" in err and "somefile' is not a directory" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_restore_into_a_read_only_directory_is_refused(tmp_path, exported, capsys):
    _, export = exported
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert main(["restore", str(export), "--db", str(ro / "r.vxdb")]) == 2
        assert f"cannot restore into {ro / 'r.vxdb'}: the directory" in _error_line(capsys)
        assert os.listdir(ro) == []
    finally:
        ro.chmod(0o755)


# ---------------------------------------------------------------- probes add: --time, the options' names


@pytest.mark.parametrize("text, seconds", [("1709600000", 1709600000.0), ("1709600000.5", 1709600000.5),
                                           ("2024-03-05T00:53:20Z", 1709600000.0),
                                           ("20240305", 1709596800.0)])  # ISO's basic form stays a date
def test_probe_time_takes_iso_8601_or_epoch_seconds(imported, capsys, text, seconds):
    path, labels = imported
    assert main(["probes", "add", str(path), "--query", "Where do I live?", "--expect", labels[2],
                 "--time", text]) == 0
    assert load_jsonl(path).probes[0].time == seconds


@pytest.mark.parametrize("text, words", [("nan", "--time: epoch seconds must be a finite number"),
                                         ("inf", "--time: epoch seconds must be a finite number"),
                                         ("soon", "--time: expected an ISO-8601 time"),
                                         ("1e30", "--time is out of range")])
def test_a_bad_probe_time_is_refused_by_its_option(imported, capsys, text, words):
    path, labels = imported
    before = path.read_bytes()
    assert main(["probes", "add", str(path), "--query", "Where?", "--expect", labels[0], "--time", text]) == 2
    assert words in _error_line(capsys)
    assert path.read_bytes() == before


def test_probe_errors_name_the_commands_options(imported, capsys):
    path, labels = imported
    assert main(["probes", "add", str(path), "--query", "Where?", "--expect", labels[0], "--stale", labels[0]]) == 2
    err = _error_line(capsys)
    assert "in both --expect and --stale" in err and "_labels" not in err
    assert main(["probes", "add", str(path), "--query", "Where?", "--stale", "nope"]) == 2
    assert "--stale: 'nope' is not the label of a memory" in _error_line(capsys)


def test_probes_add_names_the_probe_it_added_even_before_others(imported, capsys):
    path, labels = imported
    assert main(["probes", "add", str(path), "--query", "Where now?", "--expect", labels[2]]) == 0
    assert main(["probes", "add", str(path), "--query", "My cat?", "--expect", labels[1],
                 "--time", "2024-01-03T00:00:00Z"]) == 0  # placed before q1 on the timeline
    assert capsys.readouterr().out.splitlines()[-1].startswith("added probe 'q2'")


def test_probes_add_refuses_a_read_only_dataset_and_keeps_a_writable_ones_permissions(imported, capsys):
    path, labels = imported
    os.chmod(path, 0o444)
    before = path.read_bytes()
    assert main(["probes", "add", str(path), "--query", "Where now?", "--expect", labels[2]]) == 2
    assert "read-only" in _error_line(capsys)
    assert path.read_bytes() == before and oct(path.stat().st_mode & 0o777) == oct(0o444)
    assert not list(path.parent.glob("*.tmp"))
    os.chmod(path, 0o640)
    assert main(["probes", "add", str(path), "--query", "Where now?", "--expect", labels[2]]) == 0
    assert path.read_bytes() != before and oct(path.stat().st_mode & 0o777) == oct(0o640)


# ---------------------------------------------------------------- small ones


@pytest.mark.parametrize("argv", [["sweep", "DATA", "--top", "0"], ["sweep", "DATA", "--top", "-1"],
                                  ["audit", "DATA", "--top", "0"]])
def test_top_must_be_at_least_one(small, capsys, no_work, argv):
    assert main([str(small) if a == "DATA" else a for a in argv]) == 2
    assert "argument --top: must be >= 1" in _error_line(capsys)


def test_an_unknown_sort_is_refused_before_the_sweep(small, capsys, no_work):
    assert main(["sweep", str(small), "--half-life", "1,3", "--sort", "foo"]) == 2
    assert "--sort 'foo': not a metric; choose from hit, recall, ndcg" in _error_line(capsys)


def test_sort_by_a_probes_reciprocal_rank_sorts_by_its_mean(small, capsys):
    assert main(["sweep", str(small), "--embedder", "hashing", "--half-life", "1,3", "--sort", "rr"]) == 0
    assert "sorted by mrr" in capsys.readouterr().out


def test_format_errors_name_the_format_option(tmp_path, capsys):
    src = tmp_path / "chat.txt"
    src.write_text("hello\n")
    for verb in ("import", "replay"):
        assert main([verb, str(src)]) == 2
        err = _error_line(capsys)
        assert "pass --format" in err and "format=" not in err
    assert main(["probes", "list", str(src)]) == 2
    err = _error_line(capsys)
    assert "vxmem JSONL" in err and "format=" not in err and "--format" not in err


def test_a_good_run_still_writes_every_output(tmp_path, small, capsys):
    out, per_probe = tmp_path / "p.csv", tmp_path / "pp.csv"
    assert main(["sweep", str(small), "--embedder", "hashing", "--half-life", "1,3", "--top", "1",
                 "-o", str(out), "--per-probe", str(per_probe)]) == 0
    assert len(pd.read_csv(out)) == 2 and len(pd.read_csv(per_probe)) > 0
