"""The collection: documents, vectors, metadata, filters, durability."""

import json

import numpy as np
import pytest

from vxmem import DatabaseLockedError, InvalidDatabaseError, Vectrix
from vxmem.models.embed import HashingEmbedder
from vxmem.store.vector import graph as hnsw_graph
from vxmem.store.vector import hnsw
from vxmem.store.vector.vectors import rowdot

from helpers import run_python, vector_of


def test_add_returns_ids_and_get_gives_back_text_and_metadata():
    db = Vectrix()
    ids = db.add(["alpha beta", "gamma delta"], metadata=[{"lang": "en"}, {"lang": "de"}])
    assert len(ids) == 2 and len(set(ids)) == 2
    doc = db.get(ids[1])
    assert doc.text == "gamma delta"
    assert doc.metadata == {"lang": "de"}


def test_add_with_explicit_ids_refuses_duplicates_and_writes_nothing():
    db = Vectrix()
    db.add(["one"], ids=["a"])
    with pytest.raises(ValueError, match="already exists"):
        db.add(["two", "three"], ids=["b", "a"])
    assert db.count() == 1 and "b" not in db


def test_add_rejects_metadata_that_is_not_json():
    db = Vectrix()
    with pytest.raises(TypeError):
        db.add(["x"], metadata=[{"when": object()}])
    with pytest.raises(ValueError):
        db.add(["x"], metadata=[{"score": float("nan")}])
    assert db.count() == 0


def test_search_ranks_the_closest_text_first():
    db = Vectrix()
    db.add(["the cat sat on the mat", "stock markets fell sharply", "a kitten sleeps on a mat"])
    res = db.search("cat on a mat", limit=2)
    assert res[0].text == "the cat sat on the mat"
    assert len(res) == 2
    assert res[0].score >= res[1].score
    assert res.query == "cat on a mat"


def test_filter_matches_equality_and_any_of_a_list():
    db = Vectrix()
    db.add(["red apple", "red car", "red rose"], metadata=[{"t": "fruit"}, {"t": "vehicle"}, {"t": "flower"}])
    assert [r.metadata["t"] for r in db.search("red", filter={"t": "vehicle"})] == ["vehicle"]
    got = {r.metadata["t"] for r in db.search("red", filter={"t": ["fruit", "flower"]})}
    assert got == {"fruit", "flower"}
    assert db.count({"t": ["fruit", "vehicle"]}) == 2


def test_filter_distinguishes_true_from_one():
    db = Vectrix()
    db.add(["a", "b"], metadata=[{"flag": True}, {"flag": 1}])
    assert db.count({"flag": True}) == 1
    assert db.count({"flag": 1}) == 1


def test_filter_with_sql_looking_key_is_just_a_key():
    db = Vectrix()
    db.add(["x"], metadata=[{"a') OR 1=1 --": "v"}])
    assert db.count({"a') OR 1=1 --": "v"}) == 1
    assert db.count({"a') OR 1=1 --": "w"}) == 0


def test_filtered_search_is_exact_when_the_filter_selects_a_tiny_fraction():
    # 40 off-filter near-duplicates of the query would fill a fixed over-fetch window.
    db = Vectrix(exact_threshold=10)
    texts = [f"project deadline moved to friday {i}" for i in range(400)]
    db.add(texts, metadata=[{"user": "many"} for _ in texts])
    db.add(["the deadline is on friday", "lunch was good"], metadata=[{"user": "rare"}, {"user": "rare"}])
    res = db.search("project deadline moved to friday", limit=2, filter={"user": "rare"})
    assert [r.text for r in res] == ["the deadline is on friday", "lunch was good"]


