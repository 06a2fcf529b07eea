"""Character n-grams hashed into counts, exactly as scikit-learn's HashingVectorizer counts them.

The hashing embedder's features are scikit-learn's ``HashingVectorizer(analyzer="char_wb",
lowercase=True, alternate_sign=False, norm=None)``: each word of the lower-cased text padded
with a space each side, its n-grams of every length in the range (a word shorter than the
shortest n-gram counted once, whole), each hashed with MurmurHash3 (x86, 32 bits, seed 0) of
its UTF-8 bytes into ``abs(hash) % n_features``. Importing scikit-learn costs one to three
seconds (it imports pandas and scipy.stats), paid by every process that uses the hashing
embedder (a server, a CLI command); the hash is a few lines of numpy, run on all of a batch's
n-grams at once. ``tests/test_hashing.py`` checks the counts equal scikit-learn's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["char_wb_ngrams", "hashed_counts", "murmurhash3_32"]

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
CHUNK = 1 << 15  # n-grams hashed at once: the padded rows and their index stay a few MB


def char_wb_ngrams(text: str, low: int, high: int) -> list[str]:
    """The n-grams (``low`` to ``high`` characters) of each word of ``text``, padded with a
    space each side; a padded word shorter than ``n`` is one n-gram, counted once."""
    grams: list[str] = []
    add = grams.append
    for word in text.lower().split():
        w = f" {word} "
        size = len(w)
        for n in range(low, high + 1):
            add(w[:n])
            if size <= n:
                break  # the whole padded word, once
            for start in range(1, size - n + 1):
                add(w[start:start + n])
    return grams


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmurhash3_32(keys: Sequence[bytes]) -> np.ndarray:
    """MurmurHash3 x86 32-bit, seed 0, of each of ``keys``, as ``int32``: every key at once, its
    bytes laid in a zero-padded row (a zero byte adds nothing to the tail's word, so the tail is
    one more block, masked out of the body by each key's length)."""
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    if not lengths.size:
        return np.zeros(0, dtype=np.int32)
    width = (int(lengths.max()) // 4 + 1) * 4
    blocks = np.frombuffer(b"".join([k.ljust(width, b"\0") for k in keys]), dtype="<u4").reshape(len(keys), -1)
    nblocks = lengths // 4
    h = np.zeros(len(keys), dtype=np.uint32)
    for i in range(int(nblocks.max())):
        k1 = _rotl(blocks[:, i] * _C1, 15) * _C2
        h = np.where(i < nblocks, _rotl(h ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64), h)
    tail = blocks[np.arange(len(keys)), nblocks]  # zero where the length is a multiple of four
    h ^= _rotl(tail * _C1, 15) * _C2
    h ^= lengths.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h.view(np.int32)


def hashed_counts(texts: Sequence[str], n_features: int, ngram_range: tuple[int, int]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The texts' n-gram counts as a CSR matrix's ``(data, indices, indptr)``: a row per text,
    one entry per distinct bucket, in bucket order (scikit-learn's canonical form), counts as
    ``float32``."""
    rows: list[int] = []
    grams: list[bytes] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, not {type(text).__name__}")
        got = char_wb_ngrams(text, *ngram_range)
        rows.extend([i] * len(got))
        grams.extend(g.encode("utf-8") for g in got)
    # abs() in 64 bits: abs(-2**31) % n is what scikit-learn defines it to be
    hashes = [murmurhash3_32(grams[i:i + CHUNK]) for i in range(0, len(grams), CHUNK)]
    buckets = np.abs(np.concatenate(hashes or [np.zeros(0, np.int32)]).astype(np.int64)) % n_features
    pairs = np.asarray(rows, dtype=np.int64) * n_features + buckets
    distinct, counts = np.unique(pairs, return_counts=True)  # sorted: by text, then by bucket
    indptr = np.searchsorted(distinct, np.arange(len(texts) + 1, dtype=np.int64) * n_features)
    return counts.astype(np.float32), (distinct % n_features).astype(np.int32), indptr.astype(np.int32)
