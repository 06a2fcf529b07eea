"""A full disk: a clear error naming the disk, nothing of the failed write stored, every acknowledged write
readable, and the next write working once space is freed (on a small tmpfs filled on purpose)."""

import os
import subprocess

import pytest

from vxmem import DiskFullError, Vectrix

from helpers import T0

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs mounted for the test (root only: CI runs as root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({got.stderr.strip() or 'not root'})")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk, leave: int = 64 * 1024) -> str:
    """Take all of the disk's free space but ``leave`` bytes; returns the filler's path."""
    filler = os.path.join(disk, "filler")
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * max(free - leave, 0))
    return filler


def _remember_until_full(db, acked):
    with pytest.raises(DiskFullError) as raised:
        for i in range(100_000):
            acked.append(db.remember(f"memory {i}: " + "words to fill the pages " * 12, session="s",
                                     timestamp=T0 + i))
    return raised.value


def test_remember_on_a_full_disk_names_it_keeps_every_acknowledged_write_and_recovers(small_disk):
    path = small_disk / "db.vxdb"
    filler = _fill(small_disk, leave=512 * 1024)
    acked: list[str] = []
    with Vectrix(path, embedder="hashing") as db:
        err = _remember_until_full(db, acked)
        assert str(small_disk) in str(err) and "full" in str(err)
        assert len(db) == len(acked) > 0
        os.remove(filler)
        more = db.remember("written once space is back", session="s", timestamp=T0 + 10**6)
        acked.append(more)
    with Vectrix(path, embedder="hashing", read_only=True) as again:
        assert len(again) == len(acked) and all(i in again for i in acked)


def test_a_large_add_on_a_full_disk_stores_nothing_of_the_batch(small_disk):
    path = small_disk / "db.vxdb"
    with Vectrix(path, embedder="hashing") as db:
        first = db.add(["a document that fits"])
        filler = _fill(small_disk, leave=16 * 1024)
        with pytest.raises(DiskFullError):
            db.add([f"document {i}: " + "more words " * 40 for i in range(400)])
        assert len(db) == 1 and first[0] in db
        os.remove(filler)
        assert len(db.add([f"document {i}" for i in range(400)])) == 400
    with Vectrix(path, embedder="hashing", read_only=True) as again:
        assert len(again) == 401


def test_consolidate_on_a_full_disk_keeps_the_turns(small_disk):
    path = small_disk / "db.vxdb"
    with Vectrix(path, embedder="hashing") as db:
        turns = [db.remember(f"turn {i} about the garden", session="s", timestamp=T0 + i) for i in range(30)]
        filler = _fill(small_disk, leave=4 * 1024)

        def summarize(batch):
            return ["a long fact " * 200 + str(i) for i in range(len(batch))]

        with pytest.raises(DiskFullError):
            db.consolidate("s", summarize, keep_recent=2, now=T0 + 100)
        assert all(t in db for t in turns)
        os.remove(filler)
        report = db.consolidate("s", summarize, keep_recent=2, now=T0 + 100)
        assert report.facts and sum(t in db for t in turns) == 2


def test_closing_on_a_full_disk_raises_nothing_and_the_next_open_rebuilds_the_caches(small_disk):
    path = small_disk / "db.vxdb"
    db = Vectrix(path, embedder="hashing", exact_threshold=1)
    ids = db.add([f"doc {i} about tea" for i in range(200)])
    db.build_index()
    _fill(small_disk, leave=0)
    db.close()  # the index cannot be saved: a cache, rebuilt later
    with Vectrix(path, embedder="hashing", exact_threshold=1, read_only=True) as again:
        assert len(again) == 200 and again.search("doc 7 about tea", limit=1).ids[0] == ids[7]
