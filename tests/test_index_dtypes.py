"""The graph's dtypes (HNSW_SETTINGS["dtype"]): the default 8-bit graph ("i8", a quarter of
float32's memory) and the options "f16" and "f32" are each saved and reused, a file saved
with another dtype is rebuilt, and search scores stay the exact scan's whatever the graph
holds (every candidate is re-scored against the mirror's float32 vectors)."""

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.store.vector import graph as hnsw_graph

from helpers import WordHashEmbedder

WORDS = "tea coffee paris london dark light mode pdf csv report cat dog blue red green river".split()


def _text(i):
    return f"memory {i} about {WORDS[i % 16]} {WORDS[(i // 5) % 16]} {WORDS[(i * 7) % 16]}"


def _open(path):
    return Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=8)


def test_the_default_graph_holds_8_bit_vectors():
    assert hnsw_graph.HNSW_SETTINGS["dtype"] == "i8"


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32"])
def test_a_graph_is_saved_reused_and_gives_the_exact_scores(tmp_path, monkeypatch, dtype):
    monkeypatch.setitem(hnsw_graph.HNSW_SETTINGS, "dtype", dtype)
    path = tmp_path / "g.db"
    with _open(path) as db:
        db.add([_text(i) for i in range(300)])
        db.build_index()
        assert db.engine.index.index.dtype.name.lower() == dtype
        got = db.search("coffee paris report", limit=5)
        db.exact_threshold = 0
        exact = db.search("coffee paris report", limit=5)
        assert [r.id for r in got][:1] == [r.id for r in exact][:1]
        with db.engine.locked() as m:  # the scores are the mirror's float32 cosines, not the graph's
            for r in got:
                p = m.pos_of_id[r.id]
                q = db.engine.embed(["coffee paris report"])[0]
                assert r.score == pytest.approx(float(m.vector(p) @ q), abs=1e-6)
    with _open(path) as again:
        assert again.engine.index.load_saved() and again.engine.index.rebuilds == 0
        assert again.engine.index.index.dtype.name.lower() == dtype


@pytest.mark.parametrize(("saved", "opened"), [("f32", "i8"), ("i8", "f16")])
def test_a_graph_saved_with_another_dtype_is_rebuilt(tmp_path, monkeypatch, saved, opened):
    path = tmp_path / "other.db"
    monkeypatch.setitem(hnsw_graph.HNSW_SETTINGS, "dtype", saved)
    with _open(path) as db:
        db.add([_text(i) for i in range(300)])
        db.build_index()
    monkeypatch.setitem(hnsw_graph.HNSW_SETTINGS, "dtype", opened)
    with _open(path) as db:
        assert db.engine.index.load_saved() is False  # other settings: not this graph
        db.build_index()
        assert db.engine.index.index.dtype.name.lower() == opened
        assert np.isfinite([r.score for r in db.search("tea cat", limit=3)]).all()


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32"])
def test_a_saved_graph_of_other_vectors_is_refused(tmp_path, monkeypatch, dtype):
    """The sample check compares vectors in the graph's own form: a graph holding other
    vectors under the same rowids (here: every vector negated) is rebuilt, never used."""
    monkeypatch.setitem(hnsw_graph.HNSW_SETTINGS, "dtype", dtype)
    path = tmp_path / "g.db"
    with _open(path) as db:
        db.add([_text(i) for i in range(300)])
        db.build_index()
        with db.engine.locked() as m:
            assert hnsw_graph.holds_mirror(db.engine.index.index, m, np.sort(m.rowid[m.live_positions()]))
            index = hnsw_graph.new_index(64)
            alive = m.live_positions()
            index.add(m.rowid[alive].astype(np.uint64), -m.vectors(alive))
            assert not hnsw_graph.holds_mirror(index, m, np.sort(m.rowid[alive]))


def test_the_search_expansion_grows_with_the_graph(tmp_path, monkeypatch):
    base = hnsw_graph.HNSW_SETTINGS["expansion_search"]
    assert [hnsw_graph.expansion_for(n) for n in (1, 100_000)] == [base, base]
    assert hnsw_graph.expansion_for(1_000_000) == 1529  # about 4x: recall@10 0.951 -> 0.993 at 1M (see vector/graph.py)
    sizes = [100_000, 100_001, 200_000, 500_000, 1_000_000, 4_000_000]
    assert all(a < b for a, b in zip(map(hnsw_graph.expansion_for, sizes), map(hnsw_graph.expansion_for, sizes[1:])))
    monkeypatch.setattr(hnsw_graph, "EXPANSION_FROM", 100)  # so 300 vectors count as a large graph
    path = tmp_path / "g.db"
    with _open(path) as db:
        db.add([_text(i) for i in range(300)])
        got = db.search("coffee paris report", limit=5)
        graph = db.engine.index.index
        assert graph is not None and graph.expansion_search == hnsw_graph.expansion_for(300) > base
        db.exact_threshold = 0
        assert got.ids == db.search("coffee paris report", limit=5).ids
    with _open(path) as again:  # a loaded graph searches with the expansion its size asks for too
        again.search("tea dark mode", limit=5)
        graph = again.engine.index.index
        assert again.engine.index.rebuilds == 0 and graph.expansion_search == hnsw_graph.expansion_for(300)
