"""The optional half-precision graph (HNSW_SETTINGS["dtype"] = "f16"): it holds the vectors in
half the memory, is saved and reused like the float32 one, and search scores stay the exact
scan's (every candidate is re-scored against the mirror's float32 vectors)."""

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.store import hnsw

from helpers import WordHashEmbedder

WORDS = "tea coffee paris london dark light mode pdf csv report cat dog blue red green river".split()


def _text(i):
    return f"memory {i} about {WORDS[i % 16]} {WORDS[(i // 5) % 16]} {WORDS[(i * 7) % 16]}"


def _open(path):
    return Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=8)


@pytest.fixture
def f16(monkeypatch):
    monkeypatch.setitem(hnsw.HNSW_SETTINGS, "dtype", "f16")


def test_an_f16_graph_is_saved_reused_and_gives_the_exact_scores(tmp_path, f16):
    path = tmp_path / "f16.db"
    with _open(path) as db:
        db.add([_text(i) for i in range(300)])
        db.build_index()
        assert db._hnsw.index.dtype.name.lower() == "f16"
        got = db.search("coffee paris report", limit=5)
        db.exact_threshold = 0
        exact = db.search("coffee paris report", limit=5)
        assert [r.id for r in got][:1] == [r.id for r in exact][:1]
        with db._locked() as m:  # the scores are the mirror's float32 cosines, not the graph's
            for r in got:
                p = m.pos_of_id[r.id]
                q = db._embed(["coffee paris report"])[0]
                assert r.score == pytest.approx(float(m.vecs[p] @ q), abs=1e-6)
    with _open(path) as again:
        assert again._hnsw.load_saved() and again._hnsw.rebuilds == 0
        assert again._hnsw.index.dtype.name.lower() == "f16"


def test_a_graph_saved_as_float32_is_rebuilt_for_an_f16_handle(tmp_path, monkeypatch):
    path = tmp_path / "f32.db"
    with _open(path) as db:
        db.add([_text(i) for i in range(300)])
        db.build_index()
    monkeypatch.setitem(hnsw.HNSW_SETTINGS, "dtype", "f16")
    with _open(path) as db:
        assert db._hnsw.load_saved() is False  # other settings: not this graph
        db.build_index()
        assert db._hnsw.index.dtype.name.lower() == "f16"
        assert np.isfinite([r.score for r in db.search("tea cat", limit=3)]).all()
