"""The memory on PostgreSQL + pgvector: every verb, the same answers as the file store, the schema.

A real PostgreSQL 16 with pgvector (the ``pg_server`` fixture: pgserver, or ``VXMEM_TEST_PG``),
a fresh database per test (``pg_url``).
"""

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.bench_postgres_equality import drive
from vxmem import Vectrix
from vxmem.core.errors import ConflictError, InvalidDatabaseError, ReadOnlyError
from vxmem.memory.rules import get_judge
from vxmem.workbench.synth import generate

from helpers import DAY, T0, WordHashEmbedder, drop_pg_database, new_pg_database, play_history

HOUR = 3600.0
MODES = ("dense", "lexical", "hybrid")


@pytest.fixture
def pg(make_db, pg_url, word_embedder):
    return make_db(pg_url, embedder=word_embedder)


def test_remember_and_recall_on_postgres(pg):
    tea = pg.remember("the user likes green tea", session="s", timestamp=T0)
    pg.remember("the user lives in Paris", session="s", timestamp=T0 + 60)
    for mode in MODES:
        assert pg.recall("green tea", session="s", now=T0 + HOUR, mode=mode).ids[0] == tea
    assert pg.get(tea).text == "the user likes green tea"
    assert len(pg) == 2


def test_remember_many_stores_every_memory_in_turn_order(pg):
    ids = pg.remember_many(["hello there", "I work at a bakery", "I have two cats"], session="s", timestamp=T0)
    assert len(ids) == 3 == len(set(ids))
    assert [r.id for r in pg.turns("s", now=T0 + HOUR)] == ids
    assert pg.recall("cats", session="s", now=T0 + HOUR, mode="lexical").ids == [ids[2]]


def test_feedback_with_a_correction_supersedes_and_keeps_the_history(pg):
    old = pg.remember("I prefer dark mode", session="s", kind="fact", timestamp=T0)
    new = pg.feedback(old, "corrected", correction="actually light mode", timestamp=T0 + DAY)
    assert new is not None and new != old
    assert pg.recall("mode", session="s", now=T0 + 2 * DAY).ids == [new]
    assert pg.recall("mode", session="s", now=T0 + HOUR).ids == [old]  # as of a moment before the correction
    chain = pg.history(new)
    assert [e.id for e in chain] == [old, new]
    assert chain[0].superseded_by == new and not chain[0].live and chain[1].live


def test_useful_feedback_is_stored_in_the_memory(pg):
    mid = pg.remember("the wifi password is on the fridge", session="s", kind="fact", timestamp=T0)
    assert pg.feedback(mid, "useful", timestamp=T0 + 60) is None
    assert any("feedback" in k for k in pg.get(mid).metadata)


def test_forget_deletes_by_id_and_by_session(pg):
    a = pg.remember("alpha turn", session="s1", timestamp=T0)
    pg.remember("beta turn", session="s1", timestamp=T0 + 1)
    c = pg.remember("gamma turn", session="s2", timestamp=T0 + 2)
    assert pg.forget(ids=[a], now=T0 + HOUR) == 1
    assert a not in pg
    assert pg.forget(session="s1", now=T0 + HOUR) == 1
    assert [r.id for r in pg.scan()] == [c]


def test_pinned_facts_come_with_every_recall(pg):
    pin = pg.remember("the user's name is Ada", session="s", pinned=True, timestamp=T0)
    pg.remember("we talked about the weather", session="s", timestamp=T0 + 1)
    assert pin in pg.recall("weather", session="s", now=T0 + HOUR).ids


def test_ttl_expires_memories(pg):
    short = pg.remember("parking spot 12 today", session="s", ttl_days=1, timestamp=T0)
    keep = pg.remember("the user parks on level 2", session="s", timestamp=T0)
    assert short in pg.recall("parking", session="s", now=T0 + HOUR).ids
    assert short not in pg.recall("parking", session="s", now=T0 + 2 * DAY).ids
    assert pg.expire(now=T0 + 2 * DAY) == 1
    assert [r.id for r in pg.scan()] == [keep]


