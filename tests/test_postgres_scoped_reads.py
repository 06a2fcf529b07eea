"""PostgreSQL scope=user: a call for one user's (or one session's) memories reads only that scope's rows.

Many users in one database; PostgreSQL's own counter of the ``vx_docs`` rows the handle's
connection read (``pg_stat_user_tables``, flushed with ``pg_stat_force_next_flush()``) says
how many rows each call touched, and the file store is the oracle of every answer.
"""

import numpy as np
import psycopg
import pytest

from vxmem import Vectrix
from vxmem.core.keys import K_SESSION, K_USER
from vxmem.store.postgres import schema

from helpers import DAY, T0

HOUR = 3600.0
USERS = [f"u{i}" for i in range(30)]
PER_USER = 24  # 720 memories, 3 sessions per user
WORDS = "tea coffee paris lyon dark light mode cat dog train bike rain snow".split()


def scoped(url):
    return f"{url}{'&' if '?' in url else '?'}scope=user"


def _items():
    rng = np.random.default_rng(3)
    out = []
    for u, user in enumerate(USERS):
        for j in range(PER_USER):
            out.append({"text": " ".join(rng.choice(WORDS, 4)) + f" {user} n{j}", "user": user,
                        "session": f"{user}-s{j % 3}", "id": f"{user}.{j}", "timestamp": T0 + (u * PER_USER + j) * 60.0,
                        "kind": "pinned" if j == 5 else "fact" if j % 4 == 0 else None})
    # a session name two users both use: two sessions, u0's and u1's
    out += [{"text": f"lobby talk {i} about tea", "user": USERS[i % 2], "session": "lobby", "id": f"lobby.{i}",
             "timestamp": T0 + DAY * 20 + i} for i in range(6)]
    # a session of no user
    out += [{"text": f"open talk {i} about cats", "session": "open", "id": f"open.{i}",
             "timestamp": T0 + DAY * 20 + 10 + i} for i in range(6)]
    return out


def _counter(conn):
    row = conn.execute("SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables "
                       "WHERE relname = 'vx_docs'").fetchone()
    return int(row[0])


def rows_read(pg, stats, call):
    """``call()``'s answer, and the ``vx_docs`` rows the handle's connection read making it."""
    own = pg.engine.database.conn
    own.execute("SELECT pg_stat_force_next_flush()")  # its earlier reads counted before the call
    before = _counter(stats)
    got = call()
    pg.engine.database.conn.execute("SELECT pg_stat_force_next_flush()")
    return got, _counter(stats) - before


@pytest.fixture
def stores(pg_url, tmp_path, word_embedder):
    items = _items()
    with Vectrix(pg_url, embedder=word_embedder) as writer:
        writer.remember_many(items)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the planner's statistics, as autovacuum keeps them
        conn.execute("ANALYZE vx_docs")
    with Vectrix(tmp_path / "f.db", embedder=word_embedder) as oracle, \
            Vectrix(scoped(pg_url), embedder=word_embedder) as pg, \
            psycopg.connect(pg_url, autocommit=True) as stats:
        oracle.remember_many(items)
        yield oracle, pg, stats, len(items)


def _block(b):
    return ([r.id for r in b.pinned], [r.id for r in b.recent], [r.id for r in b.recalled],
            [r.score for r in b.recalled], b.tokens_used)


