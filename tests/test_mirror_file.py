"""The files a writer's close saves beside the database (the mirror, the lexical postings)
so the next open reads no rows: what an open from them holds must be exactly what reading
every row holds, and a file that is not provably this database's, at a state the change
log reaches from, must never be used."""

import json
import math
import os
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxmem import Vectrix
from vxmem.store.mirror import file as mirror_file
from vxmem.store.mirror import loading, snapshot
from vxmem.store.seam import UserSession
from vxmem.store.sqlite import database, opening
from vxmem.store.sqlite.database import Database
from vxmem.store.sqlite.files import spread_sample
from vxmem.store.vector.vectors import rowdot

from helpers import DAY, T0, WordHashEmbedder, run_python

MODES = ("dense", "lexical", "hybrid")
WORDS = "cat dog tea coffee paris rome blue green piano violin garden river".split()
_COLUMNS = ("rowid", "kind", "ts", "expires", "superseded", "superseded_at", "tokens", "turn", "feedback")


@pytest.fixture(autouse=True)
def _small_collections_keep_files(monkeypatch):
    """Files for every collection, saved again at every close that follows a write."""
    monkeypatch.setattr(mirror_file, "MIN_DOCUMENTS", 1)
    monkeypatch.setattr(loading, "RESAVE_GENERATIONS", 0)
    monkeypatch.setattr(loading, "RESAVE_ROWS", 0)


def _open(path, **kw):
    return Vectrix(path, embedder=WordHashEmbedder(), **kw)


def _fill(db, n, start=0):
    rng = np.random.default_rng(start)
    ids = []
    for i in range(start, start + n):
        text = " ".join(rng.choice(WORDS, size=4))
        ids.append(db.remember(f"{text} {i}", session=f"s{i % 3}", timestamp=T0 + i * 60, user=f"u{i % 2}",
                               metadata={"topic": WORDS[i % 5], "n": i}, kind="fact" if i % 4 == 0 else None))
    return ids


def _session(path, n, start=0):
    """A writer's session: ``n`` memories from ``start``, one lexical recall (which reads the
    postings, so the close saves them too), then close. Its ids, and its recalls before the close."""
    db = _open(path)
    ids = _fill(db, n, start=start)
    db.recall("cat", mode="lexical", now=T0 + DAY)
    want = _recalls(db)
    db.close()
    return ids, want


def _state(m):
    """Everything a mirror holds of its live documents, in position order (comparable)."""
    sessions = {code: key for key, code in m.session_codes.items()}
    users = {code: key for key, code in m.user_codes.items()}
    live = m.live_positions().tolist()
    rows = []
    for p in live:
        assert m.feedback[p] == bool(m.metas[p].get("_vx_feedback"))  # the column says what the metadata does
        assert m.session_value(int(m.session[p])) == m.metas[p].get("_vx_session")
        cols = tuple(float(getattr(m, c)[p]) for c in _COLUMNS)
        rows.append((m.ids[p], m.texts[p], m.metas[p], m.vector(p).tobytes(), sessions.get(int(m.session[p])),
                     users.get(int(m.user[p])), tuple("nan" if math.isnan(c) else c for c in cols)))
    blocks = {sessions[c]: sorted(m.ids[p] for p in m.session_positions(c).tolist()) for c in sessions}
    blocks = {k: v for k, v in blocks.items() if v}  # a session whose memories all went keeps its code
    return rows, blocks, m.n_alive