def test_scopes_and_users_keep_their_memories_apart(pg):
    ann = pg.remember("I like tea", session="a1", user="ann", timestamp=T0)
    bob = pg.remember("I like tea too", session="b1", user="bob", timestamp=T0)
    assert pg.recall("tea", user="ann", now=T0 + HOUR).ids == [ann]
    assert pg.recall("tea", session="b1", user="bob", now=T0 + HOUR).ids == [bob]
    assert pg.recall("tea", session="b1", now=T0 + HOUR).ids == []  # the session b1 of no user
    assert pg.recall("tea", user="carl", now=T0 + HOUR).ids == []


def test_turn_numbers_come_from_the_database_counter(pg, pg_url, make_db, word_embedder):
    first = pg.remember_many(["one", "two"], session="s", timestamp=T0)
    other = make_db(pg_url, embedder=word_embedder)
    third = other.remember("three", session="s", timestamp=T0 + 1)
    turns = [r.metadata["_vx_turn"] for r in pg.turns("s", now=T0 + HOUR)]
    assert turns == sorted(set(turns)) and len(turns) == 3
    assert [r.id for r in pg.turns("s", now=T0 + HOUR)] == [*first, third]


def test_a_duplicate_id_is_refused_and_changes_nothing(pg):
    pg.add(["one"], ids=["x"])
    with pytest.raises(ConflictError):
        pg.add(["two"], ids=["x"])
    assert pg.get("x").text == "one" and len(pg) == 1


def test_two_embedders_racing_for_an_empty_database_do_not_mix(pg_url):
    first, second = Vectrix(pg_url, embedder=Named()), Vectrix(pg_url, embedder=Named2())
    try:
        first.remember("hello", session="s", timestamp=T0)
        with pytest.raises(ValueError, match="word-hash-32"):
            second.remember("hello again", session="s", timestamp=T0)
        assert len(second) == 1 and len(first) == 1
    finally:
        first.close()
        second.close()


def test_a_text_postgres_cannot_hold_is_a_value_error_and_changes_nothing(pg):
    with pytest.raises(ValueError, match="NUL"):
        pg.remember("a\x00b", session="s", timestamp=T0)
    assert len(pg) == 0
    pg.remember("after", session="s", timestamp=T0)
    assert len(pg) == 1


def test_the_memory_survives_a_reopen(pg_url, word_embedder):
    with Vectrix(pg_url, embedder=word_embedder) as db:
        mid = db.remember("the user likes jazz", session="s", timestamp=T0)
        vec = db.engine.mirror.vector(db.engine.mirror.pos_of_id[mid]).copy()
    with Vectrix(pg_url, embedder=word_embedder) as db:
        assert db.recall("jazz", session="s", now=T0 + HOUR).ids == [mid]
        assert np.array_equal(db.engine.mirror.vector(db.engine.mirror.pos_of_id[mid]), vec)  # bit for bit


def test_a_read_only_handle_reads_and_refuses_writes(pg, pg_url, make_db, word_embedder):
    mid = pg.remember("the user likes jazz", session="s", timestamp=T0)
    ro = make_db(pg_url, embedder=word_embedder, read_only=True)
    assert ro.recall("jazz", session="s", now=T0 + HOUR).ids == [mid]
    with pytest.raises(ReadOnlyError):
        ro.remember("no", session="s", timestamp=T0)


def test_a_connection_the_server_ended_is_opened_again(pg, pg_url, pg_server, make_db, word_embedder):
    mid = pg.remember("the user likes jazz", session="s", timestamp=T0)
    pid = pg.engine.database.conn.info.backend_pid
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    other = make_db(pg_url, embedder=word_embedder)
    added = other.remember("the user likes blues", session="s", timestamp=T0 + 60)
    assert pg.recall("jazz", session="s", now=T0 + HOUR).ids[0] == mid
    assert added in pg and pg.engine.database.conn.info.backend_pid != pid
    pg.remember("and writes go on", session="s", timestamp=T0 + 120)
    assert len(other) == 3


