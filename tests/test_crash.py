"""Crash safety: a child process writes memories in a loop and is killed with SIGKILL.

The child acknowledges every call that returned on its stdout (a pipe: whatever it wrote
before the kill is still there for the parent to read). After each kill the parent
reopens the database and checks that every acknowledged write is there with its links,
that nothing is half-written, that the vector index agrees with the database, and that
turn numbers are never handed out twice. Trials share one database file, so each child
starts from the state the previous kill left, index file and all.

A read-only handle stays open in the parent across every trial: after each kill it must
hold exactly what the file holds, having followed the writers' change log (or reloaded
in full where the log could not say) through every commit and every kill.
"""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.memory import (
    K_CONSOLIDATED_FROM,
    K_FEEDBACK,
    K_KIND,
    K_SESSION,
    K_SUPERSEDED_BY,
    K_SUPERSEDES,
    K_TURN,
)
from vxmem.store.vector import graph as hnsw_graph

from helpers import TESTS, WordHashEmbedder, reap, vector_of

TRIALS = 20
SESSIONS = ("s0", "s1", "s2")

CHILD = textwrap.dedent(r'''
    import os, random, sys, zlib
    import numpy as np
    from vxmem import Vectrix

    sys.path.insert(0, sys.argv[3])
    from helpers import WordHashEmbedder

    path, trial = sys.argv[1], int(sys.argv[2])
    rng = random.Random(trial)
    words = "tea coffee paris london dark light mode pdf csv report cat dog blue red".split()

    def ack(*parts):
        os.write(1, (" ".join(str(p) for p in parts) + "\n").encode())

    def summarize(items):
        return [f"summary of {len(items)} turns: " + items[0]["text"], "and " + items[-1]["text"]]

    def opendb():
        return Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=8)

    db = opendb()
    known = [r.id for r in db.scan() if r.metadata.get("_vx_kind")]
    ack("open")
    i = 0
    while True:
        i += 1
        ts = trial * 100_000 + i
        session = rng.choice(("s0", "s1", "s2"))
        op = rng.random()
        text = f"t{trial} i{i} {rng.choice(words)} {rng.choice(words)} {rng.choice(words)}"
        if op < 0.40:
            mid = db.remember(text, session=session, timestamp=ts)
            known.append(mid)
            ack("turn", mid, session, db.get(mid).metadata["_vx_turn"])
        elif op < 0.52:
            mid = db.remember(text, session=session, kind="fact", timestamp=ts)
            known.append(mid)
            ack("fact", mid)
        elif op < 0.66 and known:
            old = rng.choice(known)
            try:
                new = db.feedback(old, "corrected", correction="actually " + text, timestamp=ts)
            except ValueError as exc:  # dated before what it would replace (an earlier trial's): refused
                assert "comes before memory" in str(exc), exc
                continue
            known.append(new)
            ack("corr", old, new)
        elif op < 0.76 and known:
            mid = rng.choice(known)
            db.feedback(mid, rng.choice(("useful", "dead_end")), timestamp=ts)
            ack("graded", mid, ts)
        elif op < 0.86:
            db.recall(text, session=session, limit=3, now=ts)
            db.recall(text, limit=3, now=ts)  # across sessions: the HNSW path once > 8 rows
        elif op < 0.93:
            rep = db.consolidate(session, summarize, keep_recent=2, batch_turns=3, now=ts)
            gone = set(rep.turns_consolidated)
            known = [k for k in known if k not in gone]
            known.extend(rep.facts)
            ack("cons", " ".join(rep.facts), "|", " ".join(rep.turns_consolidated))
        else:
            db.close()  # saves the index file; the next kill leaves it stale
            db = opendb()
            ack("reopen")
''')


def _rows(path):
    conn = sqlite3.connect(path)
    try:
        docs = {id: (rowid, text, json.loads(meta)) for rowid, id, text, meta in
                conn.execute("SELECT rowid, id, text, metadata FROM vx_docs")}
        counters = dict(conn.execute("SELECT name, value FROM vx_counters"))
    finally:
        conn.close()
    return docs, counters


