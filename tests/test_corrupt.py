"""Corrupt or foreign files: a clear error or a rebuild, never a crash or a silent empty store.

Opening a damaged index file runs in a child process, so a segfault in a native library
shows up as a failed test instead of taking pytest down with it.
"""

import contextlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from vxmem import InvalidDatabaseError, Vectrix, VectrixError

from helpers import WordHashEmbedder, run_python

N = 300


WORDS = ("tea coffee paris london dark light mode pdf csv report cat dog blue red green river "
         "mountain piano violin chess garden winter summer bread cheese train bicycle").split()


def _text(i):
    return f"memory {i} about {WORDS[i % len(WORDS)]} {WORDS[(i // 7) % len(WORDS)]} {WORDS[(i * 13) % len(WORDS)]}"


def _embedder():
    return WordHashEmbedder(dim=64)


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A database of N memories with a saved HNSW index file beside it."""
    path = tmp_path_factory.mktemp("corrupt") / "orig.db"
    with Vectrix(path, embedder=_embedder(), exact_threshold=8) as db:
        for i in range(N):
            db.remember(_text(i), session=f"s{i % 5}", timestamp=1000 + i)
        db.search("tea", limit=3)  # builds the index, saved on close
    assert os.path.exists(str(path) + ".usearch") and os.path.exists(str(path) + ".usearch.json")
    return path


def _copy(original, tmp_path, with_index=True):
    path = tmp_path / "copy.db"
    shutil.copy(original, path)
    if with_index:
        for ext in (".usearch", ".usearch.json"):
            shutil.copy(str(original) + ext, str(path) + ext)
    return path


def _read_bytes(path):
    return Path(path).read_bytes()


# ------------------------------------------------------------------ the database file


@pytest.mark.parametrize("content", [b"hello, this is a text file\n" * 50, bytes(range(256)) * 40,
                                     b"SQLite format 3\x00" + b"\xff" * 4000],
                         ids=["text", "binary", "fake-sqlite-header"])
def test_a_file_that_is_not_a_database_gets_invalid_database_error_and_is_left_untouched(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(InvalidDatabaseError, match="notes.txt"):
        Vectrix(path, embedder=_embedder())
    assert path.read_bytes() == content
    with pytest.raises(InvalidDatabaseError):
        Vectrix(path, embedder=_embedder(), read_only=True)


def test_a_foreign_sqlite_database_gets_invalid_database_error_naming_its_tables_and_is_left_untouched(tmp_path):
    path = tmp_path / "app.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('alice')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(InvalidDatabaseError, match="users"):
        Vectrix(path, embedder=_embedder())
    assert path.read_bytes() == before  # not switched to WAL, not given our tables
    assert not os.path.exists(str(path) + "-wal")


def test_a_database_from_a_newer_vxmem_gets_invalid_database_error(original, tmp_path):
    path = _copy(original, tmp_path, with_index=False)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE vx_meta SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidDatabaseError, match="newer vxmem"):
        Vectrix(path, embedder=_embedder())


@pytest.mark.parametrize("fraction", [0.001, 0.02, 0.3, 0.5, 0.9, 0.99])
def test_a_truncated_database_gets_invalid_database_error_or_opens_with_every_document(original, tmp_path, fraction):
    path = _copy(original, tmp_path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(max(1, int(size * fraction)))
    try:
        db = Vectrix(path, embedder=_embedder())
    except InvalidDatabaseError as exc:
        assert "copy.db" in str(exc)
        return
    with db:  # the cut missed every document (it took free or lexical-index pages): all of them, intact
        assert db.count() == N
        assert sorted(r.text for r in db.scan()) == sorted(_text(i) for i in range(N))


def test_a_database_truncated_to_nothing_is_refused_when_its_index_file_says_it_held_documents(original, tmp_path):
    path = _copy(original, tmp_path)
    open(path, "wb").close()
    with pytest.raises(InvalidDatabaseError, match=f"held {N} documents"):
        Vectrix(path, embedder=_embedder())
    assert os.path.getsize(path) == 0  # nothing written over the evidence


def test_a_database_file_deleted_and_made_again_does_not_use_the_old_index_file(original, tmp_path):
    path = _copy(original, tmp_path)
    os.remove(path)
    # Same number of writes and documents as the old one, different content: the old
    # index's generation and count would match, so only its database identity tells.
    with Vectrix(path, embedder=_embedder(), exact_threshold=8) as db:
        for i in range(N):
            db.remember(f"entirely different words number {i} zebra", session=f"s{i % 5}", timestamp=1000 + i)
        top = db.search("zebra number 7", limit=3)
        db.exact_threshold = 0
        assert [round(r.score, 5) for r in top] == [round(r.score, 5) for r in db.search("zebra number 7", limit=3)]
        assert all("zebra" in r.text for r in top)


@pytest.mark.parametrize("damage", ["bad-json", "wrong-length-vector", "json-list", "bad-generation"])
def test_a_damaged_row_gets_invalid_database_error_naming_the_file(original, tmp_path, damage):
    path = _copy(original, tmp_path, with_index=False)
    sql = {
        "bad-json": "UPDATE vx_docs SET metadata = '{not json' WHERE rowid = 3",
        "wrong-length-vector": "UPDATE vx_docs SET vector = x'00112233' WHERE rowid = 3",
        "json-list": "UPDATE vx_docs SET metadata = '[1, 2]' WHERE rowid = 3",
        "bad-generation": "UPDATE vx_meta SET value = 'many' WHERE key = 'generation'",
    }[damage]
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()
    with pytest.raises(InvalidDatabaseError, match="copy.db"):
        Vectrix(path, embedder=_embedder())


def _pages_of(path, table):
    """The page numbers of ``table``'s own b-tree and the page size (SQLite's dbstat)."""
    with contextlib.closing(sqlite3.connect(path)) as c:
        size = c.execute("PRAGMA page_size").fetchone()[0]
        return [p for (p,) in c.execute("SELECT pageno FROM dbstat WHERE name = ? ORDER BY pageno", (table,))], size


def test_bytes_flipped_in_the_middle_of_the_documents_get_invalid_database_error(original, tmp_path):
    path = _copy(original, tmp_path)
    pages, size = _pages_of(path, "vx_docs")  # the middle of the rows every open reads, wherever the schema puts them
    with open(path, "r+b") as f:
        f.seek((pages[len(pages) // 2] - 1) * size)
        f.write(b"\xa5" * 8192)
    with pytest.raises(InvalidDatabaseError):
        Vectrix(path, embedder=_embedder())


def test_a_directory_as_the_database_path_gets_a_clear_error(tmp_path):
    with pytest.raises((VectrixError, OSError)):
        Vectrix(tmp_path, embedder=_embedder())


# ------------------------------------------------------------------ the index file (a cache)

CHILD = """
    import json, sys
    from helpers import WordHashEmbedder, run_python
    from vxmem import Vectrix
    with Vectrix(sys.argv[1], embedder=WordHashEmbedder(dim=64), exact_threshold=8) as db:
        hnsw = db.search(sys.argv[2], limit=5)
        size = len(db.engine.index)
        db.exact_threshold = 0
        exact = db.search(sys.argv[2], limit=5)
        print(json.dumps({"count": db.count(), "index_size": size,
                          "hnsw": [round(r.score, 5) for r in hnsw], "exact": [round(r.score, 5) for r in exact],
                          "top": hnsw[0].text}))
