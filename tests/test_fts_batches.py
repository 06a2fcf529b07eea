"""The FTS5 rows written in batches (schema 6): what FTS5 holds, and what searches see meanwhile."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.store.sqlite import database
from vxmem.store.sqlite.database import FTS_BATCH

from helpers import T0, WordHashEmbedder, fts_count, run_python


def _held(db) -> tuple[int, int]:
    """(documents FTS5 holds, vx_meta's fts_upto), as the file stands."""
    conn = db.engine.database.conn
    n = conn.execute("SELECT count(*) FROM vx_fts_docsize").fetchone()[0]
    return n, int(conn.execute("SELECT value FROM vx_meta WHERE key = 'fts_upto'").fetchone()[0])


def _intact(db, word: str = "kiwi") -> None:
    """FTS5's own BM25 of ``word`` equals the numpy BM25 over the collection's documents: its
    row count and token totals (which a delete of a row FTS5 never held would skew) are right."""
    db.engine.database.index_pending()
    conn = db.engine.database.conn
    conn.execute("INSERT INTO vx_fts (vx_fts, rank) VALUES ('integrity-check', 1)")
    fts5 = dict(conn.execute("SELECT rowid, -bm25(vx_fts, 1.0, 0.0) FROM vx_fts WHERE vx_fts MATCH ?",
                             (f'text : "{word}"',)).fetchall())
    with db.engine.locked() as m:
        got = db.engine.lexical.numpy_scores(m, word, m.alive[: m.n].copy(), k=10_000)
        assert got is not None
        ours = {int(m.rowid[p]): s for p, s in zip(got[0].tolist(), got[1].tolist())}
    assert fts5.keys() == ours.keys() and fts5
    for r, s in ours.items():
        assert s == pytest.approx(fts5[r], rel=1e-9)


def test_fts5_takes_the_documents_a_batch_at_a_time_and_the_rest_at_close(tmp_path):
    path = str(tmp_path / "b.vxdb")
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        for k in range(FTS_BATCH - 1):
            db.remember(f"kiwi {k}", session="s", timestamp=T0 + k)
        assert _held(db) == (0, 0)
        db.remember("the batch is full", session="s", timestamp=T0 + 99)
        assert _held(db) == (FTS_BATCH, FTS_BATCH)  # in the transaction that filled it
        db.remember("kiwi after the batch", session="s", timestamp=T0 + 100)
        assert _held(db) == (FTS_BATCH, FTS_BATCH)
        assert fts_count(db, "kiwi", pending=False) == FTS_BATCH - 1
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:
        assert _held(db) == (FTS_BATCH + 1, FTS_BATCH + 1)  # the close indexed the rest
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        _intact(db)


def test_documents_forgotten_or_deleted_before_fts5_held_them_leave_it_intact(tmp_path):
    db = Vectrix(str(tmp_path / "f.vxdb"), embedder=WordHashEmbedder())
    ids = [db.remember(f"kiwi number {k}", session="s", timestamp=T0 + k) for k in range(6)]
    db.forget(ids=ids[:2])  # never indexed: no FTS5 row to delete
    facts = db.add(["plain kiwi document", "kiwi going away"])
    db.delete([facts[1]])
    assert fts_count(db, "kiwi", pending=False) == 0
    assert fts_count(db, "kiwi") == 5
    _intact(db)
    assert sorted(r.text for r in db.search("kiwi", mode="lexical", limit=10)) == sorted(
        [f"kiwi number {k}" for k in range(2, 6)] + ["plain kiwi document"])
    db.forget(ids=ids[2:3])  # indexed now: its FTS5 row goes with it
    assert fts_count(db, "kiwi", pending=False) == 4
    _intact(db)
    db.close()


def test_a_failed_transaction_indexes_nothing_and_leaves_fts_upto_as_it_was(monkeypatch):
    db = Vectrix(embedder=WordHashEmbedder())
    for k in range(FTS_BATCH - 1):
        db.remember(f"mango {k}", session="s", timestamp=T0 + k)

    def boom(self, *a, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(database.Database, "_prune", boom)
    monkeypatch.setattr(database, "PRUNE_EVERY", 1)  # fails after the batch was written, before COMMIT
    with pytest.raises(OSError):
        db.remember("the failed one", session="s", timestamp=T0 + 99)
    monkeypatch.undo()
    assert db.engine.database.fts_upto == 0 and fts_count(db, "mango", pending=False) == 0
    db.remember("the next one", session="s", timestamp=T0 + 100)  # fills the batch again
    assert fts_count(db, "mango", pending=False) == FTS_BATCH - 1
    assert fts_count(db, "failed", pending=False) == 0
    _intact(db, "mango")


def test_a_reader_finds_what_fts5_does_not_hold_yet(tmp_path):
    path = str(tmp_path / "r.vxdb")
    writer = Vectrix(path, embedder=WordHashEmbedder())
    writer.remember("an indexed durian", session="s", timestamp=T0)
    writer.engine.database.index_pending()
    for k in range(3):
        writer.remember(f"durian not indexed yet {k}", session="s", timestamp=T0 + 1 + k)
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as reader:
        assert _held(reader) == (1, 1)
        got = reader.recall("durian", session="s", mode="lexical", now=T0 + 10, limit=10)
        assert len(got) == 4  # the first search read FTS5 up to fts_upto and tokenised the rest
        writer.remember("durian after the reader's first search", session="s", timestamp=T0 + 5)
        assert len(reader.recall("durian", session="s", mode="lexical", now=T0 + 10, limit=10)) == 5
    writer.close()


def test_the_writers_phrase_search_sees_the_documents_fts5_did_not_hold_yet(tmp_path):
    db = Vectrix(str(tmp_path / "p.vxdb"), embedder=WordHashEmbedder())
    db.add(["send it by e_mail today", "mail the letter"])
    assert fts_count(db, "mail", pending=False) == 0
    with db.engine.locked() as m:  # FTS5 reads "e_mail" as a phrase: FTS5 ranks it
        assert db.engine.lexical.numpy_scores(m, "e_mail", np.ones(m.n, dtype=bool), 5) is None
    assert [r.text for r in db.search("e_mail", mode="lexical")] == ["send it by e_mail today"]
    assert fts_count(db, "mail", pending=False) == 2  # indexed first
    db.close()


def test_a_killed_writer_leaves_no_batch_half_written_and_the_next_open_indexes_the_rest(tmp_path):
    path = tmp_path / "k.vxdb"
    code = f"""
import os, signal
from vxmem import Vectrix
db = Vectrix({str(path)!r})
for k in range({FTS_BATCH * 2 + 10}):
    db.remember(f"durian {{k}}", session="s", timestamp={T0} + k)
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = run_python(code)
    assert proc.returncode == -9
    with Vectrix(path, read_only=True) as db:
        assert _held(db) == (FTS_BATCH * 2, FTS_BATCH * 2)  # whole batches only
        assert len(db.recall("durian", session="s", mode="lexical", limit=1000, now=T0 + 999)) == FTS_BATCH * 2 + 10
    with Vectrix(path) as db:
        assert _held(db) == (FTS_BATCH * 2 + 10, FTS_BATCH * 2 + 10)
        _intact(db, "durian")


def test_a_file_of_schema_5_reads_as_fully_indexed_and_a_writable_open_records_fts_upto(tmp_path):
    path = str(tmp_path / "v5.vxdb")
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        for k in range(5):
            db.remember(f"walrus {k}", session="s", timestamp=T0 + k)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM vx_meta WHERE key = 'fts_upto'")
    conn.execute("UPDATE vx_meta SET value = '5' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:
        assert db.engine.database.indexed_upto() is None
        assert len(db.recall("walrus", session="s", mode="lexical", now=T0 + 9, limit=10)) == 5
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        assert _held(db) == (5, 5)
        db.remember("walrus after the upgrade", session="s", timestamp=T0 + 9)
        assert len(db.recall("walrus", session="s", mode="lexical", now=T0 + 9, limit=10)) == 6
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0]
    assert version == str(database.SCHEMA_VERSION)
    conn.close()


def test_a_document_moved_to_another_session_before_or_after_fts5_held_it_is_found_in_the_new_one():
    from vxmem.store.lexical.fts import fts_match

    db = Vectrix(embedder=WordHashEmbedder())
    (early,) = db.add(["otter indexed first"], metadata=[{"_vx_session": "a"}])
    db.engine.database.index_pending()
    (late,) = db.add(["otter not indexed yet"], metadata=[{"_vx_session": "a"}])
    db.update_metadata(early, {"_vx_session": "b"})  # FTS5 row moved: deleted with scope a, added with b
    db.update_metadata(late, {"_vx_session": "b"})  # no FTS5 row yet: indexed with scope b
    db.engine.database.index_pending()
    conn = db.engine.database.conn

    def in_fts5(session):
        return {r for (r,) in conn.execute("SELECT rowid FROM vx_fts WHERE vx_fts MATCH ?",
                                           (fts_match("otter", session),))}

    assert in_fts5("a") == set() and in_fts5("b") == {1, 2}
    assert len(db.search("otter", mode="lexical", filter={"_vx_session": "b"})) == 2
    _intact(db, "otter")


def test_an_open_that_cannot_index_what_a_writer_left_still_opens_and_finds_them(tmp_path, monkeypatch):
    path = str(tmp_path / "full.vxdb")
    monkeypatch.setattr(database.Database, "index_pending", lambda self: None)  # what a killed writer leaves
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        for k in range(3):
            db.remember(f"fig number {k}", session="s", timestamp=T0 + k)
    monkeypatch.undo()

    def full(self):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(database.Database, "_index_fts", full)
    with Vectrix(path, embedder=WordHashEmbedder()) as db:  # the open and the close index nothing, and raise nothing
        assert _held(db) == (0, 0)
        assert len(db.recall("fig", session="s", mode="lexical", now=T0 + 9, limit=10)) == 3
    monkeypatch.undo()
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        assert _held(db) == (3, 3)
