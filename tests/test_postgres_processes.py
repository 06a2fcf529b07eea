"""Many processes, one PostgreSQL database: each sees the others' acknowledged writes on its
next read, and concurrent writers lose nothing and store nothing twice.

The children are real interpreters; they start writing when the test says so on their stdin
and report each acknowledged write on their stdout, so nothing here waits on a clock.
"""

import json
import signal
import subprocess
import sys
import textwrap

import httpx
import psycopg
import pytest

from vxmem import Vectrix
from vxmem.core.errors import ConflictError

from helpers import DAY, ROOT, T0, TESTS, WordHashEmbedder, reap, run_python
from servers import free_port, run_vxmem, wait_ready

HOUR = 3600.0

WRITER = """
import sys
sys.path.insert(0, {tests!r})
from vxmem import Vectrix
from vxmem.core.errors import ConflictError
from helpers import T0, WordHashEmbedder

url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = Vectrix(url, embedder=WordHashEmbedder())
print("ready", flush=True)
sys.stdin.readline()
for i in range(n):
    print("mem", db.remember(f"{{name}} says number {{i}}", session="shared", timestamp=T0 + i), flush=True)
    try:
        db.add([f"shared doc {{i}} from {{name}}"], ids=[f"doc-{{i}}"])
        print("doc", f"doc-{{i}}", flush=True)
    except ConflictError:
        print("taken", f"doc-{{i}}", flush=True)
db.close()
print("done", flush=True)
"""


@pytest.fixture
def pg(make_db, pg_url, word_embedder):
    return make_db(pg_url, embedder=word_embedder)


def _child(pg_url, code):
    got = run_python(code, pg_url)
    assert got.returncode == 0, got.stderr
    return got.stdout.split()


def test_a_write_acknowledged_by_another_process_is_in_the_next_recall(pg, pg_url):
    pg.remember("the user likes tea", session="s", timestamp=T0)
    assert len(pg.recall("bicycle", session="s", now=T0 + HOUR, mode="lexical")) == 0  # caches built, then:
    (new,) = _child(pg_url, """
        from vxmem import Vectrix
        from helpers import T0, WordHashEmbedder
        with Vectrix(sys.argv[1], embedder=WordHashEmbedder()) as db:
            print(db.remember("the user owns a red bicycle", session="s", timestamp=T0 + 60))
    """)
    for mode in ("dense", "lexical", "hybrid"):
        assert pg.recall("red bicycle", session="s", now=T0 + HOUR, mode=mode).ids[0] == new
    (fixed,) = _child(pg_url, f"""
        from vxmem import Vectrix
        from helpers import T0, WordHashEmbedder
        with Vectrix(sys.argv[1], embedder=WordHashEmbedder()) as db:
            print(db.feedback({new!r}, "corrected", correction="the user owns a blue bicycle", timestamp=T0 + 120))
    """)
    got = pg.recall("bicycle", session="s", now=T0 + DAY).ids
    assert got[0] == fixed and new not in got
    assert [e.id for e in pg.history(fixed)] == [new, fixed]
    _child(pg_url, f"""
        from vxmem import Vectrix
        from helpers import WordHashEmbedder
        with Vectrix(sys.argv[1], embedder=WordHashEmbedder()) as db:
            print(db.forget(ids=[{fixed!r}, {new!r}]))
    """)
    assert pg.recall("bicycle", session="s", now=T0 + DAY, include_superseded=True, mode="lexical").ids == []
    assert len(pg) == 1


def test_two_handles_on_one_url_follow_each_other(pg, pg_url, make_db, word_embedder):
    other = make_db(pg_url, embedder=word_embedder)
    a = pg.remember("the user lives in Paris", session="s", timestamp=T0)
    # ``other`` writes before it reads anything: its transaction starts behind pg's commit,
    # and its mirror takes in both through the change log.
    b = other.remember("the user works in Lyon", session="s", timestamp=T0 + 60)
    assert [r.id for r in other.scan()] == [a, b] == [r.id for r in pg.scan()]
    pg.feedback(b, "useful", timestamp=T0 + 120)
    assert other.get(b).metadata == pg.get(b).metadata
    assert other.recall("Lyon", session="s", now=T0 + HOUR).ids[0] == b