def test_a_newer_schema_is_refused(pg_url, word_embedder):
    Vectrix(pg_url, embedder=word_embedder).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE vx_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(InvalidDatabaseError, match="newer vxmem"):
        Vectrix(pg_url, embedder=word_embedder)


class Named(WordHashEmbedder):
    """A word-hash embedder with a name, which the database records with its first vector."""

    @property
    def name(self):
        return f"word-hash-{self.dim}"


class Named2(Named):
    """The same vectors under another name."""

    @property
    def name(self):
        return "another-word-hash"


def test_another_embedder_is_refused(pg_url):
    with Vectrix(pg_url, embedder=Named()) as db:
        db.remember("hello", session="s", timestamp=T0)
    with pytest.raises(ValueError, match="word-hash-32"):
        Vectrix(pg_url, embedder=Named(dim=64))
    with Vectrix(pg_url, embedder=Named()) as db:
        assert len(db) == 1


# ---------------------------------------------------------------------- the same answers as the file store

PHRASES = ["the config key is max_tokens", "set max tokens to 10", "max_tokens_per_call is 5", "e-mail the team",
           "email me the max_tokens value", "state_of_the_art models", "the art of the state"]


def test_phrase_queries_and_deletions_score_as_in_the_file_store(pg_url, tmp_path, word_embedder):
    """A query word FTS5 splits (``max_tokens``) is ranked by FTS5 itself: on PostgreSQL by the
    process's own FTS5 table, which must hold exactly the live memories, sessions included."""
    answers = []
    for where in (tmp_path / "file.db", pg_url):
        with Vectrix(where, embedder=word_embedder) as db:
            ids = [db.remember(t, session=f"s{i % 2}", timestamp=T0 + i, id=f"m{i}") for i, t in enumerate(PHRASES)]
            got = []
            for step in range(2):
                for query in ("max_tokens", "state_of_the_art", "e-mail"):
                    for session in ("s0", "s1", None):
                        res = db.recall(query, session=session, mode="lexical", now=T0 + DAY)
                        got.append((res.ids, [round(r.score, 9) for r in res]))
                    hits = db.search(query, mode="lexical")
                    got.append(([r.id for r in hits], [round(r.score, 9) for r in hits]))
                if step == 0:
                    db.forget(ids=[ids[0], ids[5]], now=T0 + DAY)
            answers.append(got)
    assert answers[0] == answers[1]
    assert any(ids for ids, _ in answers[0])


SCENARIOS = {"knowledge_update": {}, "contradicting_facts": {}, "feedback_loop": {}, "many_users": {},
             "long_thread": {"days": 10}}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_recall_on_postgres_equals_the_file_store(scenario, pg_url, tmp_path, word_embedder):
    conv = generate(scenario, seed=3, **SCENARIOS[scenario])
    judge = get_judge(conv.meta.get("judge"))
    with Vectrix(tmp_path / "file.db", embedder=word_embedder, judge=judge) as file_db, \
            Vectrix(pg_url, embedder=word_embedder, judge=judge) as pg_db:
        want, got = drive(file_db, conv), drive(pg_db, conv)  # as the equality benchmark replays them
    assert len(want) == len(got) > 0
    for (w_ids, w_scores), (g_ids, g_scores) in zip(want, got):
        assert g_ids == w_ids
        assert np.allclose(g_scores, w_scores, rtol=0, atol=1e-6)


# ---------------------------------------------------------------------- export and restore across both stores

def _history(db):
    db.remember("I prefer dark mode", session="s", kind="fact", timestamp=T0)
    first = db.remember("the user lives in Paris", session="s", user="ann", timestamp=T0 + 60)
    db.feedback(first, "corrected", correction="the user lives in Lyon", timestamp=T0 + DAY)
    db.remember_many(["hello", "we talked about trains"], session="t", timestamp=T0 + 2 * DAY)
    db.remember("the user's name is Ada", session="s", pinned=True, timestamp=T0 + 3 * DAY)