def test_index_search_with_filter_returns_the_true_top_k():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(3000, 16)).astype(np.float32)
    lookup = {f"doc{i}": v for i, v in enumerate(vecs)}

    def embed(texts):
        return np.stack([lookup.get(t, vecs[0]) for t in texts])

    db = Vectrix(embedder=embed, exact_threshold=100)
    db.add([f"doc{i}" for i in range(3000)], metadata=[{"g": i % 3} for i in range(3000)])
    got = db.search("doc0", limit=10, filter={"g": [0, 1]})
    normed = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    sims = normed @ normed[0]
    eligible = [i for i in range(3000) if i % 3 in (0, 1)]
    truth = sorted(eligible, key=lambda i: -sims[i])[:10]
    overlap = len({r.text for r in got} & {f"doc{i}" for i in truth})
    assert overlap >= 9  # HNSW is approximate; the filter must never starve the result
    assert len(got) == 10 and all(r.metadata["g"] in (0, 1) for r in got)


def test_update_metadata_merges_or_replaces():
    db = Vectrix()
    (i,) = db.add(["x"], metadata=[{"a": 1, "b": 2}])
    assert db.update_metadata(i, {"b": 3}) == {"a": 1, "b": 3}
    assert db.update_metadata(i, {"c": 4}, merge=False) == {"c": 4}
    assert db.get(i).metadata == {"c": 4}


def test_replacing_a_memorys_metadata_keeps_its_bookkeeping():
    db = Vectrix(embedder="hashing")
    dark = db.remember("I prefer dark mode", kind="fact", metadata={"topic": "ui"}, timestamp=1_700_000_000)
    light = db.feedback(dark, "corrected", correction="light mode now", timestamp=1_700_000_100)
    reserved = {k: v for k, v in db.get(dark).metadata.items() if k.startswith("_vx_")}
    assert db.update_metadata(dark, {"note": "checked"}, merge=False) == {**reserved, "note": "checked"}
    assert db.recall("which mode", now=1_700_000_200).ids == [light]  # still superseded
    assert [e.id for e in db.history(light)] == [dark, light]


def test_update_metadata_of_unknown_id_is_a_key_error():
    with pytest.raises(KeyError):
        Vectrix().update_metadata("nope", {"a": 1})


def test_delete_counts_only_documents_that_existed():
    db = Vectrix()
    ids = db.add(["a", "b", "c"])
    assert db.delete([ids[0], "missing", ids[0]]) == 1
    assert db.count() == 2
    with pytest.raises(KeyError):
        db.get(ids[0])


def test_scan_yields_matching_documents_in_insertion_order():
    db = Vectrix()
    db.add(["a", "b", "c"], metadata=[{"k": 1}, {"k": 2}, {"k": 1}])
    assert [r.text for r in db.scan({"k": 1})] == ["a", "c"]
    assert [r.text for r in db.scan()] == ["a", "b", "c"]


def test_returned_metadata_is_a_copy():
    db = Vectrix()
    (i,) = db.add(["x"], metadata=[{"tags": ["a"]}])
    db.get(i).metadata["tags"].append("b")
    assert db.get(i).metadata == {"tags": ["a"]}


def test_reopening_a_file_in_a_new_process_gives_back_everything(tmp_path):
    path = tmp_path / "db.vxdb"
    with Vectrix(path) as db:
        ids = db.add(["first doc", "second doc"], metadata=[{"n": 1}, {"nested": {"x": [1, 2]}}])
        mem = db.remember("I like tea", session="s", timestamp=1_700_000_000)
        vec_before = vector_of(db, ids[1])
    code = f"""
import json
from vxmem import Vectrix
from helpers import vector_of
with Vectrix({str(path)!r}) as db:
    out = {{"count": db.count(), "meta": db.get({ids[1]!r}).metadata, "mem": db.get({mem!r}).metadata,
           "vec": vector_of(db, {ids[1]!r}),
           "top": db.search("second", limit=1)[0].id}}
print(json.dumps(out))
"""
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["count"] == 3
    assert out["meta"] == {"nested": {"x": [1, 2]}}
    assert out["mem"]["_vx_session"] == "s" and out["mem"]["_vx_turn"] == 0
    assert out["vec"] == vec_before
    assert out["top"] == ids[1]


