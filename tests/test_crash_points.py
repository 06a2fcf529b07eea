"""SIGKILL at chosen points: the background index build, the merge of pending vectors into
the graph, close() saving the index and the mirror, consolidate(), expire() and restore.

Each trial runs ``tests/crash_child.py`` in a process of its own (forked from one that has
imported vxmem, which is most of an interpreter's start-up): a seeded workload that
acknowledges every call that returned on its stdout, and kills itself with SIGKILL at the
seed's point (the nth call of a public function, in whichever thread makes it; see the
child's docstring). Trials of one scenario share a database file, so each starts from
what the previous kill left. After each kill the parent checks, before anything else
opens the file, that every acknowledged write is there, that nothing is there twice or
half-written, and that FTS5 holds exactly what a rebuild from the rows would; then it
reopens the file as a writer would after a crash and checks that the mirror (read from
its file or the rows) and the HNSW index (loaded from its file or rebuilt) answer exactly
as a copy of the database opened with no cache file beside it.
"""

import json
import os
import random
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.memory import K_CONSOLIDATED_FROM, K_SUPERSEDED_BY, K_SUPERSEDES
from vxmem.store.lexical.fts import TOKENIZE, scope_token
from vxmem.store.mirror import file as mirror_file
from vxmem.store.vector import graph as hnsw_graph

from helpers import TESTS, WordHashEmbedder, vector_of

CHILD = os.path.join(TESTS, "crash_child.py")
DIM = 64
VOCAB = "tea coffee paris london dark light mode pdf csv report cat dog blue red summary actually also".split()
QUERIES = ("tea coffee paris", "dark mode report", "cat dog blue", "summary of the csv")
K_CONSOLIDATED_INTO = "_vx_consolidated_into"


def _embedder():
    return WordHashEmbedder(dim=DIM)


@pytest.fixture(autouse=True)
def _small_files(monkeypatch):
    monkeypatch.setattr(mirror_file, "MIN_DOCUMENTS", 8)  # as in the child: small databases keep a mirror file


