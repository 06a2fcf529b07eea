"""PostgreSQL at scale: per-user mirrors (scope=user), the HNSW index across users, the indexes, migration.

A real PostgreSQL 16 with pgvector (``pg_server``), a fresh database per test (``pg_url``); the
file store is the oracle of every scoped answer.
"""

import threading

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxmem import Vectrix
from vxmem.store.postgres import split_options

from helpers import DAY, T0, drop_pg_database, new_pg_database, play_history

HOUR = 3600.0
MODES = ("dense", "lexical", "hybrid")
WORDS = "tea coffee paris lyon dark light mode cat dog train bike rain snow".split()
USERS = [f"u{i}" for i in range(6)]



def raw(result):
    """A result's relevance before the pool's normalisation: BM25 itself in lexical mode."""
    return result.metadata["_vx_scoring"]["relevance"]


def texts(res):
    return [r.text for r in res]


def scoped(url):
    return f"{url}{'&' if '?' in url else '?'}scope=user"


def _items(n=240, seed=0):
    rng = np.random.default_rng(seed)
    return [{"text": " ".join(rng.choice(WORDS, 4)) + f" n{i}", "user": USERS[i % len(USERS)],
             "session": f"s{i % 12}", "timestamp": T0 + i * HOUR, "kind": "fact" if i % 5 == 0 else None}
            for i in range(n)]


def _history(db, items):
    """The same writes on any store: the items, a correction, feedback, a forget, a TTL."""
    ids = db.remember_many(items)
    db.feedback(ids[6], "corrected", correction="actually tea in lyon", timestamp=T0 + 300 * HOUR)
    db.feedback(ids[12], "useful", timestamp=T0 + 301 * HOUR)
    db.forget(ids=[ids[18]], now=T0 + 302 * HOUR)
    db.remember("short lived tea note", user="u0", session="s0", ttl_days=1.0, timestamp=T0 + 303 * HOUR)
    return ids


def _answers(db, queries):
    out = []
    for query, user, hours, mode in queries:
        res = db.recall(query, user=user, mode=mode, now=T0 + hours * HOUR, include_superseded=hours % 2 == 1)
        out.append(([r.text for r in res], [(r.score, raw(r)) for r in res]))
    return out


QUERIES = [(q, u, h, m) for q in ("tea dog", "lyon", "rain snow bike") for u in ("u0", "u3")
           for h in (100, 400) for m in MODES]


def test_split_options_takes_vxmem_parameters_out_of_the_url():
    url, options = split_options("postgresql://me@/db?host=/tmp/x&scope=user&pool_size=3&nearest=50")
    assert options == {"scope": "user", "pool_size": 3, "nearest": 50}
    assert "scope" not in url and "host=" in url
    with pytest.raises(ValueError, match="scope"):
        split_options("postgresql://me@/db?scope=team")
    with pytest.raises(ValueError, match="pool_size"):
        split_options("postgresql://me@/db?pool_size=0")


def test_scoped_recall_equals_the_file_store(pg_url, tmp_path, word_embedder):
    """A user's recall on a scoped handle: the file store's memories in its order, scores within
    1e-6, in every mode, now and as of a past moment (BM25 over the whole collection's statistics)."""
    items = _items()
    with Vectrix(tmp_path / "f.db", embedder=word_embedder) as oracle, \
            Vectrix(scoped(pg_url), embedder=word_embedder) as writer:
        _history(oracle, items)
        _history(writer, items)  # feedback and forget name no user: this handle reads every row
        want = _answers(oracle, QUERIES)
        with Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
            got = [*_answers(pg, QUERIES), *_answers(writer, QUERIES)]
            kept = {scope: state.mirror.n_alive for scope, state in pg.engine.scopes.states.items()}
    assert set(kept) == {"u0", "u3"}  # only the users named were read
    assert kept["u3"] == len(items) // len(USERS)
    for (w_texts, w_scores), (g_texts, g_scores) in zip(want + want, got, strict=True):
        assert g_texts == w_texts
        assert np.allclose(g_scores, w_scores, rtol=0, atol=1e-6)


