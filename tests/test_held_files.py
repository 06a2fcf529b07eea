"""The files a handle holds, and only those: a restore's target, a path something else was
moved onto, a relative path after ``chdir()``, the descriptors a closed handle leaves, a
server stopped by SIGTERM, and saved caches changed under an open handle.

Each runs the processes and signals it needs for real; processes are ordered by pipes,
never by a clock.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import httpx
import pytest

from vxmem import DatabaseLockedError, InvalidDatabaseError, Vectrix

from helpers import ROOT, T0, TESTS, WordHashEmbedder, reap, run_python
from servers import free_port, wait_ready

PRELUDE = f"import sys\nsys.path.insert(0, {TESTS!r})\n"


def _child(code: str, *args: str) -> subprocess.Popen:
    """``code`` in a fresh interpreter that can ``import helpers``, talked to through pipes."""
    return subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(code), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _texts(path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return [t for (t,) in conn.execute("SELECT text FROM vx_docs ORDER BY rowid")]
    finally:
        conn.close()


# ------------------------------------------------------------------ a restore holds its target

RESTORE = """
    from vxmem import Vectrix
    from helpers import WordHashEmbedder

    class Waiting(WordHashEmbedder):
        waited = False

        def __call__(self, texts):  # the first batch waits for the parent, mid-restore
            if not self.waited:
                self.waited = True
                print("building", flush=True)
                sys.stdin.readline()
            return super().__call__(texts)

    db = Vectrix.restore(sys.argv[1], sys.argv[2], embedder=Waiting())
    print("restored", len(db), flush=True)
    db.close()
"""


def test_a_writer_opening_the_target_of_a_running_restore_is_refused_and_nothing_is_lost(tmp_path):
    source, target = str(tmp_path / "src.vxdb"), str(tmp_path / "target.vxdb")
    with Vectrix(source, embedder=WordHashEmbedder()) as db:
        db.add([f"exported {i}" for i in range(5)])
        db.export(str(tmp_path / "chat.jsonl"))
    proc = _child(RESTORE, str(tmp_path / "chat.jsonl"), target)
    try:
        assert proc.stdout.readline().strip() == "building", proc.stderr.read()
        with pytest.raises(DatabaseLockedError, match="already open for writing"):
            Vectrix(target, embedder=WordHashEmbedder())
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.split() == ["restored", "5"]
    assert _texts(target) == [f"exported {i}" for i in range(5)]
    with Vectrix(target, embedder=WordHashEmbedder()) as db:  # the restore let go of it
        db.add(["after"])
    assert [n for n in os.listdir(tmp_path) if "restoring" in n] == []


# ------------------------------------------------------------------ a path moved onto


def test_a_database_moved_over_an_open_writers_path_is_never_written_by_that_writer(tmp_path):
    path, other = str(tmp_path / "db.vxdb"), str(tmp_path / "other.vxdb")
    with Vectrix(other, embedder=WordHashEmbedder()) as o:
        o.add([f"theirs {i}" for i in range(20)])
    db = Vectrix(path, embedder=WordHashEmbedder())
    db.add(["mine first"])
    os.replace(other, path)
    for i in range(20):
        db.add([f"mine {i}"])
    checkpointer = db.engine.database.checkpointer
    assert checkpointer is not None
    checkpointer.checkpoint()  # what the checkpoint thread runs every 256 commits
    db.close()
    assert _texts(path) == [f"theirs {i}" for i in range(20)]


# ------------------------------------------------------------------ descriptors


def _descriptors_under(folder) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            out.append(target)
    return out


def test_opening_and_closing_many_databases_leaves_no_descriptor_open(tmp_path):
    for i in range(40):
        with Vectrix(str(tmp_path / f"db{i}.vxdb"), embedder=WordHashEmbedder()) as db:
            db.add([f"one {i}"])
        with Vectrix(str(tmp_path / f"db{i}.vxdb"), read_only=True, embedder=WordHashEmbedder()) as db:
            assert len(db) == 1
        if i % 2:
            os.remove(tmp_path / f"db{i}.vxdb")
    assert _descriptors_under(tmp_path) == []


def test_a_writer_and_a_reader_of_one_file_in_one_process_close_in_either_order(tmp_path):
    path = str(tmp_path / "db.vxdb")
    for first_writer in (True, False):
        writer = Vectrix(path, embedder=WordHashEmbedder())
        writer.add(["a"])
        reader = Vectrix(path, read_only=True, embedder=WordHashEmbedder())
        for handle in ((writer, reader) if first_writer else (reader, writer)):
            handle.close()
        assert _descriptors_under(tmp_path) == []
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        assert len(db) == 2


EMFILE = """
    import os, resource
    from vxmem import Vectrix
    from helpers import WordHashEmbedder

    path = sys.argv[1]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 64, hard))
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for free in range(24):  # with 0, 1, 2, ... descriptors left: each open fails as what it is, or works
        try:
            Vectrix(path, embedder=WordHashEmbedder()).close()
            print("opened")
        except Exception as exc:
            print("refused", type(exc).__name__, " ".join(str(exc).split()))
        os.close(held.pop())
    for fd in held:
        os.close(fd)
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        print("holds", len(db))
"""


def test_running_out_of_descriptors_is_named_as_such_never_as_a_damaged_file(tmp_path):
    path = str(tmp_path / "db.vxdb")
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        db.add(["healthy"])
    got = run_python(EMFILE, path)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    refused = [line for line in lines if line.startswith("refused")]
    assert refused and "opened" in lines and lines[-1] == "holds 1", lines
    for line in refused:
        assert "too many open files" in line.lower() and "readable" not in line and "damaged" not in line, line


# ------------------------------------------------------------------ a relative path

CHDIR = """
    import os
    from vxmem import Vectrix
    from vxmem.store.mirror import file
    from helpers import WordHashEmbedder

    file.MIN_DOCUMENTS = 1
    here, elsewhere = sys.argv[1], sys.argv[2]
    os.chdir(here)
    db = Vectrix("chat.vxdb", embedder=WordHashEmbedder(), exact_threshold=1)
    db.add(["first"])
    os.chdir(elsewhere)
    db.add([f"later {i}" for i in range(30)])
    db.engine.database.checkpointer.checkpoint()
    db.search("later", limit=3)
    db.close()