class Forks:
    """``crash_child.py --forks``, the fork server of this module's trials (its own session, so
    that a trial that hangs is stopped with it)."""

    def __init__(self, scratch):
        self.scratch = scratch
        self.proc = subprocess.Popen([sys.executable, CHILD, "--forks"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)

    def run(self, argv, timeout=120):
        """The trial's exit code, stdout and stderr."""
        out, err = self.scratch / "trial.out", self.scratch / "trial.err"
        self.proc.stdin.write(json.dumps({"argv": argv, "out": str(out), "err": str(err)}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.close()
            raise AssertionError(f"the trial {argv} did not end in {timeout} s: {err.read_text()}")
        code = self.proc.stdout.readline()
        assert code.strip(), f"the fork server ended: {err.read_text() if err.exists() else ''}"
        return int(code), out.read_bytes(), err.read_text()

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    server = Forks(tmp_path_factory.mktemp("trials"))
    yield server
    server.close()


def run_child(forks, path, scenario, seed, *extra):
    """Run one trial; the acknowledged lines, split."""
    code, out, err = forks.run([str(path), scenario, str(seed), *extra])
    assert code == -signal.SIGKILL, f"the child did not die by SIGKILL ({code}): {err}"
    lines = out.decode().splitlines(keepends=True)
    assert lines and lines[0] == "start\n", err
    return [line.split() for line in lines[1:] if line.endswith("\n")]  # a line cut by the kill is no acknowledgement


class Ledger:
    """What the children acknowledged, across the trials of one database."""

    def __init__(self):
        self.present = {}        # id -> its expiry (None: none), of memories acknowledged and not since removed
        self.gone = set()        # ids an acknowledged forget() removed
        self.corrections = []    # (old, new)
        self.consolidated = []   # (facts, turns) of acknowledged consolidate() calls
        self.expiring = None     # the `now` of an expire() that was called
        self.expired = False     # ... and returned
        self.points = set()      # the kill points the trials chose
        self.hits = 0            # trials killed at their point (the others at the end of their run)

    def read(self, parts):
        tag = parts[0]
        if tag == "mem":
            self.present[parts[1]] = None if parts[2] == "none" else float(parts[2])
        elif tag == "corr":
            self.corrections.append((parts[1], parts[2]))
            self.present[parts[2]] = None
        elif tag == "forgetting":
            self.present.pop(parts[1], None)
        elif tag == "gone":
            self.present.pop(parts[1], None)
            self.gone.add(parts[1])
        elif tag == "cons":
            bar = parts.index("|")
            facts, turns = parts[1:bar], parts[bar + 1:]
            self.consolidated.append((facts, turns))
            self.present.update(dict.fromkeys(facts))
            for t in turns:
                self.present.pop(t, None)
        elif tag == "expiring":
            self.expiring = float(parts[1])
        elif tag == "expired":
            self.expired = True
        elif tag == "point":
            self.points.add(parts[1])
        elif tag == "hit":
            self.hits += 1


# ---------------------------------------------------------------------------- the file as the kill left it


def read_rows(path):
    conn = sqlite3.connect(path)
    try:
        docs = {id: (rowid, text, _loads(meta)) for rowid, id, text, meta in
                conn.execute("SELECT rowid, id, text, metadata FROM vx_docs")}
    finally:
        conn.close()
    return docs


def _loads(text):
    return json.loads(text)


def check_fts(conn):
    """FTS5 holds exactly what a rebuild from the rows up to ``fts_upto`` would hold (every
    word of the vocabulary and every session's scope token match the same rowids), and
    passes its own integrity check."""
    upto = int(conn.execute("SELECT value FROM vx_meta WHERE key = 'fts_upto'").fetchone()[0])
    rows = [(r, t, scope_token(_loads(m))) for r, t, m in
            conn.execute("SELECT rowid, text, metadata FROM vx_docs WHERE rowid <= ?", (upto,))]
    fresh = sqlite3.connect(":memory:")
    fresh.execute(f"CREATE VIRTUAL TABLE vx_fts USING fts5(text, scope, content='', tokenize='{TOKENIZE}')")
    fresh.executemany("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)", rows)
    exprs = [f'text : "{w}"' for w in VOCAB] + [f'scope : "{s}"' for s in {s for _, _, s in rows if s}]
    for expr in exprs:
        got = {r for (r,) in conn.execute("SELECT rowid FROM vx_fts WHERE vx_fts MATCH ?", (expr,))}
        want = {r for (r,) in fresh.execute("SELECT rowid FROM vx_fts WHERE vx_fts MATCH ?", (expr,))}
        assert got == want, f"FTS5 differs from a rebuild on {expr}: extra {got - want}, missing {want - got}"
    conn.execute("INSERT INTO vx_fts (vx_fts) VALUES ('integrity-check')")
    fresh.close()


def check_rows(path, ledger):
    """Every acknowledged write is there, nothing twice, nothing half-written; FTS5 as rebuilt."""
    docs = read_rows(path)
    if ledger.expiring is not None:  # one transaction: all of what had expired went, or none of it
        due = {i for i, e in ledger.present.items() if e is not None and e <= ledger.expiring}
        held = due & docs.keys()
        assert held in (due, set()), f"expire() left {len(held)} of {len(due)} expired memories"
        assert not (ledger.expired and held), "an acknowledged expire() left expired memories"
        for i in due - held:
            del ledger.present[i]
        ledger.expiring, ledger.expired = None, False
    carried = defaultdict(list)  # the consolidated_from list -> the facts carrying it
    for id, (_, _, meta) in docs.items():
        if meta.get(K_CONSOLIDATED_FROM):
            carried[tuple(meta[K_CONSOLIDATED_FROM])].append(id)
    into = {t: facts for turns, facts in carried.items() for t in turns}
    for mid in ledger.present:
        assert mid in docs or mid in into, f"acknowledged memory {mid} is lost"
    assert not ledger.gone & docs.keys(), "an acknowledged forget() came undone"
    for old, new in ledger.corrections:
        if new in docs:
            assert old in docs[new][2][K_SUPERSEDES]
        if old in docs:
            assert docs[old][2].get(K_SUPERSEDED_BY) == new, f"corrected memory {old} lost its link"
    for facts, _ in ledger.consolidated:
        assert all(f in docs for f in facts), "an acknowledged consolidation's fact is lost"
    texts = [text for _, text, _ in docs.values() if not text.startswith("summary")]
    assert len(texts) == len(set(texts)), "a write is stored twice"
    for turns, facts in carried.items():
        assert len(facts) == 2, f"a batch stored {len(facts)} facts, not its summarizer's 2"
        kept = [t for t in turns if t in docs]
        assert kept in ([], list(turns)), "a consolidated batch half-written"
        for t in kept:
            assert sorted(docs[t][2].get(K_CONSOLIDATED_INTO, [])) == sorted(facts)
    assert sum(len(turns) for turns in carried) == len(into), "a turn consolidated twice"
    for id, (_, _, meta) in docs.items():
        for f in meta.get(K_CONSOLIDATED_INTO) or ():
            assert f in docs, f"turn {id} marked consolidated into a fact that is not stored"
        nxt = meta.get(K_SUPERSEDED_BY)
        if nxt is not None:
            assert nxt in docs and id in docs[nxt][2][K_SUPERSEDES], f"{id} superseded by a missing memory"
    conn = sqlite3.connect(path)
    try:
        check_fts(conn)
    finally:
        conn.close()
    return docs


# ---------------------------------------------------------------------------- the caches, reopened


def _view(db):
    return sorted((r.id, r.text, r.metadata) for r in db.scan())


def _answers(db, query):
    out = []
    for mode in ("dense", "lexical", "hybrid"):
        out.append([(r.id, round(r.score, 5)) for r in db.search(query, limit=6, mode=mode)])
    out.append([(r.id, round(r.score, 5)) for r in db.recall(query, limit=5, now=1e10, preset="fast")])
    return out


def check_index(db, docs):
    """The HNSW index (loaded from its file or rebuilt) holds exactly the database's vectors
    under their rowids (in the graph or pending), and a search through it scores exactly."""
    db.exact_threshold = 4
    hnsw = db.search(QUERIES[0], limit=5)
    cache = db.engine.index
    assert cache.index is not None, "the index path was not taken"
    live = sorted(r for r, _, _ in docs.values())
    graph, pending = {int(k) for k in cache.index.keys}, set(cache.pending)
    assert not graph & pending and sorted(graph | pending) == live, "the index holds other rows than the database"
    with db.engine.locked():
        cache.flush()
    assert sorted(int(k) for k in cache.index.keys) == live
    for r in db.scan():
        got = np.asarray(cache.index.get(np.array([docs[r.id][0]], dtype=np.uint64))[0], dtype=np.float32)
        want, atol = hnsw_graph.stored_form(np.asarray(vector_of(db, r.id), dtype=np.float32),
                                            hnsw_graph.HNSW_SETTINGS["dtype"])
        assert np.allclose(got, want, rtol=0.0, atol=atol), f"the index holds another vector for {r.id}"
    db.exact_threshold = 0
    cosine = {r.id: round(r.score, 5) for r in db.search(QUERIES[0], limit=len(docs))}
    assert [round(r.score, 5) for r in hnsw] == [cosine[r.id] for r in hnsw]


def check_caches(path, docs, scratch):
    """Reopened as a writer (what a restart does), the handle answers exactly as a copy of the
    database opened with no cache file beside it, its FTS5 (every row now indexed) is as
    rebuilt, no temporary file of a killed save is left, and its index is exact."""
    with Vectrix(path, embedder=_embedder(), exact_threshold=0) as db:
        directory = os.path.dirname(os.path.abspath(path))
        assert not [n for n in os.listdir(directory) if n.endswith(".tmp")], "a killed save's temporary file is left"
        check_fts(db.engine.database.conn)
        if os.path.exists(scratch):
            shutil.rmtree(scratch)
        os.makedirs(scratch)
        copy = os.path.join(scratch, "rebuilt.db")
        src, dst = sqlite3.connect(path), sqlite3.connect(copy)
        src.backup(dst)
        src.close()
        dst.close()
        with Vectrix(copy, embedder=_embedder(), exact_threshold=0) as fresh:
            assert _view(db) == _view(fresh), "the mirror differs from the rows"
            for r in db.scan():
                assert vector_of(db, r.id) == vector_of(fresh, r.id)
            for q in QUERIES:
                assert _answers(db, q) == _answers(fresh, q), f"answers to {q!r} differ from a rebuild's"
        check_index(db, docs)
        shutil.rmtree(scratch)


def run_trials(forks, tmp_path, scenario, seeds):
    path = str(tmp_path / f"{scenario}.db")
    ledger = Ledger()
    for seed in seeds:
        for parts in run_child(forks, path, scenario, seed):
            ledger.read(parts)
        docs = check_rows(path, ledger)
        check_caches(path, docs, str(tmp_path / "scratch"))
    return ledger


# ---------------------------------------------------------------------------- the scenarios


POINTS = {
    "build": ({"before", "after", "close"}, 18),
    "flush": ({"before", "after"}, 16),
    "close": ({str(n) for n in range(1, 9)}, 16),
    "consolidate": ({"summarize", "delete", "follow", "none"}, 24),
    "expire": ({"delete", "follow", "none"}, 12),
}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", sorted(POINTS))
def test_a_kill_at_any_point_loses_no_acknowledged_write_and_caches_match_a_rebuild(forks, tmp_path, scenario):
    points, trials = POINTS[scenario]
    ledger = run_trials(forks, tmp_path, scenario, range(1, trials + 1))
    assert ledger.points == points, f"the seeds chose {sorted(ledger.points)}, not every point"
    # The other trials ran to their end (a point the workload did not reach) and died there.
    assert ledger.hits >= trials // 3, f"only {ledger.hits} of {trials} trials were killed at their point"
    assert ledger.present
    if scenario == "consolidate":
        assert ledger.consolidated


def _source(tmp_path):
    """A database with corrections, consolidation and a forget, exported with and without vectors."""
    path = str(tmp_path / "source.db")
    rng = random.Random(7)
    with Vectrix(path, embedder=_embedder()) as db:
        for i in range(30):
            words = " ".join(rng.choice(VOCAB[:14]) for _ in range(3))
            mid = db.remember(f"src{i} {words}", session=rng.choice(["a", "b"]), timestamp=1000 + i)
            if i % 7 == 3:
                db.feedback(mid, "corrected", correction=f"actually src{i} {words}", timestamp=2000 + i)
        db.consolidate("a", lambda items: ["summary of " + items[0]["text"], "summary also"], keep_recent=2,
                       batch_turns=4, now=3000)
        db.forget(ids=[next(iter(db.scan())).id])
        db.export(str(tmp_path / "plain.jsonl"))
        db.export(str(tmp_path / "vectors.jsonl"), vectors=True)
        return _view(db)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_kill_during_restore_leaves_nothing_or_the_whole_database(forks, tmp_path):
    want = _source(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    points, hits = set(), 0
    for seed in range(1, 25):
        target = str(out / f"r{seed}.db")
        export = str(tmp_path / ("vectors.jsonl" if seed % 2 else "plain.jsonl"))
        lines = run_child(forks, target, "restore", seed, export)
        acked = [p for p in lines if p[0] == "restored"]
        points.update(p[1] for p in lines if p[0] == "point")
        hits += ["hit"] in lines
        if not os.path.exists(target) or os.path.getsize(target) == 0:
            assert not acked, "an acknowledged restore left no database"
            Vectrix.restore(export, target, embedder=_embedder()).close()  # a retry succeeds
        with Vectrix(target, embedder=_embedder(), read_only=True) as db:
            assert _view(db) == want, "a restored database that is not the whole export"
        check_caches(target, read_rows(target), str(tmp_path / "scratch"))
        left = [n for n in os.listdir(out) if ".restoring-" in n]
        assert not left, f"a killed restore left {left}"
    assert points == {"insert", "file"} and hits >= 8, (points, hits)


def test_a_restore_removes_only_what_restores_whose_process_is_gone_left(tmp_path):
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    dead, alive = done.pid, os.getppid()
    names = {f".t.db.restoring-{dead}-0123abcd": False, f".t.db.restoring-{dead}-0123abcd-wal": False,
             f".t.db.restoring-{dead}-0123abcd.usearch.json.tmp": False,
             f".t.db.restoring-{dead}-0123abcd.writer": False,  # the note of a writer killed mid-restore
             f".t.db.restoring-{alive}-0123abcd": True,  # a restore still running elsewhere
             f".t.db.restoring-{os.getpid()}-0123abcd": True,  # this process's own
             f".u.db.restoring-{dead}-0123abcd": True,  # another target's
             "t.db.notes": True}
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    Vectrix(tmp_path / "t.db", embedder=_embedder()).close()  # a writable open clears them
    assert {n: (tmp_path / n).exists() for n in names} == names
