"""``vector_dtype="float16"``: a handle holds its vectors at half the memory and ranks by
their float16 values; SQLite keeps float32, so handles of either dtype share one database
and its files."""

import sys
import zlib

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.store.mirror import file as mirror_file
from vxmem.store.mirror import loading
from vxmem.store.vector import vectors
from vxmem.store.vector.vectors import rowdot

from helpers import DAY, T0, run_python


class SeededEmbedder:
    """A Gaussian vector per text (crc32-seeded): no ties, unlike word buckets."""

    name = "seeded-48"

    def __call__(self, texts):
        return np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(48) for t in texts])


@pytest.fixture(autouse=True)
def _small_collections_keep_files(monkeypatch):
    monkeypatch.setattr(mirror_file, "MIN_DOCUMENTS", 1)
    monkeypatch.setattr(loading, "RESAVE_GENERATIONS", 0)
    monkeypatch.setattr(loading, "RESAVE_ROWS", 0)


def _open(path, dtype, **kw):
    return Vectrix(path, embedder=SeededEmbedder(), vector_dtype=dtype, **kw)


def _fill(db, n, start=0):
    return [db.remember(f"memory {i} about topic {i % 11}", session=f"s{i % 3}", timestamp=T0 + 60 * i, id=f"m{i}")
            for i in range(start, start + n)]


def _stored(db):
    """Each live document's float32 vector as SQLite holds it, by id."""
    rows = db.engine.database.conn.execute("SELECT id, vector FROM vx_docs").fetchall()
    return {id: np.frombuffer(blob, dtype=np.float32) for id, blob in rows}


def _held(db):
    with db.engine.locked() as m:
        return m.heap.dtype, {m.ids[p]: m.vector(p).copy() for p in m.live_positions().tolist()}


def _dense(db, session=None, limit=10):
    """(ids, scores) of a dense search for a fixed query, across sessions or within one."""
    where = None if session is None else {"_vx_session": session}
    got = db.search("memory 7 about topic 7 and more", limit=limit, filter=where, mode="dense")
    return got.ids, np.array([r.score for r in got])


@pytest.mark.parametrize("bad", ["f16", "float64", "", None, np.float16])
def test_a_bad_vector_dtype_is_refused_before_anything_is_written(tmp_path, bad):
    path = tmp_path / "db.vxdb"
    with pytest.raises(ValueError, match="vector_dtype must be one of 'float32', 'float16'"):
        _open(str(path), bad)
    assert list(tmp_path.iterdir()) == []


def test_without_numkong_a_float16_open_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "numkong", None)  # import numkong raises ImportError
    monkeypatch.setattr(vectors, "_numkong", None)
    path = tmp_path / "db.vxdb"
    with pytest.raises(ImportError, match="vector_dtype='float16' needs NumKong: pip install"):
        _open(str(path), "float16")
    assert list(tmp_path.iterdir()) == []
    _open(str(path), "float32").close()  # float32 needs no NumKong


def test_float16_rows_dot_as_their_values_do_and_each_row_alike_in_any_batch():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((700, 384))
    a = (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float16)
    q = rng.standard_normal(384).astype(np.float32)
    q /= np.linalg.norm(q)
    got = rowdot(a, q)
    assert got.dtype == np.float32 and got.shape == (700,)
    want = a.astype(np.float64) @ q.astype(np.float16).astype(np.float64)  # the query is rounded too
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-5)  # float32 sums of float16 products
    assert np.array_equal(rowdot(a[123:456], q), got[123:456])
    assert np.array_equal(rowdot(a[[5, 2, 600]], q), got[[5, 2, 600]])
    assert rowdot(a[:0], q).shape == (0,)


def test_float16_scans_work_after_usearch_loaded_its_kernels():
    """usearch loads NumKong into the global namespace; the older SimSIMD package then
    refused float16 (its symbols resolved to NumKong's). Either order works."""
    for first in ("import usearch.index", "pass"):
        got = run_python(f"""
            {first}
            import numpy as np
            from vxmem.store.vector.vectors import rowdot
            a = np.eye(4, dtype=np.float16)
            print(rowdot(a, np.array([1, 2, 3, 4], dtype=np.float32)).tolist())
            import usearch.index
            """)
        assert got.returncode == 0, got.stderr
        assert got.stdout.strip() == "[1.0, 2.0, 3.0, 4.0]"


