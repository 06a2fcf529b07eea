"""Shared fixtures. Keep this small: edit with targeted insertions."""

import zlib

import numpy as np
import pytest

from vxmem.embed import default_embedder


class WordHashEmbedder:
    """A trivial, fast, deterministic embedder: each lower-cased word lands on one of
    ``dim`` buckets (crc32, so the same in every process). Lexical, like the default, at a
    fraction of its start-up cost; for tests that exercise bookkeeping, not ranking quality."""

    def __init__(self, dim: int = 32):
        self.dim = dim

    def __call__(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.encode("utf-8", "surrogatepass")) % self.dim] += 1.0
            out[i, zlib.crc32(t.encode("utf-8", "surrogatepass")) % self.dim] += 0.01
        return out


@pytest.fixture(scope="session")
def hashing_embedder():
    """The default embedder: the process-wide shared instance."""
    return default_embedder()


@pytest.fixture(scope="session")
def word_embedder():
    return WordHashEmbedder()