def _start(pg_url, name, n):
    code = textwrap.dedent(WRITER.format(tests=TESTS))
    proc = subprocess.Popen([sys.executable, "-c", code, pg_url, name, str(n)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    line = proc.stdout.readline()
    assert line == "ready\n", proc.stderr.read()
    return proc


def test_concurrent_writers_in_two_processes_lose_nothing_and_store_nothing_twice(pg, pg_url):
    n = 40
    assert len(pg) == 0
    procs = [_start(pg_url, name, n) for name in ("ann", "bob")]
    try:
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.stdout.read().split("\n") for p in procs]
        for p in procs:
            assert p.wait() == 0, p.stderr.read()
    finally:
        for p in procs:
            reap(p)
    lines = [line.split() for out in outs for line in out if line]
    assert sum(1 for line in lines if line == ["done"]) == 2
    mems = [line[1] for line in lines if line[0] == "mem"]
    docs = [line[1] for line in lines if line[0] == "doc"]
    taken = [line[1] for line in lines if line[0] == "taken"]
    assert len(mems) == 2 * n == len(set(mems))
    assert sorted(docs + taken) == sorted([f"doc-{i}" for i in range(n)] * 2)
    assert sorted(docs) == sorted(f"doc-{i}" for i in range(n))  # each id stored by exactly one writer
    # The handle opened before them follows every commit; a fresh open reads the same.
    stored = [r.id for r in pg.scan()]
    assert len(stored) == len(set(stored)) == 3 * n
    assert set(mems) | set(docs) == set(stored)
    with Vectrix(pg_url, embedder=WordHashEmbedder()) as fresh:
        assert [r.id for r in fresh.scan()] == stored
    turns = [r.metadata["_vx_turn"] for r in pg.turns("shared", now=T0 + DAY)]
    assert len(turns) == 2 * n == len(set(turns))  # the turn counter was taken atomically


def test_a_process_killed_with_sigkill_loses_nothing_it_acknowledged(pg, pg_url):
    proc = _start(pg_url, "kim", 10_000)
    try:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        acked = []
        while len(acked) < 30:
            kind, value = proc.stdout.readline().split()
            if kind == "mem":
                acked.append(value)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        reap(proc)
    stored = {r.id for r in pg.scan()}
    assert set(acked) <= stored
    with Vectrix(pg_url, embedder=WordHashEmbedder()) as fresh:  # and the database takes new writes
        fresh.remember("after the crash", session="shared", timestamp=T0 + DAY)
        assert {r.id for r in fresh.scan()} >= set(acked)


def _servers(pg_url, n):
    """``n`` ``vxmem serve --db pg_url`` started at once (their start-ups overlap): their base URLs."""
    ports = [free_port() for _ in range(n)]
    procs = [subprocess.Popen([sys.executable, "-m", "vxmem", "serve", "--db", pg_url, "--port", str(port)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for port in ports]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url, proc in zip(urls, procs):
            wait_ready(url, proc)
    except BaseException:
        for proc in procs:
            reap(proc)
        raise
    return urls, procs


def test_two_servers_on_one_database_serve_each_others_writes(pg_url):
    (one, two), procs = _servers(pg_url, 2)
    try:
        u = {"user": "ann"}
        mid = httpx.post(f"{one}/v1/remember", json={**u, "text": "I prefer dark mode", "session": "chat",
                                                      "timestamp": T0}).json()["id"]
        hits = httpx.post(f"{two}/v1/recall", json={**u, "query": "dark mode", "now": T0 + DAY}).json()
        assert [h["id"] for h in hits["results"]] == [mid]
        fixed = httpx.post(f"{two}/v1/feedback", json={**u, "id": mid, "outcome": "corrected",
                                                       "correction": "I prefer light mode",
                                                       "timestamp": T0 + DAY}).json()["id"]
        chain = httpx.post(f"{one}/v1/history", json={**u, "id": fixed, "now": T0 + 2 * DAY}).json()["entries"]
        assert [e["id"] for e in chain] == [mid, fixed]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
            reap(proc)


def test_vxmem_export_takes_a_postgres_url(pg, pg_url, tmp_path):
    mid = pg.remember("the user likes jazz", session="s", timestamp=T0)
    out = tmp_path / "pg.jsonl"
    got = run_vxmem("export", pg_url, "-o", str(out), "--vectors")
    assert got.returncode == 0, got.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["header", "memory", "counter", "end"]
    assert lines[1]["id"] == mid and lines[1]["text"] == "the user likes jazz" and lines[1]["vector"]


def test_a_write_that_began_behind_another_process_takes_its_commit_in(pg, pg_url, make_db, word_embedder):
    """Between a handle's catch-up and its transaction another process commits: the metadata
    it meant to overwrite is refused (nothing written), an insert lands after the other's."""
    other = make_db(pg_url, embedder=word_embedder)
    mid = pg.remember("the user lives in Paris", session="s", kind="fact", timestamp=T0)
    engine = pg.engine
    with engine.locked() as m:  # the snapshot a verb reads, then the write it computed from it
        stale = dict(m.metas[m.pos_of_id[mid]])
        other.feedback(mid, "useful", timestamp=T0 + 30)
        with pytest.raises(ConflictError, match="another process"):
            with engine.transaction() as tx:
                tx.update_meta(mid, {**stale, "note": "stale"})
    assert "note" not in pg.get(mid).metadata and pg.get(mid).metadata == other.get(mid).metadata
    with engine.locked():
        added = other.remember("the user has a cat", session="s", timestamp=T0 + 40)
        new = pg.remember("the user has a dog", session="s", timestamp=T0 + 50)  # nested: no catch-up first
    assert [r.id for r in pg.scan()] == [mid, added, new] == [r.id for r in other.scan()]


def test_a_handle_further_behind_than_the_change_log_reads_every_row_again(pg, pg_url, make_db, word_embedder):
    other = make_db(pg_url, embedder=word_embedder)
    first = pg.remember("the user likes tea", session="s", timestamp=T0)
    assert other.recall("tea", session="s", now=T0 + HOUR).ids == [first]
    second = pg.remember("the user likes green tea", session="s", timestamp=T0 + 60)
    pg.forget(ids=[first], now=T0 + 120)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as if the log were pruned past other's generation
        conn.execute("UPDATE vx_meta SET value = (SELECT value FROM vx_meta WHERE key = 'generation') "
                     "WHERE key = 'changes_since'")
        conn.execute("DELETE FROM vx_changes")
    mirror = other.engine.mirror
    assert other.recall("tea", session="s", now=T0 + HOUR).ids == [second]
    assert other.engine.mirror is not mirror  # a whole new mirror, read from the rows


def test_a_server_that_cannot_reach_the_database_says_so_without_the_password(tmp_path):
    url = f"postgresql://vx:secret@/memory?host={tmp_path}"  # no server listens there
    got = run_vxmem("serve", "--db", url, "--port", str(free_port()))
    assert got.returncode != 0
    assert "cannot open postgresql://vx:***@" in got.stderr and "secret" not in got.stderr