def test_scoped_handle_follows_another_process_writes(pg_url, word_embedder):
    with Vectrix(scoped(pg_url), embedder=word_embedder) as reader, Vectrix(pg_url, embedder=word_embedder) as writer:
        writer.remember("ann drinks green tea", user="ann", session="a", timestamp=T0)
        assert texts(reader.recall("green tea", user="ann", now=T0 + HOUR)) == ["ann drinks green tea"]
        bob = writer.remember("bob drinks green tea", user="bob", session="b", timestamp=T0 + 1)
        new = writer.remember("ann likes black tea now", user="ann", session="a", timestamp=T0 + 2)
        assert set(reader.recall("tea", user="ann", now=T0 + HOUR).ids) == {new, *reader.recall(
            "green tea", user="ann", now=T0 + HOUR).ids}
        writer.forget(ids=[new], now=T0 + 3)
        assert texts(reader.recall("black tea", user="ann", now=T0 + HOUR)) == ["ann drinks green tea"]
        assert reader.recall("tea", user="bob", now=T0 + HOUR).ids == [bob]
        assert list(reader.engine.scopes.states) == ["ann", "bob"]
        assert reader.engine.scopes.states["ann"].mirror.n_alive == 1


def test_a_write_through_a_scoped_handle_is_seen_by_every_scope_it_keeps(pg_url, word_embedder):
    with Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
        a = pg.remember("ann rides a red bike", user="ann", session="a", timestamp=T0)
        assert pg.recall("bike", user="bob", now=T0 + HOUR).ids == []
        b = pg.remember("bob rides a red bike", user="bob", session="b", timestamp=T0 + 1)
        assert pg.recall("bike", user="ann", now=T0 + HOUR).ids == [a]
        assert pg.recall("bike", user="bob", now=T0 + HOUR).ids == [b]
        assert sorted(pg.recall("red bike", now=T0 + HOUR).ids) == sorted([a, b])  # across users: HNSW
        assert len(pg) == 2 and pg.get(a).text == "ann rides a red bike"  # unscoped: the whole collection


def test_cross_user_recall_finds_the_exact_top_memories(pg_url, tmp_path, word_embedder):
    """No user named: the rows nearest the query by pgvector's HNSW index, then the usual
    recall over them; on a small collection it is the file store's answer."""
    items = _items(300, seed=1)
    with Vectrix(pg_url, embedder=word_embedder) as writer:
        writer.remember_many(items)
    with Vectrix(tmp_path / "f.db", embedder=word_embedder) as oracle, \
            Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
        oracle.remember_many(items)
        for query in ("tea dog", "paris lyon", "rain"):
            want = oracle.recall(query, mode="dense", now=T0 + DAY * 30)
            got = pg.recall(query, mode="dense", now=T0 + DAY * 30)
            assert texts(got) == texts(want)
        assert pg.engine.scopes.states == {}  # nothing kept: the nearest rows were read for the one call


def _plan(conn, sql, args):
    conn.execute("SET enable_seqscan = off")  # what the planner can use, not what it likes for a few rows
    return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, args).fetchall())


def test_a_users_rows_and_the_nearest_rows_are_read_through_indexes(pg_url, word_embedder):
    with Vectrix(scoped(pg_url), embedder=word_embedder) as pg:  # a scoped handle makes the HNSW index
        pg.remember_many(_items(120))
        dim = pg.engine.database.dim
    with psycopg.connect(pg_url, autocommit=True) as conn:
        plan = _plan(conn, "SELECT rowid FROM vx_docs WHERE user_id = %s ORDER BY rowid", ("u1",))
        assert "vx_docs_user" in plan
        plan = _plan(conn, "SELECT rowid FROM vx_docs WHERE session_key = %s ORDER BY rowid", ('"s1"',))
        assert "vx_docs_session" in plan
        vec = "[" + ",".join(["0.1"] * dim) + "]"
        plan = _plan(conn, f"SELECT rowid FROM vx_docs ORDER BY vector::vector({dim}) <=> %s::vector LIMIT 10",
                     (vec,))
        assert "vx_docs_hnsw" in plan


def test_a_schema_1_database_is_migrated_on_open(pg_url, tmp_path, word_embedder):
    items = _items(60)
    with Vectrix(pg_url, embedder=word_embedder) as pg:
        pg.remember_many(items)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # back to schema 1: no user column, no statistics
        conn.execute("DROP TABLE vx_terms")
        conn.execute("DROP INDEX IF EXISTS vx_docs_hnsw")
        for column in ("user_id", "text_len", "lex_len", "created", "terms"):
            conn.execute(f"ALTER TABLE vx_docs DROP COLUMN {column}")
        conn.execute("DELETE FROM vx_meta WHERE key IN ('lex_docs', 'lex_sum', 'max_created')")
        conn.execute("UPDATE vx_meta SET value = '1' WHERE key = 'schema_version'")
    with pytest.raises(Exception, match="older vxmem schema"):
        Vectrix(pg_url, embedder=word_embedder, read_only=True)
    with Vectrix(tmp_path / "f.db", embedder=word_embedder) as oracle, \
            Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
        oracle.remember_many(items)
        for query, user in (("tea", "u2"), ("dog lyon", "u5")):
            want = oracle.recall(query, user=user, now=T0 + DAY * 10, mode="hybrid")
            got = pg.recall(query, user=user, now=T0 + DAY * 10, mode="hybrid")
            assert texts(got) == texts(want)
            assert np.allclose([r.score for r in got], [r.score for r in want], rtol=0, atol=1e-6)