"""


def _open_in_child(path):
    out = run_python(CHILD, str(path), _text(7))
    assert out.returncode == 0, f"the interpreter died (rc {out.returncode}): {out.stderr[-2000:]}"
    return json.loads(out.stdout)


def _damage_index(path, how):
    idx, side = str(path) + ".usearch", str(path) + ".usearch.json"
    size = os.path.getsize(idx)
    if how == "missing":
        os.remove(idx)
    elif how == "missing-sidecar":
        os.remove(side)
    elif how == "random-bytes":
        Path(idx).write_bytes(os.urandom(size))
    elif how == "zeros":
        Path(idx).write_bytes(b"\0" * size)
    elif how == "truncated":
        with open(idx, "r+b") as f:
            f.truncate(size // 2)
    elif how == "header-only":
        with open(idx, "r+b") as f:
            f.truncate(64)
    elif how == "empty":
        open(idx, "wb").close()
    elif how == "sidecar-garbage":
        Path(side).write_bytes(os.urandom(40))
    elif how == "sidecar-a-list":
        Path(side).write_text("[1, 2, 3]")
    elif how == "sidecar-wrong-types":
        s = json.loads(Path(side).read_text())
        Path(side).write_text(json.dumps({k: str(v) for k, v in s.items()}))
    else:  # pragma: no cover
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["missing", "missing-sidecar", "random-bytes", "zeros", "truncated", "header-only",
                                 "empty", "sidecar-garbage", "sidecar-a-list", "sidecar-wrong-types"])
def test_a_missing_or_damaged_index_file_is_rebuilt_from_the_database(original, tmp_path, how):
    path = _copy(original, tmp_path)
    _damage_index(path, how)
    got = _open_in_child(path)
    assert got["count"] == N
    assert got["index_size"] == N
    assert got["hnsw"] == got["exact"]
    assert got["top"] == _text(7)


def test_an_index_file_of_another_dimension_is_rebuilt(original, tmp_path):
    path = _copy(original, tmp_path)
    other = tmp_path / "other.db"
    with Vectrix(other, embedder=WordHashEmbedder(dim=16), exact_threshold=8) as db:
        for i in range(N):
            db.remember(f"other {i}", timestamp=1)
        db.search("other", limit=1)
    shutil.copy(str(other) + ".usearch", str(path) + ".usearch")
    got = _open_in_child(path)
    assert got["index_size"] == N and got["hnsw"] == got["exact"]


def test_an_older_index_file_is_reused_with_the_documents_written_since(original, tmp_path):
    path = _copy(original, tmp_path)
    stale_side = Path(str(path) + ".usearch.json").read_text()
    with Vectrix(path, embedder=_embedder()) as db:  # default threshold: never touches the index
        db.remember("a newcomer about quokkas", session="s0", timestamp=9999)
    assert Path(str(path) + ".usearch.json").read_text() == stale_side
    with Vectrix(path, embedder=_embedder(), exact_threshold=8) as db:
        assert db.search("newcomer quokkas", limit=1)[0].text == "a newcomer about quokkas"
        assert db.engine.index.rebuilds == 0 and len(db.engine.index) == N and len(db.engine.index.pending) == 1
        with db.engine.locked():
            db.engine.index.flush()
        assert len(db.engine.index) == N + 1 and not db.engine.index.pending


def test_an_index_file_that_cannot_be_saved_does_not_make_close_fail(original, tmp_path):
    path = _copy(original, tmp_path)
    idx = str(path) + ".usearch"
    os.remove(idx)
    os.mkdir(idx)  # os.replace() onto a directory fails
    db = Vectrix(path, embedder=_embedder(), exact_threshold=8)
    db.remember("one more", timestamp=5)
    db.search("one more", limit=1)
    db.close()
    with Vectrix(path, embedder=_embedder()) as again:
        assert again.count() == N + 1