def _answers(db):
    out = []
    for query in ("where does the user live", "mode", "trains"):
        for session in ("s", "t", None):
            res = db.recall(query, session=session, now=T0 + 5 * DAY, include_superseded=True)
            out.append((res.ids, [round(r.score, 9) for r in res]))
    return out, [(r.id, r.text, r.metadata) for r in db.scan()]


def test_an_export_of_either_store_restores_into_the_other(pg_url, tmp_path, word_embedder):
    with Vectrix(tmp_path / "a.db", embedder=word_embedder) as src:
        _history(src)
        want = _answers(src)
        src.export(tmp_path / "a.jsonl", vectors=True)
    with Vectrix.restore(tmp_path / "a.jsonl", pg_url, embedder=word_embedder) as pg:
        assert _answers(pg) == want
        pg.export(tmp_path / "b.jsonl", vectors=True)
    with Vectrix.restore(tmp_path / "b.jsonl", tmp_path / "b.db", embedder=word_embedder) as back:
        assert _answers(back) == want
    assert (tmp_path / "a.jsonl").read_bytes().split(b"\n")[1:] == (tmp_path / "b.jsonl").read_bytes().split(b"\n")[1:]


def test_a_refused_restore_leaves_the_postgres_database_empty(pg_url, tmp_path, word_embedder):
    with Vectrix(tmp_path / "a.db", embedder=word_embedder) as src:
        _history(src)
        src.export(tmp_path / "a.jsonl")
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # no end line: truncated
    with pytest.raises(ValueError):
        Vectrix.restore(tmp_path / "cut.jsonl", pg_url, embedder=word_embedder)
    with Vectrix(pg_url, embedder=word_embedder) as pg:
        assert len(pg) == 0


# ---------------------------------------------------------------------- random histories, the file store as oracle

WORD = st.sampled_from("tea coffee paris lyon dark light mode cat dog train max_tokens e-mail".split())
TEXT = st.lists(WORD, min_size=1, max_size=5).map(" ".join)
MEMORY = st.tuples(st.just("remember"), st.sampled_from(["turn", "fact", "pinned"]), st.sampled_from(["a", "b", None]),
                   st.sampled_from(["ann", "bob", None]), st.sampled_from([None, 1.0, 30.0]), TEXT)
FEEDBACK = st.tuples(st.just("feedback"), st.integers(0, 99), st.sampled_from(["useful", "dead_end", "corrected"]),
                     TEXT)
FORGET = st.tuples(st.just("forget"), st.integers(0, 99))
OPS = st.lists(st.one_of(MEMORY, MEMORY, FEEDBACK, FORGET, st.just(("expire",))), min_size=1, max_size=20)
QUERIES = st.lists(st.tuples(TEXT, st.sampled_from(["a", "b", None]), st.integers(0, 25)), min_size=1, max_size=4)


def _recalls(db, queries):
    m = db.engine.mirror
    out = []
    for text, session, hours in queries:
        for mode in MODES:
            res = db.recall(text, session=session, mode=mode, now=T0 + hours * HOUR, include_superseded=hours % 2 == 1)
            out.append(([int(m.rowid[m.pos_of_id[i]]) for i in res.ids], [r.score for r in res]))
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=OPS, queries=QUERIES)
def test_random_histories_recall_alike_on_both_stores(pg_server, word_embedder, tmp_path_factory, ops, queries):
    url = new_pg_database(pg_server)
    try:
        with Vectrix(tmp_path_factory.mktemp("oracle") / "o.db", embedder=word_embedder) as oracle, \
                Vectrix(url, embedder=word_embedder) as pg:
            play_history(oracle, ops)
            play_history(pg, ops)
            want, got = _recalls(oracle, queries), _recalls(pg, queries)
            assert [r.text for r in pg.scan()] == [r.text for r in oracle.scan()]
    finally:
        drop_pg_database(pg_server, url)
    for (w_rows, w_scores), (g_rows, g_scores) in zip(want, got, strict=True):
        assert g_rows == w_rows
        assert np.allclose(g_scores, w_scores, rtol=0, atol=1e-6)