def test_handles_of_one_process_share_a_pool_of_pool_size_connections(pg_url, word_embedder):
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}pool_size=2"
    handles = [Vectrix(url, embedder=word_embedder) for _ in range(5)]
    try:
        def work(i):
            db = handles[i]
            for j in range(10):
                db.remember(f"note {i} {j} about tea", user=f"u{i}", session=f"s{i}", timestamp=T0 + j)
                db.recall("tea", user=f"u{i}", now=T0 + DAY)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            others = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                  "AND pid <> pg_backend_pid()").fetchone()[0]
        assert 1 <= others <= 2
        assert all(len(db) == 50 for db in handles)  # each handle sees every write, made through any
    finally:
        for db in handles:
            db.close()
    with Vectrix(url, embedder=word_embedder) as again:  # the last handle closed the pool: a new one opens
        assert len(again) == 50


def _user_verbs(db):
    """Verbs that name a user, or a memory (whose user is looked up): a scoped handle reads that user's rows."""
    out = []
    for user in ("ann", "bob"):
        ids = [db.remember(f"{user} note {i} about {WORDS[i % len(WORDS)]}", user=user, session=f"{user}-s",
                           timestamp=T0 + i * HOUR) for i in range(8)]
        new = db.feedback(ids[1], "corrected", correction=f"{user} prefers coffee", timestamp=T0 + 10 * HOUR)
        db.feedback(ids[2], "useful", timestamp=T0 + 11 * HOUR)
        out.append(db.get(new).text)
        out.append([e.id == new for e in db.history(new)])
        out.append(db.forget(ids=[ids[3]], user=user))
        db.remember(f"{user} short note", user=user, session=f"{user}-s", ttl_days=0.01, timestamp=T0)
        out.append(db.expire(now=T0 + 12 * HOUR, user=user))
        out.append([(r.text, round(r.score, 6)) for r in db.recall("coffee note", user=user, now=T0 + DAY)])
    return out


def test_verbs_naming_a_user_or_a_memory_read_that_users_rows_only(pg_url, tmp_path, word_embedder):
    with Vectrix(tmp_path / "f.db", embedder=word_embedder) as oracle, \
            Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
        want, got = _user_verbs(oracle), _user_verbs(pg)
        assert set(pg.engine.scopes.states) == {"ann", "bob"}  # never every row
    assert got == want


# Random histories, the file store as oracle, every recall naming a user. Words only: a query word
# FTS5 splits into several tokens (e-mail) is ranked by FTS5 itself, over the rows the handle holds.
TEXT = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
MEMORY = st.tuples(st.just("remember"), st.sampled_from(["turn", "fact", "pinned"]), st.sampled_from(["a", "b", None]),
                   st.sampled_from(["ann", "bob", None]), st.sampled_from([None, 1.0, 30.0]), TEXT)
FEEDBACK = st.tuples(st.just("feedback"), st.integers(0, 99), st.sampled_from(["useful", "dead_end", "corrected"]),
                     TEXT)
OPS = st.lists(st.one_of(MEMORY, MEMORY, FEEDBACK, st.tuples(st.just("forget"), st.integers(0, 99)),
                         st.just(("expire",))), min_size=1, max_size=20)
ASKS = st.lists(st.tuples(TEXT, st.sampled_from(["ann", "bob"]), st.integers(0, 25)), min_size=1, max_size=3)


def asked(db, asks):
    out = []
    for text, user, hours in asks:
        for mode in MODES:
            res = db.recall(text, user=user, mode=mode, now=T0 + hours * HOUR, include_superseded=hours % 2 == 1)
            out.append(([r.text for r in res], [(r.score, raw(r)) for r in res]))
    return out


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=OPS, asks=ASKS)
def test_random_histories_recall_alike_per_user(pg_server, word_embedder, tmp_path_factory, ops, asks):
    url = new_pg_database(pg_server)
    try:
        with Vectrix(tmp_path_factory.mktemp("oracle") / "o.db", embedder=word_embedder) as oracle, \
                Vectrix(url, embedder=word_embedder) as writer:
            play_history(oracle, ops)
            play_history(writer, ops)
            with Vectrix(scoped(url), embedder=word_embedder) as pg:  # a server reading what another wrote
                want, got = asked(oracle, asks), asked(pg, asks)
    finally:
        drop_pg_database(pg_server, url)
    for (w_texts, w_scores), (g_texts, g_scores) in zip(want, got, strict=True):
        assert g_texts == w_texts
        assert np.allclose(g_scores, w_scores, rtol=0, atol=1e-6)