def test_a_second_writer_on_the_same_file_gets_a_clear_error(tmp_path):
    path = tmp_path / "db.vxdb"
    with Vectrix(path) as db:
        db.add(["x"])
        code = f"from vxmem import Vectrix\nVectrix({str(path)!r})"
        proc = run_python(code)
        assert proc.returncode != 0
        assert "DatabaseLockedError" in proc.stderr and "already open for writing" in proc.stderr
        with pytest.raises(DatabaseLockedError):
            Vectrix(path)
    Vectrix(path).close()  # released on close


def test_read_only_handle_sees_what_the_writer_committed(tmp_path):
    path = tmp_path / "db.vxdb"
    with Vectrix(path) as db:
        db.add(["x"])
        ro = Vectrix(path, read_only=True)
        assert ro.count() == 1
        db.add(["y"])
        assert ro.count() == 2
        ro.close()


def test_opening_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, I am not SQLite" * 100)
    with pytest.raises(InvalidDatabaseError):
        Vectrix(path)


def test_index_file_is_reused_when_fresh_and_rebuilt_when_stale(tmp_path):
    path = tmp_path / "db.vxdb"
    with Vectrix(path, exact_threshold=10) as db:
        db.add([f"doc number {i}" for i in range(200)])
        db.search("doc number 7", limit=3)  # builds the index
    side = json.loads((tmp_path / "db.vxdb.usearch.json").read_text())
    with Vectrix(path, exact_threshold=10) as db:
        assert db.engine.index.load_saved() is True
        db.add(["doc number 7 again"])  # generation moves on; index follows in-process
        assert db.search("doc number 7 again", limit=1)[0].text == "doc number 7 again"
    assert json.loads((tmp_path / "db.vxdb.usearch.json").read_text())["generation"] > side["generation"]
    # A stale sidecar (as after a kill) means rebuild, never wrong answers.
    (tmp_path / "db.vxdb.usearch.json").write_text(json.dumps(side))
    with Vectrix(path, exact_threshold=10) as db:
        assert db.engine.index.load_saved() is False
        assert db.search("doc number 7 again", limit=1)[0].text == "doc number 7 again"


