"""RowidMap: a value per rowid, dense while the rowids are, sorted pairs when not; a dict is the oracle."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from vxmem.store.mirror.rowids import SLACK, SPREAD, RowidMap

ROWID = st.one_of(st.integers(0, 200), st.integers(0, 100_000))
OPS = st.lists(st.one_of(st.tuples(st.just("set"), ROWID, st.integers(-1, 50)),
                         st.tuples(st.just("add"), st.lists(ROWID, min_size=1, max_size=30))),
               max_size=40)


def within_bounds(m: RowidMap) -> bool:
    """The map's arrays are sized by the rowids it holds, not by the largest."""
    if m.dense:
        return m.nbytes <= 8 * max(64, SPREAD * m.held + SLACK)
    return m.nbytes <= 16 * max(16, 2 * m.held)


@given(start=st.lists(ROWID, max_size=30, unique=True), ops=OPS, asks=st.lists(ROWID, max_size=20))
def test_a_rowid_map_reads_like_a_dict_and_stays_sized_by_its_rowids(start, ops, asks):
    missing = -1 if len(start) % 2 else 0
    m = RowidMap.of(np.array(start, dtype=np.int64), np.arange(len(start)), missing)
    want = dict(zip(start, range(len(start))))
    for op in ops:
        if op[0] == "set":
            m.set(op[1], op[2])
            want[op[1]] = op[2]
        else:
            m.add(np.array(op[1], dtype=np.int64))
            for r in op[1]:
                want[r] = want.get(r, missing) + 1
        assert within_bounds(m)
    keys = np.array(sorted(set(asks) | set(want)), dtype=np.int64)
    expected = [want.get(int(r), missing) for r in keys]
    assert m.get(keys).tolist() == expected
    assert m.get(keys, ascending=True).tolist() == expected
    assert m[keys[::-1]].tolist() == expected[::-1]
    assert [m.value(int(r)) for r in keys] == expected
    top = int(keys.max(initial=0)) + 1
    assert m.to_array(top)[keys].tolist() == expected


def test_consecutive_rowids_keep_the_array_indexed_by_rowid():
    # A file store's rowids 1..n: the array is the fastest map and must stay.
    m = RowidMap(-1)
    for r in range(1, 5001):
        m.set(r, r - 1)
    assert m.dense and m.nbytes <= 8 * 2 * 5001
    lengths = RowidMap(0)
    lengths.add(np.repeat(np.arange(1, 5001), 3))
    assert lengths.dense and lengths.value(4321) == 3


def test_a_few_rowids_spread_far_apart_keep_sorted_pairs():
    m = RowidMap.of(np.array([5, 400_000, 900_000]), np.array([0, 1, 2]))
    assert not m.dense and m.nbytes <= 64
    m.set(950_000, 3)
    m.set(700_000, 4)  # below the newest: inserted in order
    assert m.get(np.array([5, 700_000, 900_000, 950_000, 6])).tolist() == [0, 4, 2, 3, -1]
    lengths = RowidMap(0)
    lengths.add(np.array([10, 500_000, 500_000, 999_999]))
    assert not lengths.dense and lengths.nbytes <= 16 * 16
    assert lengths.get(np.array([10, 500_000, 999_999, 11])).tolist() == [1, 2, 1, 0]
    array = RowidMap.of_array(np.zeros(100_000, dtype=np.int64) + np.eye(1, 100_000, 77_777, dtype=np.int64)[0])
    assert not array.dense and array.value(77_777) == 1 and array.value(78) == 0


def test_sorted_pairs_that_grow_dense_become_an_array_again():
    # A file store's mirror compacted after most rows went: sparse for a while, then rows come
    # one after another and the array (one gather) is worth its room again.
    m = RowidMap.of(np.array([20_000]), np.array([0]))
    assert not m.dense
    for r in range(1, 17_000):  # checked as the pairs grow their room
        m.set(r, r)
    assert m.dense and m.get(np.array([1, 16_999, 17_000, 20_000])).tolist() == [1, 16_999, -1, 0]
    lengths = RowidMap(0)
    lengths.add(np.array([30_000]))
    assert not lengths.dense
    lengths.add(np.arange(1, 16_000))
    assert lengths.dense and lengths.get(np.array([1, 15_999, 16_000, 30_000])).tolist() == [1, 1, 0, 1]
