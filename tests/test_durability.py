"""durability=: what an acknowledged write survives, as SQLite is told it (NORMAL or FULL sync in WAL mode)."""

import pytest

from vxmem import Vectrix

from helpers import T0


def _synchronous(db) -> int:
    return db.engine.database.conn.execute("PRAGMA synchronous").fetchone()[0]


def test_the_default_survives_a_process_crash_in_wal_mode(tmp_path):
    with Vectrix(tmp_path / "a.vxdb", embedder="hashing") as db:
        assert db.durability == "normal"
        assert db.engine.database.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert _synchronous(db) == 1  # NORMAL


def test_full_durability_syncs_every_commit_and_reads_back(tmp_path):
    path = tmp_path / "full.vxdb"
    with Vectrix(path, embedder="hashing", durability="full") as db:
        assert _synchronous(db) == 2  # FULL
        mid = db.remember("keep me through a power cut", session="s", timestamp=T0)
        db.build_index()
    with Vectrix(path, embedder="hashing") as again:
        assert again.get(mid).text == "keep me through a power cut"
        assert _synchronous(again) == 1  # each handle chooses its own


@pytest.mark.parametrize("bad, error", [("fsync", ValueError), (True, TypeError)])
def test_an_unknown_durability_is_refused_before_any_file_is_made(tmp_path, bad, error):
    path = tmp_path / "never.vxdb"
    with pytest.raises(error, match="durability"):
        Vectrix(path, embedder="hashing", durability=bad)
    assert not path.exists()