"""


def test_a_relative_path_names_the_same_file_after_chdir(tmp_path):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    got = run_python(CHDIR, str(here), str(elsewhere))
    assert got.returncode == 0, got.stderr
    assert os.listdir(elsewhere) == []
    assert _texts(here / "chat.vxdb") == ["first"] + [f"later {i}" for i in range(30)]
    assert os.path.exists(here / "chat.vxdb.mirror")


# ------------------------------------------------------------------ SIGTERM stops a server cleanly

SERVE = """
    from vxmem.cli import main
    from vxmem.store.mirror import file, loading

    file.MIN_DOCUMENTS = 1  # a few memories keep a mirror file, as many do
    loading.RESAVE_GENERATIONS = 0
    loading.RESAVE_ROWS = 0
    sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_stops_vxmem_serve_after_its_close_saved_the_caches(tmp_path):
    path = str(tmp_path / "served.vxdb")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(SERVE), "serve", "--db", path,
                             "--port", str(port), "--embedder", "hashing"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        for i in range(5):
            got = httpx.post(f"{url}/v1/remember", json={"text": f"served {i}", "timestamp": T0 + i}, timeout=30)
            assert got.status_code == 200, got.text
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        reap(proc)
    assert not os.path.exists(path + "-wal")
    assert os.path.exists(path + ".mirror")
    with Vectrix(path, read_only=True) as db:
        assert db.engine.database.saved_at is not None  # the mirror came from the file: no rows read
        assert len(db) == 5


# ------------------------------------------------------------------ caches changed under an open handle

CHANGED = """
    import os, shutil
    from vxmem import Vectrix
    from vxmem.store.mirror import file, loading
    from helpers import T0, WordHashEmbedder

    file.MIN_DOCUMENTS = 1  # a mirror file, saved again at each close that follows a write
    loading.RESAVE_GENERATIONS = 0
    loading.RESAVE_ROWS = 0
    path, how = sys.argv[1], sys.argv[2]
    def fill(db, start, n):
        for i in range(start, start + n):
            db.remember(f"memory {i} about cats and tea", session=f"s{i % 7}", timestamp=T0 + i,
                        metadata={"n": i, "pad": "x" * (i % 50)})

    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        fill(db, 0, 3000)
    shutil.copy(path + ".mirror", path + ".older")
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        fill(db, 3000, 300)
        want = db.recall("tea", now=T0 + 9000, limit=5, mode="dense", filter={"pad": "x"}).ids
    db = Vectrix(path, embedder=WordHashEmbedder())  # its mirror from the file, not yet read
    assert db.engine.database.saved_at is not None
    if how == "truncate":
        os.truncate(path + ".mirror", 8192)
    else:
        with open(path + ".older", "rb") as f, open(path + ".mirror", "r+b") as out:
            out.write(f.read())
    got = db.recall("tea", now=T0 + 9000, limit=5, mode="dense", filter={"pad": "x"})
    metas = [r.metadata["n"] for r in db.scan()]
    db.close()
    print("same" if got.ids == want else "different", len(metas))
"""