def test_a_float16_handle_holds_half_and_ranks_as_its_float16_vectors_do():
    f32, f16 = _open(None, "float32"), _open(None, "float16")
    for db in (f32, f16):
        _fill(db, 300)
    dtype, held = _held(f16)
    assert dtype == np.float16
    stored = _stored(f16)
    assert all(np.array_equal(held[i], stored[i].astype(np.float16)) for i in stored)  # rounded, nothing else
    assert _stored(f32).keys() == stored.keys() and all(
        np.array_equal(_stored(f32)[i], stored[i]) for i in stored)  # SQLite: float32 whatever the handle
    q = f16.engine.embed(["memory 7 about topic 7 and more"])[0].astype(np.float16).astype(np.float64)
    for session in (None, "s1"):
        ids, scores = _dense(f16, session)
        pool = [i for i in held if session is None or f16.get(i).metadata["_vx_session"] == session]
        exact = {i: float(held[i].astype(np.float64) @ q) for i in pool}
        best = sorted(pool, key=lambda i: -exact[i])[:10]
        assert ids == best  # the exact top 10 of the float16 vectors
        np.testing.assert_allclose(scores, [exact[i] for i in best], rtol=0, atol=5e-5)
        ids32, scores32 = _dense(f32, session)
        np.testing.assert_allclose(scores, [dict(zip(ids32, scores32)).get(i, exact[i]) for i in ids],
                                   rtol=0, atol=2e-3)  # within float16's rounding of float32's scores
    got = f16.recall("memory 12 about topic 1", session="s0", now=T0 + DAY, limit=5)
    assert got.ids and got.ids == f32.recall("memory 12 about topic 1", session="s0", now=T0 + DAY, limit=5).ids


def test_handles_of_either_dtype_share_the_database_and_its_mirror_file(tmp_path):
    path = str(tmp_path / "db.vxdb")
    db = _open(path, "float32")
    ids = _fill(db, 120)
    db.close()  # a float32 mirror file
    db = _open(path, "float16")
    assert db.engine.database.saved_at is not None  # from the file, rounded as it loads
    dtype, held = _held(db)
    assert dtype == np.float16
    stored = _stored(db)
    assert all(np.array_equal(held[i], stored[i].astype(np.float16)) for i in ids)
    more = _fill(db, 30, start=120)
    db.forget(ids=ids[:5])
    want16 = _dense(db, "s2")
    db.close()  # a float16 mirror file
    assert mirror_file.load(path + ".mirror", {}, np.float16) is not None
    assert mirror_file.load(path + ".mirror", {}, np.float32) is None  # float16 cannot give float32 back
    db = _open(path, "float16", read_only=True)  # a float16 file, opened in float16: its pages, as written
    assert db.engine.database.saved_at is not None and _held(db)[0] == np.float16
    got_ids, got_scores = _dense(db, "s2")
    assert got_ids == want16[0] and np.array_equal(got_scores, want16[1])
    db.close()

    db = _open(path, "float32")
    assert db.engine.database.saved_at is None  # so this open read the rows
    dtype, held = _held(db)
    stored = _stored(db)
    assert dtype == np.float32 and held.keys() == stored.keys() == set(ids[5:] + more)
    assert all(np.array_equal(held[i], stored[i]) for i in stored)  # float32 exactly, as written
    ids32, scores32 = _dense(db, "s2")
    db.close()  # float32 again

    db = _open(path, "float16", read_only=True)
    assert db.engine.database.saved_at is not None
    assert _dense(db, "s2")[0] == want16[0]
    np.testing.assert_array_equal(_dense(db, "s2")[1], want16[1])
    np.testing.assert_allclose(want16[1], scores32, rtol=0, atol=2e-3)
    db.close()


def test_a_float16_reader_follows_a_float32_writer(tmp_path):
    path = str(tmp_path / "db.vxdb")
    writer = _open(path, "float32")
    _fill(writer, 50)
    reader = _open(path, "float16", read_only=True)
    new = _fill(writer, 20, start=50)
    got = reader.search("memory 55 about topic 0", limit=3, mode="dense")
    assert got.ids[0] == new[5]
    dtype, held = _held(reader)
    assert dtype == np.float16 and len(held) == 70
    reader.close()
    writer.close()


def test_the_index_over_a_float16_mirror_proposes_what_the_exact_scan_finds(tmp_path):
    path = str(tmp_path / "db.vxdb")
    graph = _open(path, "float16", exact_threshold=100)  # a search over all 900 goes through HNSW
    _fill(graph, 900)
    exact = _open(None, "float16", exact_threshold=0)
    _fill(exact, 900)
    ids, scores = _dense(graph)
    assert graph.engine.index.index is not None and len(graph.engine.index.index) == 900
    want_ids, want_scores = _dense(exact)
    assert ids == want_ids
    np.testing.assert_array_equal(scores, want_scores)  # re-scored on the float16 rows, as the scan scores
    graph.close()
    again = _open(path, "float16", exact_threshold=100)  # the saved index, checked against this mirror
    got_ids, got_scores = _dense(again)
    assert got_ids == ids and np.array_equal(got_scores, scores)
    assert again.engine.index.rebuilds == 0
    again.close()


def test_a_compacted_float16_mirror_stays_float16_and_ranks_the_same():
    db = _open(None, "float16", exact_threshold=0)
    ids = db.add([f"memory {i} about topic {i % 11}" for i in range(2400)], ids=[f"m{i}" for i in range(2400)])
    db.delete(ids[:1300])  # more holes than live documents, and over 1,024: the mirror is compacted
    with db.engine.locked() as m:
        assert m.n == m.n_alive == 1100 and m.heap.dtype == np.float16
    got = _dense(db)
    again = _open(None, "float16", exact_threshold=0)
    again.add([f"memory {i} about topic {i % 11}" for i in range(1300, 2400)], ids=ids[1300:])
    want = _dense(again)
    assert got[0] == want[0] and np.array_equal(got[1], want[1])