def test_a_session_named_without_a_user_reads_that_sessions_rows(pg_url, tmp_path, word_embedder):
    items = [{k: v for k, v in item.items() if k != "user"} for item in _items(180, seed=2)]  # no one's sessions
    with Vectrix(pg_url, embedder=word_embedder) as writer:
        writer.remember_many(items)
    with Vectrix(tmp_path / "f.db", embedder=word_embedder) as oracle, \
            Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
        oracle.remember_many(items)
        for mode in MODES:
            want = oracle.recall("tea dog rain", session="s3", mode=mode, now=T0 + 100 * HOUR)
            got = pg.recall("tea dog rain", session="s3", mode=mode, now=T0 + 100 * HOUR)
            assert texts(got) == texts(want)
            assert np.allclose([(r.score, raw(r)) for r in got], [(r.score, raw(r)) for r in want], rtol=0, atol=1e-6)
        assert texts(pg.turns("s3", now=T0 + DAY * 30)) == texts(oracle.turns("s3", now=T0 + DAY * 30))
        new = pg.remember("a new turn in s3 about snow", session="s3", timestamp=T0 + 200 * HOUR)
        assert new in pg.recall("new turn", session="s3", now=T0 + 300 * HOUR, mode="lexical").ids
        assert list(pg.engine.scopes.states) == [("session", '"s3"')]
        assert pg.engine.scopes.states[("session", '"s3"')].mirror.n_alive == 180 // 12 + 1


def test_scopes_read_before_the_first_vector_take_its_dimension(pg_url, word_embedder):
    with Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
        assert pg.recall("tea", user="ann", now=T0).ids == []  # ann's mirror: empty, no dimension yet
        assert pg.turns("s", now=T0) == []
        bob = pg.remember("bob drinks tea", user="bob", session="b", timestamp=T0)
        ann = pg.remember("ann drinks tea", user="ann", session="s", timestamp=T0 + 1)
        assert pg.recall("tea", user="ann", now=T0 + HOUR).ids == [ann]
        assert pg.recall("tea", user="bob", now=T0 + HOUR).ids == [bob]
        assert texts(pg.turns("s", user="ann", now=T0 + HOUR)) == ["ann drinks tea"]
        assert pg.turns("s", now=T0 + HOUR) == []  # the session s of no user


def test_a_scoped_users_maps_by_rowid_grow_with_their_rows_not_the_collection(pg_url, tmp_path, word_embedder):
    # Many rows of other users around each of ann's: her rowids lie sparse up to the collection's
    # newest. The maps her mirror and its BM25 keep by rowid must be sized by her rows (an array
    # up to the largest rowid cost 8 MB per user at a million memories), and answer the same.
    from vxmem.store.mirror.rowids import SLACK, SPREAD

    rng = np.random.default_rng(3)
    with Vectrix(tmp_path / "f.db", embedder=word_embedder) as oracle, Vectrix(pg_url, embedder=word_embedder) as w:
        for i in range(10):
            others = [{"text": " ".join(rng.choice(WORDS, 4)), "user": f"o{j % 50}", "session": "s",
                       "timestamp": T0 + (i * 300 + j) * 60.0} for j in range(300)]
            mine = {"text": " ".join(rng.choice(WORDS, 4)) + f" ann{i}", "user": "ann", "session": f"a{i % 2}",
                    "timestamp": T0 + (i * 300 + 299.5) * 60.0}
            for db in (oracle, w):
                db.remember_many(others + [mine])
        with Vectrix(scoped(pg_url), embedder=word_embedder) as pg:
            for query in ("tea dog", "lyon rain", "ann3 cat"):
                for mode in MODES:
                    want = oracle.recall(query, user="ann", mode=mode, now=T0 + 4000 * 60.0)
                    got = pg.recall(query, user="ann", mode=mode, now=T0 + 4000 * 60.0)
                    assert texts(got) == texts(want)
                    assert [raw(r) for r in got] == pytest.approx([raw(r) for r in want], abs=1e-6)
            state = pg.engine.scopes.states["ann"]
            m, lexical = state.mirror, state.lexical.index
            assert m.n == 10 and int(m.rowid[m.n - 1]) > 3000  # sparse: 10 rows, rowids past 3,000
            bound = 8 * (SPREAD * m.n + SLACK)
            assert m.rowid_pos.nbytes <= bound
            assert lexical is not None and lexical.text_len.nbytes <= bound
