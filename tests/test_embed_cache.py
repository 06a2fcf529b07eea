"""Embeddings computed once: the cache file of replays, and the embedder a database records."""

import sqlite3

import numpy as np
import pytest

from vxmem import HashingEmbedder, Vectrix
from vxmem.models.cache import CachedEmbedder, EmbeddingCache, open_cache
from vxmem.workbench.replay.run import replay
from vxmem.workbench.synth import generate

from helpers import WordHashEmbedder


class CountingEmbedder:
    """A named (so cacheable) embedder that counts its calls and the batches it was given."""

    name = "counting-words-32"

    def __init__(self):
        self.inner = WordHashEmbedder()
        self.batches: list[int] = []

    def __call__(self, texts):
        self.batches.append(len(texts))
        return self.inner(texts)


class OverlapReranker:
    """A deterministic stand-in reranker: shared words, counted."""

    name = "word-overlap"

    def __init__(self):
        self.calls = 0

    def __call__(self, query, texts):
        self.calls += 1
        q = set(query.lower().split())
        return [len(q & set(t.lower().split())) + 0.001 * len(t) for t in texts]


def _texts(conv):
    return {t for e in conv.events for t in (e.text, e.correction, e.query) if t}


def test_a_second_replay_embeds_and_reranks_nothing(tmp_path):
    conv = generate("many_users", users=3)
    emb, rr = CountingEmbedder(), OverlapReranker()
    settings = {"rerank": True, "reranker": rr}
    first = replay(conv, settings, embedder=emb, cache=tmp_path / "cache.sqlite")
    assert sum(emb.batches) == len(_texts(conv)), "every text and query embedded once, up front"
    assert max(emb.batches) <= 64 and rr.calls > 0
    emb.batches.clear()
    rr.calls = 0
    second = replay(conv, settings, embedder=emb, cache=tmp_path / "cache.sqlite")
    assert emb.batches == [] and rr.calls == 0
    assert [p["recalled_ids"] != [] for p in second.probes] == [p["recalled_ids"] != [] for p in first.probes]
    # NaN-aware: an unanswerable probe has no nDCG (NaN != NaN)
    assert [repr(p["ndcg"]) for p in second.probes] == [repr(p["ndcg"]) for p in first.probes]
    assert second.rerank == "word-overlap" and second.settings["reranker"] == "word-overlap"


def test_without_the_cache_a_replay_embeds_again(tmp_path):
    conv = generate("many_users", users=2)
    emb = CountingEmbedder()
    replay(conv, embedder=emb, cache=False)
    n = sum(emb.batches)
    replay(conv, embedder=emb, cache=False)
    assert sum(emb.batches) == 2 * n


def test_the_default_cache_file_lives_in_vxmem_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VXMEM_CACHE_DIR", str(tmp_path / "cachedir"))
    replay(generate("many_users", users=2), embedder=CountingEmbedder())
    assert (tmp_path / "cachedir" / "embeddings.sqlite").is_file()


def test_hashing_and_unnamed_embedders_are_not_cached(tmp_path):
    conv = generate("many_users", users=2)
    replay(conv, embedder=HashingEmbedder(), cache=tmp_path / "h.sqlite")
    replay(conv, embedder=WordHashEmbedder(), cache=tmp_path / "w.sqlite")
    assert not (tmp_path / "h.sqlite").exists() and not (tmp_path / "w.sqlite").exists()


def test_a_file_that_is_not_a_cache_is_refused(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="is not a vxmem embedding cache"):
        open_cache(bad)
    with pytest.raises(TypeError, match="cache must be a path"):
        open_cache(3)


def test_cached_vectors_are_the_embedders_own_and_the_wrapper_looks_like_it(tmp_path):
    emb = CountingEmbedder()
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    wrapped = CachedEmbedder(emb, cache)
    texts = ["alpha beta", "gamma", "alpha beta"]
    assert np.array_equal(wrapped(texts), emb.inner(texts))
    assert emb.batches == [2]  # the repeated text once
    again = CachedEmbedder(emb, EmbeddingCache(tmp_path / "c.sqlite"))  # a new process, say
    assert np.array_equal(again(texts), emb.inner(texts)) and emb.batches == [2]
    assert again.name == emb.name and again.warm(["gamma", "delta"]) == 1
    with pytest.raises(ValueError, match="only an embedder with a name"):
        CachedEmbedder(WordHashEmbedder(), cache)


# ---------------------------------------------------------------------------- the database's embedder


def _meta(path, key):
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT value FROM vx_meta WHERE key = ?", (key,)).fetchone()
    return row and row[0]


def test_a_database_records_its_embedder_and_refuses_another(tmp_path, hashing_embedder):
    path = tmp_path / "db.vxdb"
    with Vectrix(path, embedder="hashing") as db:
        db.add(["alpha beta gamma"])
    assert _meta(path, "embedder") == hashing_embedder.name
    with Vectrix(path, embedder=hashing_embedder) as db:  # the same one, by another route
        assert len(db) == 1
    other = HashingEmbedder(dim=64)
    with pytest.raises(ValueError, match=f"holds vectors of embedder '{hashing_embedder.name}', not of "
                                         f"'{other.name}'"):
        Vectrix(path, embedder=other)
    with pytest.raises(ValueError, match=f"holds vectors of '{hashing_embedder.name}', not of this embedder "
                                         r"\(WordHashEmbedder\)"):
        Vectrix(path, embedder=WordHashEmbedder())
    with Vectrix(path, embedder="hashing") as db:  # the refusals changed nothing
        assert db.get(db.add(["delta"])[0]).text == "delta" and len(db) == 2


def test_a_reopened_database_never_embeds_its_documents_again(tmp_path):
    path = tmp_path / "db.vxdb"
    writer = CountingEmbedder()
    with Vectrix(path, embedder=writer) as db:
        ids = db.add(["alpha beta gamma", "delta epsilon", "zeta eta theta"])
    assert sum(writer.batches) == 3 and _meta(path, "embedder") == writer.name
    reader = CountingEmbedder()  # the same model (by name) in a new process, say
    with Vectrix(path, embedder=reader) as db:
        assert reader.batches == [], "opening embeds nothing: the stored vectors are used as they are"
        assert db.search("delta epsilon", limit=1)[0].id == ids[1]
        assert reader.batches == [1], "a search embeds its query only"


def test_a_database_with_no_recorded_name_is_checked_by_one_vector(tmp_path, hashing_embedder):
    path = tmp_path / "old.vxdb"
    with Vectrix(path, embedder="hashing") as db:
        db.add(["written before names were recorded"])
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM vx_meta WHERE key = 'embedder'")
    with pytest.raises(ValueError, match="holds vectors of the 'hashing' embedder.*embedder='hashing'"):
        Vectrix(path, embedder=CountingEmbedder())
    with Vectrix(path, read_only=True, embedder="hashing") as db:  # a reader checks, and writes nothing
        assert len(db) == 1
    assert _meta(path, "embedder") is None
    with Vectrix(path, embedder="hashing"):  # the writer that matches records the name
        pass
    assert _meta(path, "embedder") == hashing_embedder.name


def test_an_unnamed_embedder_is_checked_by_its_vectors(tmp_path):
    path = tmp_path / "w.vxdb"
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        db.add(["alpha beta"])
    assert _meta(path, "embedder") is None
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        assert len(db) == 1
    with pytest.raises(ValueError, match="not of this embedder.*32-d vs 16-d"):
        Vectrix(path, embedder=WordHashEmbedder(dim=16))