class Ledger:
    """What the children acknowledged, across every trial."""

    def __init__(self):
        self.present = set()            # ids whose write was acknowledged
        self.turn_of = {}               # (session, turn) -> id: a number is never handed out twice
        self.max_turn = {}              # session -> highest acknowledged turn number
        self.corrections = []           # (old, new)
        self.graded = []                # (id, ts)
        self.consolidated = []          # (facts, turns)

    def read(self, line: str) -> None:
        parts = line.split()
        tag = parts[0]
        if tag == "turn":
            mid, session, turn = parts[1], parts[2], int(parts[3])
            held = self.turn_of.setdefault((session, turn), mid)
            assert held == mid, f"turn {turn} of {session} handed to {held} and again to {mid}"
            self.max_turn[session] = max(self.max_turn.get(session, -1), turn)
            self.present.add(mid)
        elif tag == "fact":
            self.present.add(parts[1])
        elif tag == "corr":
            self.corrections.append((parts[1], parts[2]))
            self.present.add(parts[2])
        elif tag == "graded":
            self.graded.append((parts[1], float(parts[2])))
        elif tag == "cons":
            bar = parts.index("|")
            facts, turns = parts[1:bar], parts[bar + 1:]
            self.consolidated.append((facts, turns))
            self.present.update(facts)
            self.present.difference_update(turns)


