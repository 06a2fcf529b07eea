"""The hashing embedder's n-gram counts are scikit-learn's HashingVectorizer's, without importing scikit-learn."""

import random

import numpy as np
import pytest
from scipy import sparse

from vxmem.models.embed import HashingEmbedder, l2_normalize
from vxmem.models.hashing import char_wb_ngrams, hashed_counts, murmurhash3_32

from helpers import ROOT, run_python

EDGES = ["", " ", "a", "ab", "abc", "abcd", "ÄÖÜ straße ﬁ İstanbul", "emoji 🎉🎉 ok", "tab\tsep\nnew  line",
         "x" * 3000, "日本語のテキスト", "  leading and trailing  ", "İ", "ǅ", "\u00a0nbsp\u2003em", "MiXeD CaSe"]


def _texts():
    rng = random.Random(0)
    alphabet = "abcdefgh xyzéü日🎉\t\n İ"
    found = [line for path in sorted((ROOT / "datasets").glob("*.jsonl")) for line in
             path.read_text(encoding="utf-8").splitlines()[:300]]
    return EDGES + found + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)]


def test_the_counts_are_scikit_learns():
    from sklearn.feature_extraction.text import HashingVectorizer

    texts = _texts()
    for n_features, ngram_range in ((2**18, (3, 5)), (1000, (1, 2)), (7, (2, 4))):
        want = HashingVectorizer(analyzer="char_wb", ngram_range=ngram_range, n_features=n_features,
                                 alternate_sign=False, norm=None, lowercase=True, dtype=np.float32).transform(texts)
        got = sparse.csr_matrix(hashed_counts(texts, n_features, ngram_range), shape=want.shape)
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert got.data.dtype == np.float32 and np.array_equal(got.data, want.data)


def test_the_hash_is_murmurhash3_as_scikit_learn_computes_it():
    from sklearn.utils import murmurhash3_32 as reference

    rng = random.Random(1)
    keys = [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 30) for _ in range(20)]
    assert murmurhash3_32(keys).tolist() == [reference(k, seed=0) for k in keys]
    assert murmurhash3_32([]).size == 0


def test_a_short_word_is_one_ngram_and_a_long_one_every_window():
    assert char_wb_ngrams("A", 3, 5) == [" a "]
    assert char_wb_ngrams("ab", 3, 5) == [" ab", "ab ", " ab "]
    assert char_wb_ngrams("tea  cup", 3, 3) == [" te", "tea", "ea ", " cu", "cup", "up "]
    with pytest.raises(TypeError, match="strings"):
        hashed_counts(["fine", 3], 16, (3, 5))


def test_an_empty_batch_and_an_empty_text_embed_to_nothing_and_zeros():
    e = HashingEmbedder()
    assert e([]).shape == (0, 384)
    v = e(["", "tea"])
    assert not v[0].any() and np.isclose(np.linalg.norm(v[1]), 1.0)


@pytest.mark.subprocess
def test_a_process_on_the_hashing_embedder_does_not_import_scikit_learn():
    out = run_python("""
        import sys
        from vxmem import Vectrix
        db = Vectrix(embedder="hashing")
        db.remember("I prefer dark mode", timestamp=0)
        print(len(db.recall("which theme?", now=1)), "sklearn" in sys.modules)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "False"]


def _scipy_projection(n_features, dim, k, seed):
    """The projection as the embedder drew it when it multiplied with scipy: the same draws."""
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, dim, size=(n_features, k))
    while True:
        s = np.sort(cols, axis=1)
        dup = np.any(s[:, 1:] == s[:, :-1], axis=1)
        if not dup.any():
            break
        cols[dup] = rng.integers(0, dim, size=(int(dup.sum()), k))
    signs = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=n_features * k)
    rows = np.repeat(np.arange(n_features), k)
    return sparse.csr_matrix((signs, (rows, cols.ravel())), shape=(n_features, dim), dtype=np.float32)


@pytest.mark.parametrize("dim, n_features, k, seed", [(384, 2**18, 4, 20240601), (16, 64, 3, 7)])
def test_the_vectors_are_bit_for_bit_those_of_the_scipy_product(dim, n_features, k, seed):
    texts = _texts()
    e = HashingEmbedder(dim=dim, n_features=n_features, nnz_per_feature=k, seed=seed)
    counts = sparse.csr_matrix(hashed_counts(texts, n_features, e.ngram_range), shape=(len(texts), n_features))
    counts.data = np.log1p(counts.data, dtype=np.float32)
    want = (counts @ _scipy_projection(n_features, dim, k, seed)).toarray().astype(np.float32)
    got = e(texts)
    assert got.dtype == np.float32 and got.tobytes() == l2_normalize(want).tobytes()