def _full_state(path):
    """The state of a read-only handle that reads every row (no files)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Database, "_saved_mirror", lambda self, *a: None)
        db = _open(path, read_only=True)
        try:
            with db.engine.locked() as m:
                return _state(m), m.latest
        finally:
            db.close()


def _recalls(db, queries=("cat tea", "paris piano river", "green")):
    out = []
    for q in queries:
        for mode in MODES:
            for session in ("s0", "s1", None):
                got = db.recall(q, session=session, mode=mode, now=T0 + 30 * DAY, limit=5)
                out.append((q, mode, session, got.ids, [round(r.score, 12) for r in got]))
            got = db.recall(q, filter={"topic": "tea"}, mode=mode, now=T0 + 30 * DAY, limit=5, user="u1")
            out.append((q, mode, "filtered", got.ids, [round(r.score, 12) for r in got]))
    return out


def _used_file(db):
    return db.engine.database.saved_at is not None


def test_a_writers_close_saves_the_files_and_the_next_open_reads_no_rows(tmp_path):
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    _fill(db, 40)
    db.recall("cat", mode="hybrid", now=T0 + DAY)  # reads the postings, so the close saves them
    want = _recalls(db)
    db.close()
    assert os.path.exists(path + ".mirror") and os.path.exists(path + ".lexical")
    full, _ = _full_state(path)
    for read_only in (True, False):
        db = _open(path, read_only=read_only)
        assert _used_file(db)
        last = int(max(r for r in db.engine.database.conn.execute("SELECT rowid FROM vx_docs").fetchall())[0])
        # The open took the postings from the file (not FTS5), before any search asked.
        assert db.engine.lexical.index is not None and db.engine.lexical.index.saved_upto == last
        with db.engine.locked() as m:
            assert _state(m) == full
        assert _recalls(db) == want
        assert db.engine.lexical.index.saved_upto == last
        db.close()


def test_writes_after_the_save_are_taken_from_the_change_log(tmp_path):
    path = str(tmp_path / "db.vxdb")
    ids, _ = _session(path, 30)
    db = _open(path)  # from the files; then writes of every kind, and no close (a killed writer)
    assert _used_file(db)
    _fill(db, 10, start=30)
    db.feedback(ids[3], "useful", timestamp=T0 + 2 * DAY)
    db.forget(ids=ids[5:9])
    db.memory.remember("cat tea paris new", session="s9", timestamp=T0 + 3 * DAY)
    want = _recalls(db)
    reader = _open(path, read_only=True)
    assert _used_file(reader)
    with reader.engine.locked() as m:
        assert _state(m) == _full_state(path)[0]
    assert _recalls(reader) == want
    reader.close()
    db.close()


def test_the_saved_latest_bounds_the_times_from_above(tmp_path):
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    ids = _fill(db, 12)
    db.forget(ids=ids[-3:])  # the latest memories go: the saved bound stays where it was
    db.close()
    db = _open(path, read_only=True)
    _, exact = _full_state(path)
    with db.engine.locked() as m:
        assert m.latest >= exact
    db.close()


def _damage(name):
    """Flip one byte in the middle of the file's arrays."""
    with open(name, "r+b") as f:
        f.seek(len(snapshot.MAGIC))
        length = int.from_bytes(f.read(8), "little")
        body = json.loads(f.read(length))["size"]
        start = -(-(len(snapshot.MAGIC) + 8 + length) // 4096) * 4096
        f.seek(start + body // 2)
        byte = f.read(1)
        f.seek(start + body // 2)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("how", ["flipped byte", "cut short", "another database's", "not a snapshot"])
def test_a_file_that_is_not_provably_this_databases_is_never_used(tmp_path, how):
    path, other = str(tmp_path / "db.vxdb"), str(tmp_path / "other.vxdb")
    _, want = _session(path, 20)
    for name in (path + ".mirror", path + ".lexical"):
        if how == "flipped byte":
            _damage(name)
        elif how == "cut short":
            with open(name, "r+b") as f:
                f.truncate(os.path.getsize(name) // 2)
        elif how == "not a snapshot":
            with open(name, "wb") as f:
                f.write(b"hello")
    if how == "another database's":
        o = _open(other)
        _fill(o, 20)  # the same texts and times: only the uid tells them apart
        o.recall("cat", mode="lexical", now=T0 + DAY)
        o.close()
        for ext in (".mirror", ".lexical"):
            shutil.copy(other + ext, path + ext)
    db = _open(path, read_only=True)
    assert not _used_file(db)
    assert _recalls(db) == want
    assert db.engine.lexical.index.saved_upto == -1  # read from FTS5
    db.close()


def test_a_file_older_than_the_change_log_reaches_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(opening, "CHANGE_WINDOW", 3)
    monkeypatch.setattr(database, "PRUNE_EVERY", 1)
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    ids = _fill(db, 10)
    db.close()
    db = _open(path)
    for i in range(8):
        db.feedback(ids[i], "useful", timestamp=T0 + DAY + i)
    want = _recalls(db)
    reader = _open(path, read_only=True)
    assert not _used_file(reader)
    assert _recalls(reader) == want
    reader.close()
    db.close()


def test_postings_that_disagree_with_fts5_are_not_used(tmp_path):
    """A lexical file of this database (uid, CRC and all) whose postings were not FTS5's."""
    path = str(tmp_path / "db.vxdb")
    _, want = _session(path, 20)
    got = snapshot.read(path + ".lexical")
    assert got is not None
    fields, arrays = got
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["tf"] = arrays["tf"] + 1.0  # every term frequency one too high
    snapshot.write(path + ".lexical", fields, arrays)
    db = _open(path, read_only=True)
    assert _used_file(db)  # the mirror file is good
    assert not db.engine.lexical.index.ready  # the open read nothing (no FTS5 either): the first search does
    assert _recalls(db) == want
    assert db.engine.lexical.index.saved_upto == -1
    db.close()


def test_another_token_counter_reads_the_rows(tmp_path):
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    _fill(db, 10)
    db.close()

    def words(text):
        return len(text.split())

    db = Vectrix(path, embedder=WordHashEmbedder(), token_counter=words, read_only=True)
    assert not _used_file(db)
    with db.engine.locked() as m:
        assert m.tokens[: m.n].tolist() == [words(t) for t in m.texts]
    db.close()


def test_small_collections_keep_no_files(tmp_path, monkeypatch):
    path = str(tmp_path / "db.vxdb")
    ids, _ = _session(path, 10)
    assert os.path.exists(path + ".mirror") and os.path.exists(path + ".lexical")
    monkeypatch.setattr(mirror_file, "MIN_DOCUMENTS", 8)
    db = _open(path)
    db.forget(ids=ids[:5])
    db.close()
    assert not os.path.exists(path + ".mirror") and not os.path.exists(path + ".lexical")


def test_a_save_that_fails_never_fails_close(tmp_path, monkeypatch):
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    _fill(db, 10)
    db.recall("cat", mode="lexical", now=T0 + DAY)

    def full_disk(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mirror_file, "write", full_disk)
    monkeypatch.setattr(snapshot, "write", full_disk)
    db.close()
    assert not os.path.exists(path + ".mirror") and not os.path.exists(path + ".lexical")
    db = _open(path, read_only=True)
    assert not _used_file(db) and len(db) == 10
    db.close()


def test_an_interrupted_save_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    _fill(db, 10)
    db.close()
    before = open(path + ".mirror", "rb").read()
    db = _open(path)
    _fill(db, 5, start=10)

    def killed(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        db.close()
    monkeypatch.undo()
    assert open(path + ".mirror", "rb").read() == before
    assert not os.path.exists(path + ".mirror.tmp")
    reader = _open(path, read_only=True)
    assert _used_file(reader) and len(reader) == 15  # the old file, and the log since it
    reader.close()


_OPS = st.lists(st.tuples(st.sampled_from(["remember", "feedback", "forget", "save", "recall"]),
                          st.integers(0, 40)), min_size=1, max_size=25)


@settings(max_examples=25, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(_OPS)
def test_any_history_opens_from_the_files_to_the_state_of_every_row(tmp_path, ops):
    """Random writes, closes (saves) and reopens, then a read-only open: the same documents,
    columns and recalls as reading every row."""
    path = str(tmp_path / f"db{abs(hash(tuple(ops)))}.vxdb")
    db = _open(path)
    ids = _fill(db, 6)
    t = T0 + DAY
    for op, k in ops:
        t += 60
        if op == "remember":
            ids.append(db.remember(f"{WORDS[k % len(WORDS)]} {WORDS[(k * 7) % len(WORDS)]} {k}",
                                   session=f"s{k % 3}", timestamp=t))
        elif op == "feedback" and ids:
            db.feedback(ids[k % len(ids)], "useful" if k % 2 else "dead_end", timestamp=t)
        elif op == "forget" and ids:
            db.forget(ids=[ids.pop(k % len(ids))])
        elif op == "save":
            db.close()
            db = _open(path)
        elif op == "recall":
            db.recall(WORDS[k % len(WORDS)], mode="lexical", now=t)
    try:
        want = _recalls(db, queries=("cat tea", "river"))
        reader = _open(path, read_only=True)
        try:
            with reader.engine.locked() as m:
                got = _state(m)
            full = _full_state(path)[0]
            assert got[1:] == full[1:]
            for a, b in zip(got[0], full[0]):
                assert a == b
            assert got == full
            assert _recalls(reader, queries=("cat tea", "river")) == want
        finally:
            reader.close()
    finally:
        db.close()
    for ext in ("", ".mirror", ".lexical", "-wal", "-shm", ".usearch", ".usearch.json"):
        if os.path.exists(path + ext):
            os.remove(path + ext)


def test_the_snapshot_format_round_trips_and_refuses_damage(tmp_path):
    name = str(tmp_path / "x.snap")
    arrays = {"a": np.arange(5, dtype=np.int64), "empty": np.zeros(0, dtype=np.float32),
              "m": np.arange(12, dtype=np.float32).reshape(4, 3)}
    snapshot.write(name, {"k": "v"}, arrays, headroom=4)
    fields, got = snapshot.read(name)
    assert fields == {"k": "v"}
    assert got["a"].tolist() == [0, 1, 2, 3, 4] and got["empty"].size == 0
    assert got["m"].shape == (8, 3) and got["m"][:4].tolist() == arrays["m"].tolist() and not got["m"][4:].any()
    got["m"][5] = 7.0  # a private map: writes never reach the file
    assert snapshot.read(name)[1]["m"][5].tolist() == [0.0, 0.0, 0.0]
    _damage(name)
    assert snapshot.read(name) is None
    assert snapshot.read(str(tmp_path / "missing")) is None


def test_rows_gathered_as_they_are_written_read_back_in_their_order(tmp_path, monkeypatch):
    """``snapshot.Rows`` writes another order of an array's rows a chunk at a time (no copy
    of the whole): the file holds exactly the gathered array, and its CRC covers it."""
    monkeypatch.setattr(snapshot.Rows, "CHUNK", 3)
    name = str(tmp_path / "rows.snap")
    source = np.arange(40, dtype=np.float32).reshape(10, 4)
    order = np.array([7, 2, 9, 0, 1, 8, 3, 6, 5, 4])
    snapshot.write(name, {}, {"a": np.arange(3), "r": snapshot.Rows(source, order)}, headroom=2)
    _, got = snapshot.read(name)
    assert got["r"].shape == (12, 4) and np.array_equal(got["r"][:10], source[order]) and not got["r"][10:].any()
    _damage(name)
    assert snapshot.read(name) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")
def test_a_read_snapshot_holds_its_own_copy_not_a_map_of_the_file(tmp_path):
    """Another process may truncate the file or copy another over it in place: what was read
    (after its check) stays as it was, and no map of the file is left to fault on."""
    name = os.path.realpath(tmp_path / "big.snap")  # as /proc names a mapping
    snapshot.write(name, {}, {"v": np.ones((512, 1024), dtype=np.float32)}, headroom=256)
    fields, got = snapshot.read(name)
    with open("/proc/self/maps") as f:
        assert name not in f.read()
    os.truncate(name, 4096)
    assert got["v"].shape == (768, 1024)
    assert float(got["v"][:512].sum()) == 512 * 1024 and not got["v"][512:].any()


def _dense(db, q, session, user, now):
    got = db.recall(q, session=session, user=user, mode="dense", now=now, limit=10)
    return got.ids, [round(r.score, 12) for r in got]


def test_an_open_from_the_file_scans_each_sessions_rows_in_place(tmp_path):
    """The file keeps each session's vectors together: after an open a session's block is a
    view of the file's pages (nothing gathered at its first recall), rows written since join
    it, a removal splits it, and every recall scores as before the close."""
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    ids = _fill(db, 900)  # sessions s0, s1, s2 of users u0 and u1, interleaved: 150 rows each
    now = T0 + 30 * DAY
    queries = [("cat tea river", "s0", "u0"), ("paris piano", "s1", "u0"), ("green garden", "s2", "u1")]
    want = [_dense(db, *q, now) for q in queries]
    db.close()
    db = _open(path)
    sessions = [UserSession(u, s) for u in ("u0", "u1") for s in ("s0", "s1", "s2")]
    try:
        assert _used_file(db)
        assert [_dense(db, *q, now) for q in queries] == want
        with db.engine.locked() as m:
            for session in sessions:
                rows = m.slot[m.session_positions(m.session_code(session))]
                assert np.array_equal(rows, np.arange(rows[0], rows[0] + 150))  # together in the heap
                blk = m.session_block(m.session_code(session))
                assert blk.views == 1
        new = db.remember("cat tea river again", session="s0", user="u0", timestamp=now)
        db.forget(ids=[ids[454]])  # the middle of u0's s1 (rows 4, 10, 16, ...)
        with db.engine.locked() as m:
            q = m.vector(m.pos_of_id[new])
            for session in sessions:
                blk = m.session_block(m.session_code(session))
                assert blk.views == (2 if session == ("u0", "s1") else 1)
                assert np.array_equal(blk.dots(q), rowdot(m.vectors(blk.positions), q))
        assert _dense(db, "cat tea river again", "s0", "u0", now)[0][0] == new
        assert ids[454] not in _dense(db, "paris piano", "s1", "u0", now)[0]
        db.close()
        db = _open(path)  # saved again: the new row lies with its session
        with db.engine.locked() as m:
            first = m.session_block(m.session_code(UserSession("u0", "s0")))
            assert first.views == 1 and first.n == 151
        assert _state(db.engine.mirror) == _full_state(path)[0]
    finally:
        db.close()


def test_an_open_whose_first_position_is_a_hole_checks_the_embedder_on_a_live_one(tmp_path):
    """The file, then the oldest memory forgotten: the open's first position is a hole (the
    embedder check compared an emptied text with its old vector and refused the file)."""
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    ids = _fill(db, 10)
    db.close()
    db = _open(path)
    db.forget(ids=ids[:1])
    reader = _open(path, read_only=True)
    assert _used_file(reader) and len(reader) == 9
    with reader.engine.locked() as m:
        assert not m.alive[0]
    with pytest.raises(ValueError, match="another embedder"):
        Vectrix(path, embedder=lambda texts: -WordHashEmbedder()(texts), read_only=True)  # still checked
    reader.close()
    db.close()


def test_a_handle_whose_counter_was_swapped_saves_no_mirror_of_mixed_counts(tmp_path):
    from vxmem.core.tokens import count_tokens

    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    _fill(db, 5)
    db.close()
    db = _open(path)
    db.token_counter = lambda text: 99
    db.remember("counted by a lambda", session="s0", timestamp=T0 + DAY)
    db.token_counter = count_tokens
    db.remember("counted by the default again", session="s0", timestamp=T0 + DAY + 1)
    db.close()  # its mirror holds a count of the lambda's: the older file stays
    reader = _open(path, read_only=True)
    assert _used_file(reader)
    with reader.engine.locked() as m:
        assert m.tokens[: m.n].tolist() == [count_tokens(t) for t in m.texts]
    reader.close()


def test_a_close_after_a_few_writes_leaves_the_files_to_the_change_log(tmp_path, monkeypatch):
    """Saving 100k memories again for each handful of writes would make every close pay for
    the whole file: fewer changes than RESAVE_ROWS (and RESAVE_GENERATIONS) are left for the
    next open to take from the log, and only more of them save again."""
    monkeypatch.setattr(loading, "RESAVE_GENERATIONS", 1_000)
    monkeypatch.setattr(loading, "RESAVE_ROWS", 8)
    path = str(tmp_path / "db.vxdb")
    _session(path, 20)
    saved = {ext: open(path + ext, "rb").read() for ext in (".mirror", ".lexical")}
    _, want = _session(path, 3, start=20)  # 3 changed rows: left to the log
    assert {ext: open(path + ext, "rb").read() for ext in saved} == saved
    db = _open(path, read_only=True)
    assert db.engine.database.saved_at is not None and len(db) == 23
    with db.engine.locked() as m:
        assert _state(m) == _full_state(path)[0]
    assert _recalls(db) == want
    db.close()
    _session(path, 10, start=23)  # 13 since the file: saved again
    assert all(open(path + ext, "rb").read() != saved[ext] for ext in saved)
    db = _open(path, read_only=True)
    assert db.engine.database.saved_at == db.engine.database.generation  # the file holds this very state
    db.close()


def test_metadata_only_json_reads_exactly_comes_back_exact(tmp_path):
    """orjson reads an integer of 19+ digits as a float: the file marks those texts."""
    path = str(tmp_path / "db.vxdb")
    db = _open(path)
    _fill(db, 5)
    big = db.remember("a big number", session="s0", timestamp=T0, metadata={"n": 2**70 + 1, "m": -(10**19)})
    db.close()
    db = _open(path, read_only=True)
    assert _used_file(db)
    got = db.get(big).metadata
    assert got["n"] == 2**70 + 1 and type(got["n"]) is int and got["m"] == -(10**19)
    db.close()


def _colors(path):
    with _open(path, read_only=True) as db:
        return sorted((r.metadata["n"], r.metadata.get("color")) for r in db.scan() if "color" in r.metadata)


def test_caches_of_a_history_the_database_left_are_never_trusted_when_the_generations_meet(tmp_path):
    """A backup copied back over the database leaves the files a later history saved: a
    writer that then commits as many times brings the generation level with theirs, and the
    rows the files' sample does not read would come from the other history."""
    path, backup = str(tmp_path / "db.vxdb"), str(tmp_path / "backup.vxdb")
    with _open(path) as db:
        db.add([f"document number {i}" for i in range(400)], metadata=[{"n": i} for i in range(400)])
    shutil.copy(path, backup)
    unread = [i for i in range(400) if i not in set(spread_sample(400, mirror_file.VERIFY_SAMPLE, 8).tolist())]
    with _open(path) as db:  # the history the backup undoes: saved in the files at its close
        ids = {r.metadata["n"]: r.id for r in db.scan()}
        for n in unread[:30]:
            db.update_metadata(ids[n], {"color": "red"})
    for side in ("-wal", "-shm"):
        assert not os.path.exists(path + side)
    shutil.copy(backup, path)  # the backup restored; the files of the undone history stay
    out = run_python(f"""
        import os
        from helpers import WordHashEmbedder
        from vxmem import Vectrix
        db = Vectrix({path!r}, embedder=WordHashEmbedder())
        ids = {{r.metadata["n"]: r.id for r in db.scan()}}
        for n in {unread[30:60]!r}:
            db.update_metadata(ids[n], {{"color": "blue"}})  # acknowledged ...
        os._exit(0)  # ... and the writer killed before its close
    """)
    assert out.returncode == 0, out.stderr
    want = [(n, "blue") for n in unread[30:60]]
    assert _colors(path) == want
    with _open(path) as db:  # a writer's open too, and what it then writes back
        mid = next(r.id for r in db.scan() if r.metadata["n"] == unread[0])
        assert db.update_metadata(mid, {"x": 1}) == {"n": unread[0], "x": 1}
    assert _colors(path) == want