@pytest.mark.parametrize("how", ["truncate", "older"])
def test_a_mirror_file_changed_in_place_under_an_open_handle_changes_nothing_it_reads(tmp_path, how):
    got = run_python(CHANGED, str(tmp_path / "db.vxdb"), how, timeout=300)
    assert got.returncode == 0, (got.returncode, got.stderr[-2000:])
    assert got.stdout.split() == ["same", "3300"]


# ------------------------------------------------------------------ a reader of a file being created


def _writer_child(path):
    """A writer_child.py process on ``path`` and ``say(command)``, its answer split in words."""
    proc = subprocess.Popen([sys.executable, f"{TESTS}/writer_child.py", path], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def say(cmd):
        proc.stdin.write(cmd + "\n")
        proc.stdin.flush()
        return proc.stdout.readline().split()

    return proc, say


def test_a_reader_of_a_new_file_its_writer_is_creating_finds_none_or_a_whole_one(tmp_path):
    path = str(tmp_path / "new.vxdb")
    proc, say = _writer_child(path)
    try:
        assert say("hold schema create 1") == ["ok", "armed"]
        assert say("open") == ["held", "create"]  # the writer is making the schema
        with pytest.raises(FileNotFoundError):
            Vectrix(path, read_only=True, embedder=WordHashEmbedder(dim=64))
        assert say("release") == ["ok", "opened"]
        with Vectrix(path, read_only=True, embedder=WordHashEmbedder(dim=64)) as reader:
            assert len(reader) == 0
        assert say("close") == ["ok", "closed"]
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        reap(proc)
    assert [n for n in os.listdir(tmp_path) if "creating" in n] == []


# ------------------------------------------------------------------ the log files of an open writer deleted


def _reader(path):
    return Vectrix(path, read_only=True, embedder=WordHashEmbedder(dim=64))


def test_a_reader_refuses_a_file_whose_open_writer_lost_its_log_files_and_nothing_is_lost(tmp_path):
    path = str(tmp_path / "chat.vxdb")
    proc, say = _writer_child(path)
    try:
        assert say("open") == ["ok", "opened"]
        assert say("add 40 w") == ["ok", "added"]
        with _reader(path) as reader:  # the writer's log is whole: the reader sees its 40 documents
            assert len(reader) == 40
        os.remove(path + "-wal")
        os.remove(path + "-shm")
        for _ in range(2):  # a second reader too: the first one made no new log that would hide the loss
            with pytest.raises(InvalidDatabaseError, match=r"open for writing, but its writer's .*-wal and .*-shm "
                                                           r"were deleted or replaced"):
                _reader(path)
        assert say("add 5 x") == ["ok", "added"]  # the writer goes on, into the deleted log
        assert say("close") == ["ok", "closed"]  # and its close writes the log into the file
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        reap(proc)
    with _reader(path) as reader:
        assert len(reader) == 45


def test_a_killed_writer_s_note_does_not_refuse_a_reader(tmp_path):
    path = str(tmp_path / "chat.vxdb")
    proc, say = _writer_child(path)
    try:
        assert say("open") == ["ok", "opened"]
        assert say("add 3 w") == ["ok", "added"]
        assert os.path.exists(path + ".writer")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        reap(proc)
    os.remove(path + "-wal")  # what the killed writer wrote since its last checkpoint goes with them
    os.remove(path + "-shm")
    with _reader(path) as reader:  # no writer holds the file: nothing to refuse
        assert len(reader) == 0
    with Vectrix(path, embedder=WordHashEmbedder(dim=64)) as writer:  # a new writer replaces the note
        writer.add(["again"])
        with _reader(path) as reader:
            assert len(reader) == 1
    assert not os.path.exists(path + ".writer")
