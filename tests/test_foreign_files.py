"""Cache files copied from another database (same dimension, same row count) are detected and rebuilt, never trusted."""

import json
import shutil

import pytest

from vxmem import Vectrix
from vxmem.store.mirror import file as mirror_file
from vxmem.store.sqlite.files import index_files, mirror_path, postings_path

N = 300


@pytest.fixture
def two_databases(tmp_path, monkeypatch):
    """Two databases of N documents of the same dimension, each closed with its index, mirror
    file and lexical postings beside it."""
    monkeypatch.setattr(mirror_file, "MIN_DOCUMENTS", 100)  # files beside a small database too
    paths = {}
    for word in ("apple", "banana"):
        path = tmp_path / f"{word}.vxdb"
        with Vectrix(path, embedder="hashing", exact_threshold=1) as db:
            db.add([f"{word} number {i}" for i in range(N)])
            db.build_index()
            db.search(f"{word} number 7", mode="lexical")  # the postings exist, so close saves them
        paths[word] = str(path)
    return paths


def _caches(path: str) -> list[str]:
    return [*index_files(path), mirror_path(path), postings_path(path)]


@pytest.mark.parametrize("which", ["index", "mirror", "postings", "all"])
def test_a_cache_file_from_another_database_is_rebuilt(two_databases, which):
    apple, banana = two_databases["apple"], two_databases["banana"]
    pick = {"index": slice(0, 2), "mirror": slice(2, 3), "postings": slice(3, 4), "all": slice(0, 4)}[which]
    copied = 0
    for src, dst in list(zip(_caches(apple), _caches(banana)))[pick]:
        shutil.copy(src, dst)
        copied += 1
    assert copied
    with Vectrix(banana, embedder="hashing", exact_threshold=1) as db:
        assert len(db) == N and all(r.text.startswith("banana") for r in db.scan())
        assert db.search("banana number 7", limit=1)[0].text == "banana number 7"  # through the index (N > 1)
        db.build_index()
        assert db.search("banana number 7", limit=1, mode="lexical")[0].text == "banana number 7"
        assert not db.search("apple", limit=5, mode="lexical").ids
        uid = db.engine.database.uid
    with open(index_files(banana)[1]) as f:
        assert json.load(f)["uid"] == uid  # the index beside it is this database's again