def _run_trial(path, trial, rng, ledger):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path, str(trial), TESTS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = proc.stdout.readline().decode()
        assert first.strip() == "open", f"child did not open the database: {proc.stderr.read().decode()}"
        kill_after = rng.randint(1, 60)
        lines = []
        while len(lines) < kill_after:
            line = proc.stdout.readline().decode()
            assert line, f"child died on its own: {proc.stderr.read().decode()}"
            lines.append(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        lines += proc.stdout.read().decode().splitlines(keepends=True)
    finally:
        reap(proc)
    assert proc.returncode == -signal.SIGKILL
    for line in lines:
        if line.endswith("\n") and line.strip():  # a line cut by the kill is no acknowledgement
            ledger.read(line)


def _check_database(path, ledger):
    docs, counters = _rows(path)
    consolidated_into = {}  # turn id -> the fact that carries it
    for id, (_, _, meta) in docs.items():
        for t in meta.get(K_CONSOLIDATED_FROM) or ():
            consolidated_into[t] = id

    # Every acknowledged write is there (a turn may have gone since into a summary fact,
    # if the kill came after the consolidation committed but before it was acknowledged).
    for mid in ledger.present:
        assert mid in docs or mid in consolidated_into, f"acknowledged memory {mid} is lost"
    for old, new in ledger.corrections:
        assert new in docs, f"acknowledged correction {new} is lost"
        assert old in docs[new][2][K_SUPERSEDES]
        assert docs[old][2].get(K_SUPERSEDED_BY) is not None, f"corrected memory {old} is still live"
    for mid, ts in ledger.graded:
        if mid in docs:
            assert any(e[1] == ts for e in docs[mid][2].get(K_FEEDBACK, [])), f"grade of {mid} at {ts} lost"
        else:
            assert mid in consolidated_into
    for facts, turns in ledger.consolidated:
        carried = [t for f in facts for t in docs[f][2][K_CONSOLIDATED_FROM]]  # one batch each
        assert sorted(set(carried)) == sorted(turns)
        for t in turns:
            assert t not in docs, f"consolidated turn {t} is still stored"

    # Nothing half-written, whether acknowledged or not.
    for id, (_, text, meta) in docs.items():
        for old in meta.get(K_SUPERSEDES) or ():
            if old in docs:
                assert docs[old][2].get(K_SUPERSEDED_BY) is not None, f"{id} supersedes {old} without its link"
        nxt = meta.get(K_SUPERSEDED_BY)
        if nxt is not None:
            assert nxt in docs and id in docs[nxt][2][K_SUPERSEDES], f"{id} superseded by a missing memory"
        if text.startswith(("summary of ", "and t")):  # written by the child's summarize
            cf = meta.get(K_CONSOLIDATED_FROM)
            assert cf, f"fact {id} from consolidation lacks its consolidated_from"
            assert not any(t in docs for t in cf), f"fact {id} stored but its turns not deleted"
        if text.startswith("actually "):
            assert meta.get(K_SUPERSEDES), f"correction {id} stored without its link"

    # Turn numbers: distinct per session, and the counter is past every number handed out.
    for s in SESSIONS:
        nums = [meta[K_TURN] for _, _, meta in docs.values()
                if meta.get(K_SESSION) == s and meta.get(K_KIND) == "turn"]
        assert len(nums) == len(set(nums)), f"session {s} holds a turn number twice"
        top = max(nums + [ledger.max_turn.get(s, -1)])
        assert counters.get("turn:" + json.dumps(s), 0) > top
    return docs


def _check_reader(reader, docs):
    """The long-lived read-only handle holds exactly the rows the file holds."""
    got = {r.id: (r.text, r.metadata) for r in reader.scan()}
    assert got == {id: (text, meta) for id, (_, text, meta) in docs.items()}, "the reader missed a commit"


def _check_index(path, docs):
    """Reopened, the HNSW index (loaded from its file or rebuilt) holds exactly the
    database's vectors, and searching through it finds what an exact scan finds; no
    temporary file of a save the kill cut short is left."""
    with Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=8) as db:
        assert not [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")]
        assert db.count() == len(docs)
        hnsw = db.search("tea coffee paris", limit=5)
        index = db.engine.index.index
        assert index is not None, "the index path was not taken"
        rowids = sorted(r for r, _, _ in docs.values())
        # A loaded index takes the rows written since its save as pending (scanned exactly)...
        graph, pending = {int(k) for k in index.keys}, set(db.engine.index.pending)
        assert not graph & pending and sorted(graph | pending) == rowids
        with db.engine.locked():
            db.engine.index.flush()  # ...until they join the graph
        assert sorted(int(k) for k in index.keys) == rowids
        for r in db.scan():
            vec = index.get(np.array([docs[r.id][0]], dtype=np.uint64))[0]
            want, atol = hnsw_graph.stored_form(np.asarray(vector_of(db, r.id), dtype=np.float32),
                                                hnsw_graph.HNSW_SETTINGS["dtype"])
            assert np.allclose(np.asarray(vec, dtype=np.float32), want, rtol=0.0, atol=atol)
        db.exact_threshold = 0
        exact = db.search("tea coffee paris", limit=5)
        # The graph proposes, the mirror scores: every result is a live document with its
        # exact cosine, best first. Which documents the graph finds is not checked here:
        # the graph is approximate (recall@10 0.995 against the exact top 10 at 100k; issue
        # 14 measures it in bench_memory.py), and the kills decide which rows it holds and
        # which it lost, so even the best match went unproposed in one run of this test.
        cosine = {r.id: r.score for r in db.search("tea coffee paris", limit=len(docs))}
        assert [round(r.score, 5) for r in hnsw] == [round(cosine[r.id], 5) for r in hnsw]
        assert [r.score for r in hnsw] == sorted((r.score for r in hnsw), reverse=True)
        assert len(hnsw) == len(exact) and hnsw[0].score <= exact[0].score + 1e-6
        # Turn numbering continues past every number handed out before the kills.
        return {s: db.get(db.remember("after the crash", session=s, timestamp=10**7)).metadata[K_TURN]
                for s in SESSIONS}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sigkill_loses_no_acknowledged_write_and_leaves_nothing_half_written(tmp_path):
    path = str(tmp_path / "crash.db")
    rng = random.Random(5)
    ledger = Ledger()
    Vectrix(path, embedder=WordHashEmbedder(dim=64)).close()
    reader = Vectrix(path, embedder=WordHashEmbedder(dim=64), read_only=True)
    for trial in range(TRIALS):
        _run_trial(path, trial, rng, ledger)
        docs = _check_database(path, ledger)
        _check_reader(reader, docs)
        if trial % 4 == 3:
            before = dict(ledger.max_turn)
            next_turn = _check_index(path, docs)
            for s in SESSIONS:
                assert next_turn[s] > before.get(s, -1)
                ledger.turn_of[(s, next_turn[s])] = "parent"
                ledger.max_turn[s] = next_turn[s]
    reader.close()
    assert len(ledger.corrections) > 0 and len(ledger.consolidated) > 0 and len(ledger.graded) > 0
