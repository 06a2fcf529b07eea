"""The embedder contract: what an embedder returns is checked, named in the error, and nothing is written."""

import numpy as np
import pytest

from vxmem import Vectrix

from helpers import T0


class Scripted:
    """An embedder that returns what the test says, and a first call of good 4-d vectors."""

    name = "scripted-test-embedder"

    def __init__(self, bad):
        self.bad = bad
        self.calls = 0

    def __call__(self, texts):
        self.calls += 1
        if self.calls == 1:  # the first memory, so the collection has a dimension
            return np.eye(4, dtype=np.float32)[: len(texts)] + 0.1
        return self.bad(texts)


BAD = {
    "no dimensions": (lambda texts: np.zeros((len(texts), 0), dtype=np.float32), ValueError, "dimension 0"),
    "all zero": (lambda texts: np.zeros((len(texts), 4), dtype=np.float32), ValueError, "all-zero"),
    "nan": (lambda texts: np.full((len(texts), 4), np.nan, dtype=np.float32), ValueError, "non-finite"),
    "inf": (lambda texts: np.full((len(texts), 4), np.inf), ValueError, "non-finite"),
    "one row too many": (lambda texts: np.ones((len(texts) + 1, 4), dtype=np.float32), ValueError, "shape"),
    "another dimension": (lambda texts: np.ones((len(texts), 5), dtype=np.float32), ValueError, "5-d"),
    "ints": (lambda texts: np.ones((len(texts), 4), dtype=np.int64), TypeError, "floats"),
    "bools": (lambda texts: np.ones((len(texts), 4), dtype=bool), TypeError, "floats"),
    "complex": (lambda texts: np.ones((len(texts), 4), dtype=complex), TypeError, "floats"),
    "ragged": (lambda texts: [[1.0, [2.0, 3.0]] for _ in texts], ValueError, "not an \\(n, d\\) array"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_embedder_output_is_refused_naming_the_embedder_and_nothing_is_written(case):
    bad, error, words = BAD[case]
    db = Vectrix(embedder=Scripted(bad))
    db.remember("first memory", session="s", timestamp=T0)
    with pytest.raises(error, match=words) as raised:
        db.remember("second memory", session="s", timestamp=T0 + 1)
    assert "scripted-test-embedder" in str(raised.value)
    assert [r.text for r in db.turns("s", now=T0 + 2)] == ["first memory"]


def test_a_bad_batch_refuses_the_whole_add():
    db = Vectrix(embedder=Scripted(lambda texts: np.vstack([np.ones((len(texts) - 1, 4)), np.zeros((1, 4))])))
    db.add(["a"])
    with pytest.raises(ValueError, match="all-zero vector for text 2"):
        db.add(["b", "c", "d"])
    assert len(db) == 1


def test_a_query_may_embed_to_zero_and_still_matches_by_words():
    def embedder(texts):
        return np.array([[0.0, 0.0] if t == "???" else [1.0, float(len(t))] for t in texts])

    db = Vectrix(embedder=embedder)
    db.remember("plain words here", session="s", timestamp=T0)
    assert db.recall("???", session="s", now=T0 + 1, mode="dense", rerank=False).ids  # no error: ranked, at 0


def test_an_empty_text_is_named_as_empty_not_as_the_embedders_fault():
    db = Vectrix(embedder="hashing")
    with pytest.raises(ValueError, match="text 1 is empty: there is nothing to embed"):
        db.add(["fine", "   "])
    assert len(db) == 0