def test_hashing_embedder_is_deterministic_across_processes():
    code = ("from vxmem.models.embed import HashingEmbedder; "
            "print(HashingEmbedder()(['dark mode please'])[0][:8].tolist())")
    a, b = run_python(code).stdout, run_python(code).stdout
    assert a and a.startswith("[")
    assert a == b
    v = HashingEmbedder()(["dark mode please", "x"])
    assert v.shape == (2, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_hashing_embedder_scores_shared_word_pieces_above_unrelated_text():
    e = HashingEmbedder()
    a, b, c = e(["I prefer dark mode", "dark theme please", "we moved to Berlin"])
    assert a @ b > a @ c


def test_embedder_with_wrong_dimension_is_refused():
    db = Vectrix(embedder=lambda texts: np.ones((len(texts), 4)))
    db.add(["a"])
    db.embedder = lambda texts: np.ones((len(texts), 5))
    with pytest.raises(ValueError, match="4-d"):
        db.add(["b"])
    assert db.count() == 1


def test_results_to_frame_has_one_row_per_result():
    db = Vectrix()
    db.remember("hello there", session="s", timestamp=0)
    frame = db.recall("hello", session="s", now=10).to_frame()
    assert list(frame["text"]) == ["hello there"]
    assert {"relevance", "recency", "feedback", "score"} <= set(frame.columns)


def test_vectors_added_after_the_index_is_built_are_found_before_and_after_they_join_it(monkeypatch):
    monkeypatch.setattr(hnsw, "PENDING_FLUSH", 50)
    db = Vectrix(exact_threshold=10)
    db.add([f"background doc {i}" for i in range(300)])
    db.search("background doc 1", limit=1)  # builds the index
    (fresh,) = db.add(["zebra crossing at noon"])
    assert db.engine.index.pending and db.search("zebra crossing at noon", limit=1)[0].id == fresh
    (gone,) = db.add(["zebra crossing at midnight"])
    db.delete([gone])
    assert gone not in {r.id for r in db.search("zebra crossing at midnight", limit=5)}
    db.add([f"more docs {i}" for i in range(60)])  # crosses the flush size: flushed in the background
    db.build_index()  # waits for the flush
    assert not db.engine.index.pending and len(db.engine.index) == db.count()
    assert db.search("zebra crossing at noon", limit=1)[0].id == fresh


def test_session_blocks_follow_appends_removals_and_moves():
    db = Vectrix()
    ids = [db.remember(f"note {k} about llamas", session="s", timestamp=k) for k in range(5)]
    db.remember("other session llamas", session="t", timestamp=0)
    assert db.recall("note 3 about llamas", session="s", limit=1, now=10)[0].id == ids[3]
    new = db.remember("note 9 about alpacas", session="s", timestamp=9)  # appended to the block
    assert db.recall("note 9 about alpacas", session="s", limit=1, now=10)[0].id == new
    db.forget(ids=[ids[3]])  # removal drops the block; rebuilt on next use
    assert ids[3] not in {r.id for r in db.recall("note 3 about llamas", session="s", now=10)}
    db.update_metadata(ids[0], {"_vx_session": "t"})  # moves between sessions
    assert ids[0] in {r.id for r in db.recall("note 0 about llamas", session="t", now=10)}
    assert ids[0] not in {r.id for r in db.recall("note 0 about llamas", session="s", now=10)}
    with db.engine.locked() as m:
        blk = m.session_block(m.session_code("s"))
        q = m.vector(int(blk.positions[0]))
        assert np.array_equal(blk.dots(q), rowdot(m.vectors(blk.positions), q))


def test_a_large_index_builds_in_the_background_while_searches_scan_exactly(monkeypatch, tmp_path):
    monkeypatch.setattr(hnsw, "BACKGROUND_BUILD_MIN", 100)
    release = __import__("threading").Event()
    real_build = hnsw.HnswCache.build_graph

    def slow_build(self, keys, vecs, threads, rows):
        release.wait(30)  # hold the build until the test has written meanwhile
        return real_build(self, keys, vecs, threads, rows)

    monkeypatch.setattr(hnsw.HnswCache, "build_graph", slow_build)
    db = Vectrix(tmp_path / "bg.vxdb", exact_threshold=10)
    ids = db.add([f"background doc {i}" for i in range(300)])
    first = db.search("background doc 17", limit=3)  # starts the build, answers exactly
    assert first[0].text == "background doc 17" and db.engine.index.index is None and db.engine.index.building
    (during,) = db.add(["written during the build"])
    db.delete([ids[17]])
    release.set()
    db.build_index()
    assert db.engine.index.index is not None and not db.engine.index.building
    with db.engine.locked() as m:
        assert db.engine.index.pending == {int(m.rowid[m.pos_of_id[during]])}
    assert len(db.engine.index) == 299  # the snapshot minus the deletion
    assert db.search("written during the build", limit=1)[0].id == during
    assert ids[17] not in {r.id for r in db.search("background doc 17", limit=5)}
    db.close()
    with Vectrix(tmp_path / "bg.vxdb", exact_threshold=10) as again:
        assert again.engine.index.load_saved() and len(again.engine.index) == 300


def test_build_index_builds_on_every_core_beside_readers_and_writers(monkeypatch, tmp_path):
    import os
    import threading

    monkeypatch.setattr(hnsw, "BACKGROUND_BUILD_MIN", 100)
    started, release = threading.Event(), threading.Event()
    real_build = hnsw.HnswCache.build_graph
    used = []

    def held_build(self, keys, vecs, threads, rows):
        used.append((threading.current_thread().name, threads))
        started.set()
        release.wait(30)  # held until the test has read and written meanwhile
        return real_build(self, keys, vecs, threads, rows)

    monkeypatch.setattr(hnsw.HnswCache, "build_graph", held_build)
    db = Vectrix(tmp_path / "bi.vxdb", exact_threshold=10)
    db.add([f"background doc {i}" for i in range(300)])
    builder = threading.Thread(target=db.build_index)
    builder.start()
    assert started.wait(30)
    (new,) = db.add(["written while build_index waits"])  # neither the writer...
    assert db.search("background doc 17", limit=1)[0].text == "background doc 17"  # ...nor a reader waits
    assert builder.is_alive() and not release.is_set() and db.engine.index.index is None
    release.set()
    builder.join(30)
    assert not builder.is_alive() and db.engine.index.index is not None
    assert used == [("vxmem-index-build", os.cpu_count() or 1)]
    assert db.search("written while build_index waits", limit=1)[0].id == new
    db.close()


@pytest.mark.parametrize("background", [True, False])
def test_a_build_over_holes_gives_each_rowid_its_own_vector(monkeypatch, background):
    """A build reads the mirror's rows a chunk at a time, outside the lock, skipping the
    holes deletions left: every key the graph holds carries its own document's vector."""
    monkeypatch.setattr(hnsw_graph, "BUILD_CHUNK", 7)
    monkeypatch.setattr(hnsw, "BACKGROUND_BUILD_MIN", 100 if background else 10**6)
    db = Vectrix(exact_threshold=10)
    ids = db.add([f"chunked doc {i} about {i % 13}" for i in range(300)])
    db.delete(ids[5:40] + ids[200:203])
    db.build_index()
    index = db.engine.index.index
    with db.engine.locked() as m:
        live = m.live_positions()
        assert live.size < m.n  # holes: the gather path
        assert sorted(int(k) for k in index.keys) == sorted(m.rowid[live].tolist())
        got = np.asarray(index.get(m.rowid[live].astype(np.uint64)), dtype=np.float32)
        want, atol = hnsw_graph.stored_form(m.vectors(live), hnsw_graph.HNSW_SETTINGS["dtype"])
        assert np.allclose(got, want, rtol=0.0, atol=atol)
    assert db.search("chunked doc 250 about 3", limit=1)[0].id == ids[250]
    db.close()


def test_build_index_raises_what_its_build_raised(monkeypatch):
    import threading

    monkeypatch.setattr(hnsw, "BACKGROUND_BUILD_MIN", 100)

    def failing_build(self, keys, vecs, threads, rows):
        raise MemoryError("no room for the graph")

    monkeypatch.setattr(hnsw.HnswCache, "build_graph", failing_build)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the thread's error is expected
    db = Vectrix(exact_threshold=10)
    db.add([f"background doc {i}" for i in range(300)])
    with pytest.raises(MemoryError, match="no room"):
        db.build_index()
    assert db.engine.index.index is None and not db.engine.index.building
    assert db.search("background doc 5", limit=1)[0].text == "background doc 5"  # exact scan
    for t in threading.enumerate():  # the failed build's thread ends here, while its error is still expected
        if t.name == "vxmem-index-build":
            t.join()


def test_a_failed_background_build_leaves_exact_search_working_and_can_be_retried(monkeypatch):
    import threading

    monkeypatch.setattr(hnsw, "BACKGROUND_BUILD_MIN", 100)
    real_build = hnsw.HnswCache.build_graph
    calls = []

    def flaky_build(self, keys, vecs, threads, rows):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            raise MemoryError("no room for the graph")
        return real_build(self, keys, vecs, threads, rows)

    monkeypatch.setattr(hnsw.HnswCache, "build_graph", flaky_build)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the thread's error is expected
    db = Vectrix(exact_threshold=10)
    db.add([f"background doc {i}" for i in range(300)])
    assert db.search("background doc 5", limit=1)[0].text == "background doc 5"
    for t in threading.enumerate():
        if t.name == "vxmem-index-build":
            t.join()
    assert calls == ["vxmem-index-build"]
    assert not db.engine.index.building and db.engine.index.index is None
    db.build_index()
    assert db.engine.index.index is not None and len(db.engine.index) == 300 and len(calls) == 2