CALLS = {
    "count of a user": lambda db: db.count({K_USER: "u7"}),
    "scan of a user": lambda db: [r.id for r in db.scan({K_USER: "u7", K_SESSION: "u7-s1"})],
    "search in a user's": lambda db: db.search("tea dog", filter={K_USER: "u8"}, mode="hybrid").ids,
    "recall of a user in the past": lambda db: [(r.id, round(r.score, 5)) for r in db.recall(
        "tea dog lyon", user="u6", mode="hybrid", now=T0 + DAY * 19)],  # the BM25 statistics of then
    "context of a user's session": lambda db: _block(db.context("tea dog", session="u3-s0", user="u3",
                                                                now=T0 + DAY * 30)),
    "context of a user": lambda db: _block(db.context("rain bike", user="u4", now=T0 + DAY * 30)),
    "context of a session": lambda db: _block(db.context("cat mode", session="open", now=T0 + DAY * 30)),
    "context of a session name two users use": lambda db: _block(db.context("lobby tea", session="lobby", user="u0",
                                                                            now=T0 + DAY * 30)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_scoped_call_reads_its_scopes_rows_only_and_answers_as_the_file_store(stores, name):
    oracle, pg, stats, total = stores
    want = CALLS[name](oracle)
    got, read = rows_read(pg, stats, lambda: CALLS[name](pg))
    assert got[:-2] == want[:-2] if name.startswith("context") else got == want
    if name.startswith("context"):
        assert np.allclose(got[-2], want[-2], rtol=0, atol=1e-6) and got[-1] == want[-1]
    assert 0 < read <= 2 * PER_USER + 12, f"{name} read {read} of {total} rows"
    assert None not in pg.engine.scopes.states  # the whole collection was never read


def test_the_scoped_reads_are_the_scopes_not_every_row(stores):
    """The counter can fail: a call naming no user reads every row."""
    _, pg, stats, total = stores
    n, read = rows_read(pg, stats, lambda: len(pg))
    assert n == total and read >= total


def test_a_users_session_is_read_with_the_users_rows_and_followed(stores, word_embedder):
    oracle, pg, stats, _ = stores
    ask = CALLS["context of a session name two users use"]
    assert ask(pg)[:3] == ask(oracle)[:3]
    assert [r.text for r in pg.turns("lobby", user="u0", now=T0 + DAY * 30)] == [
        "lobby talk 0 about tea", "lobby talk 2 about tea", "lobby talk 4 about tea"]
    # context() read u0's rows; turns() u0's lobby alone, a session whose key holds its user
    assert set(pg.engine.scopes.states) == {"u0", ("session", '["u0", "lobby"]')}
    for db in (oracle, pg):  # u1's turn in u1's lobby, then u0's in u0's: the kept mirror follows u0's alone
        db.remember("lobby news about tea and snow", user="u1", session="lobby", id="news1", timestamp=T0 + DAY * 21)
        db.remember("lobby news about tea and rain", user="u0", session="lobby", id="news0", timestamp=T0 + DAY * 21)
    assert ask(pg)[:3] == ask(oracle)[:3]
    assert "news0" in ask(pg)[1] and "news1" not in ask(pg)[1] + ask(pg)[2]


def test_writes_and_lookups_by_id_read_the_memorys_user(stores):
    oracle, pg, stats, _ = stores
    target = next(r.id for r in oracle.scan({K_USER: "u11"}))
    for db in (oracle, pg):
        db.update_metadata(target, {"note": "checked"})
    got, read = rows_read(pg, stats, lambda: (target in pg, pg.get(target).metadata["note"]))
    assert got == (True, "checked") and read <= PER_USER + 2
    ids, read = rows_read(pg, stats, lambda: pg.remember_many(
        ["u12 likes snow", "u12 rides a bike"], user="u12", session="u12-s0", timestamp=T0 + DAY * 25))
    assert read <= PER_USER + 4
    assert [r.id for r in pg.scan({K_USER: "u12"})][-2:] == ids
    gone, read = rows_read(pg, stats, lambda: pg.delete("u13.4"))
    assert gone == 1 and read <= PER_USER + 2 and "u13.4" not in pg
    assert set(pg.engine.scopes.states) == {"u11", "u12", "u13"}
    missing, read = rows_read(pg, stats, lambda: ("nobody.1" in pg, pg.get("u13.5").id))
    assert missing == (False, "u13.5") and read <= 2  # an id that names nothing reads no rows
    with pytest.raises(KeyError):
        pg.feedback("nobody.1", "useful")
    assert None not in pg.engine.scopes.states


def test_remember_many_of_several_users_reads_theirs_alone(stores):
    oracle, pg, stats, _ = stores
    items = [{"text": f"{u} walks a dog in the snow", "user": u, "session": f"{u}-s2", "id": f"{u}.new"}
             for u in ("u20", "u21", "u22")]
    want = oracle.remember_many(items, timestamp=T0 + DAY * 26)
    # Three users are a tenth of this small table, which the planner would rather scan whole; the
    # index is what it can use (and picks for a few users of many).
    pg.engine.database.conn.execute("SET enable_seqscan = off")
    got, read = rows_read(pg, stats, lambda: pg.remember_many(items, timestamp=T0 + DAY * 26))
    assert got == want
    assert read <= 2 * 3 * PER_USER + 3  # their rows, read for the check before embedding and for the write
    assert set(pg.engine.scopes.states) == set()  # read for the write alone, kept by no one
    for u in ("u20", "u21", "u22"):
        assert [r.metadata for r in pg.scan({K_USER: u})] == [r.metadata for r in oracle.scan({K_USER: u})]


def test_forgetting_a_session_reads_that_sessions_rows(stores):
    oracle, pg, stats, _ = stores
    want = oracle.forget(session="u14-s1", user="u14", kinds=("turn", "fact"), now=T0 + DAY * 30)
    got, read = rows_read(pg, stats, lambda: pg.forget(session="u14-s1", user="u14", kinds=("turn", "fact"),
                                                       now=T0 + DAY * 30))
    assert got == want > 0 and read <= PER_USER
    assert [r.id for r in pg.scan({K_USER: "u14"})] == [r.id for r in oracle.scan({K_USER: "u14"})]


def test_following_other_users_writes_fetches_none_of_their_rows(stores, pg_url, word_embedder):
    _, pg, stats, _ = stores
    assert pg.count({K_USER: "u7"}) == PER_USER  # u7's rows kept, then followed
    with Vectrix(scoped(pg_url), embedder=word_embedder) as other:  # another process, writing for u26 and u7
        other.remember_many([f"u26 note {i} about rain" for i in range(20)], user="u26", session="u26-s0",
                            timestamp=T0 + DAY * 27)
        other.remember("u7 now likes snow", user="u7", session="u7-s0", timestamp=T0 + DAY * 27)
        other.engine.database.conn.execute("SELECT pg_stat_force_next_flush()")  # its reads counted now
    n, read = rows_read(pg, stats, lambda: pg.count({K_USER: "u7"}))
    assert n == PER_USER + 1
    assert read == 1  # u7's new row; none of u26's 20


def test_a_schema_2_change_log_is_migrated_and_its_rows_fetched(pg_url, word_embedder):
    with Vectrix(scoped(pg_url), embedder=word_embedder) as pg, \
            Vectrix(scoped(pg_url), embedder=word_embedder) as writer:
        writer.remember("ann likes tea", user="ann", session="a", timestamp=T0)
        assert pg.count({K_USER: "ann"}) == 1  # ann's rows kept, at this generation
        with psycopg.connect(pg_url, autocommit=True) as conn:  # back to schema 2: no scope in the change log
            conn.execute("ALTER TABLE vx_changes DROP COLUMN user_id, DROP COLUMN session_key")
            conn.execute("UPDATE vx_meta SET value = '2' WHERE key = 'schema_version'")
            conn.execute("INSERT INTO vx_docs (id, text, metadata, vector, user_id, session_key) SELECT 'x', "
                         "'ann likes snow', replace(metadata, 'tea', 'snow'), vector, user_id, session_key "
                         "FROM vx_docs")  # a write logged by a process of schema 2
            conn.execute("UPDATE vx_meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")
            conn.execute("INSERT INTO vx_changes (generation, doc, op) SELECT value::bigint, "
                         "(SELECT rowid FROM vx_docs WHERE id = 'x'), 'insert' FROM vx_meta WHERE key = 'generation'")
    with Vectrix(scoped(pg_url), embedder=word_embedder) as again:  # migrates: the columns come back, empty
        again.remember("bob likes rain", user="bob", session="b", timestamp=T0 + 1)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute("SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0] == str(
                schema.SCHEMA_VERSION)
            logged = conn.execute("SELECT user_id, session_key FROM vx_changes ORDER BY generation").fetchall()
        assert logged[-1] == ("bob", '["bob", "b"]') and logged[-2] == (None, None)
        assert [r.text for r in again.scan({K_USER: "ann"})] == ["ann likes tea", "ann likes snow"]
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a process of schema 2, still running, writes
            conn.execute("INSERT INTO vx_docs (id, text, metadata, vector, user_id, session_key) SELECT 'y', "
                         "'ann likes rain', replace(metadata, 'snow', 'rain'), vector, user_id, session_key "
                         "FROM vx_docs WHERE id = 'x'")
            conn.execute("UPDATE vx_meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")
            conn.execute("INSERT INTO vx_changes (generation, doc, op) SELECT value::bigint, "
                         "(SELECT rowid FROM vx_docs WHERE id = 'y'), 'insert' FROM vx_meta WHERE key = 'generation'")
        assert [r.text for r in again.scan({K_USER: "ann"})][-1] == "ann likes rain"  # followed, not read afresh
