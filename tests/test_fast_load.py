"""An open reads every document's metadata in bulk (orjson where it reads the same values as
json, the reserved columns list by list): the values must be exactly those of the per-row path."""

import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vxmem.core.keys import K_EXPIRES, K_KIND, K_SESSION, K_SUPERSEDED_AT, K_SUPERSEDED_BY, K_TS, K_TURN
from vxmem.store.mirror.columns import columns_of, columns_of_all
from vxmem.store.sqlite.jsonio import loads_all

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-2**70, max_value=2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
                     st.sampled_from([1_700_000_000.5, 1_700_000_000, 0, -1, 10**19, "fact", "turn", "s1"]))
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3),
                    st.dictionaries(st.text(max_size=3), _SCALARS, max_size=2))
_KEYS = st.sampled_from([K_KIND, K_TS, K_EXPIRES, K_TURN, K_SESSION, K_SUPERSEDED_BY, K_SUPERSEDED_AT, "topic"])
_METAS = st.lists(st.dictionaries(_KEYS, _VALUES, max_size=6), min_size=1, max_size=30)


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return a == b and type(a) is type(b)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(_METAS)
def test_the_columns_read_in_bulk_equal_the_per_row_columns(metas):
    code, ts, expires, superseded, turn, sessions = columns_of_all(metas)
    for i, meta in enumerate(metas):
        want = columns_of(meta)
        got = (int(code[i]), float(ts[i]), float(expires[i]), superseded[i], float(turn[i]), sessions[i])
        assert all(_same(w, g) for w, g in zip(want, got)), (meta, want, got)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=4), _VALUES, max_size=4), max_size=20))
def test_metadata_read_in_bulk_equals_json_loads(metas):
    texts = [json.dumps(m, ensure_ascii=False, allow_nan=False) for m in metas]
    got = loads_all(texts)
    assert got == [json.loads(t) for t in texts]
    assert [json.dumps(g) for g in got] == [json.dumps(json.loads(t)) for t in texts]  # ints stay ints


def test_values_orjson_reads_otherwise_are_read_as_json_reads_them():
    texts = ['{"a": 123456789012345678901234567890}', '{"a": -9223372036854775809}', '{"a": NaN}',
             '{"a": 1e400}', '{"a": 1, "a": 2}', '{"a": -0.0}', '{"a": "19 digits 1234567890123456789"}',
             '{"b": [18446744073709551615, 1.5]}']
    got = loads_all(texts)
    want = [json.loads(t) for t in texts]
    assert json.dumps(got) == json.dumps(want)
    assert math.copysign(1, got[5]["a"]) == -1.0
    assert type(got[0]["a"]) is int and type(got[1]["a"]) is int
    assert np.isnan(got[2]["a"]) and got[3]["a"] == math.inf


def test_the_lexical_postings_read_per_term_equal_those_read_per_token(tmp_path, word_embedder):
    from vxmem import Vectrix
    from vxmem.store.lexical.bm25 import LexicalIndex

    path = str(tmp_path / "lex.db")
    with Vectrix(path, embedder=word_embedder) as db:
        ids = db.add(["the cat sat on the mat, the cat!", "Café au lait, café noir", "running runs ran",
                      "one", "the the the the", "nothing in common here", "cat café running"])
        db.delete([ids[3]])
        db.add(["added after a delete: cat"])
        db.engine.database.index_pending()  # FTS5 holds them all
        conn = db.engine.database.conn
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_fts_i USING fts5vocab(main, vx_fts, 'instance')")
        per_token = LexicalIndex(conn)
        per_token.add_tokens(conn.execute("SELECT term, doc FROM temp.vx_fts_i WHERE col = 'text'").fetchall())
        per_term = LexicalIndex(conn)
        per_term.sync(10**6, lambda rowid: [])
        assert per_token.postings.keys() == per_term.postings.keys()
        for term, a in per_token.postings.items():
            b = per_term.postings[term]
            assert a.rowids[: a.n].tolist() == b.rowids[: b.n].tolist(), term
            assert a.tf[: a.n].tolist() == b.tf[: b.n].tolist(), term
        rows = max(conn.execute("SELECT max(rowid) FROM vx_docs").fetchone()[0] + 1, 9)
        lengths = per_token.text_len.to_array(rows)
        assert lengths.tolist() == per_term.text_len.to_array(rows).tolist()
        assert int(lengths.sum()) > 0
