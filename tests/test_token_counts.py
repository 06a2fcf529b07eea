"""Each text's token count is stored beside it with the name of the counter that made it, so
an open reads the counts instead of counting every text again; a handle whose counter is
another one (or has no name) counts afresh, and a file of the previous schema gains the
column on a writable open."""

import sqlite3

import numpy as np

from vxmem import Vectrix
from vxmem.core.tokens import DEFAULT_COUNTER_NAME, count_tokens
from vxmem.store.sqlite import database

from helpers import DAY, T0, WordHashEmbedder

TEXTS = ["the user lives in Lisbon, near the river.", "Café at 9? Sure!", "one", "",
         "a longer sentence with some punctuation: commas, dots... and (parentheses)"]


class Named:
    """A token counter with a name (one token per word), counting its calls."""

    def __init__(self, name="words-1"):
        self.name = name
        self.calls = 0

    def __call__(self, text):
        self.calls += 1
        return len(text.split())


def _write(path, counter=None):
    with Vectrix(path, embedder=WordHashEmbedder(), token_counter=counter) as db:
        for i, text in enumerate(TEXTS):
            db.remember(text or "(empty)", session=f"s{i % 2}", timestamp=T0 + i * DAY)
        db.add(["a plain document, no memory"], ids=["plain"])


def _stored(path):
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT text, tokens FROM vx_docs ORDER BY rowid").fetchall()
        meta = dict(conn.execute("SELECT key, value FROM vx_meta"))
    finally:
        conn.close()
    return rows, meta


def _mirror_tokens(db):
    with db.engine.locked() as m:
        live = m.live_positions()
        return {m.texts[p]: int(m.tokens[p]) for p in live}


def test_the_stored_counts_equal_a_recount_and_name_the_default_counter(tmp_path):
    path = str(tmp_path / "t.db")
    _write(path)
    rows, meta = _stored(path)
    assert meta["token_counter"] == DEFAULT_COUNTER_NAME
    assert meta["schema_version"] == str(database.SCHEMA_VERSION)
    assert [t for _, t in rows] == [count_tokens(text) for text, _ in rows]
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:
        assert _mirror_tokens(db) == {text: count_tokens(text) for text, _ in rows}


def test_an_open_with_the_counter_that_stored_the_counts_does_not_count_again(tmp_path):
    path = str(tmp_path / "t.db")
    counter = Named()
    _write(path, counter)
    written = counter.calls
    assert written > 0
    for read_only in (False, True):
        with Vectrix(path, embedder=WordHashEmbedder(), token_counter=counter, read_only=read_only) as db:
            assert counter.calls == written
            assert set(_mirror_tokens(db).items()) == {(t, len(t.split())) for t, _ in _stored(path)[0]}


def test_a_handle_with_another_token_counter_counts_every_text_again(tmp_path):
    path = str(tmp_path / "t.db")
    _write(path)  # the default counter's counts
    rows, _ = _stored(path)
    other = Named("another-counter")
    with Vectrix(path, embedder=WordHashEmbedder(), token_counter=other, read_only=True) as db:
        assert other.calls == len(rows)
        assert _mirror_tokens(db) == {text: len(text.split()) for text, _ in rows}
    calls = []

    def unnamed(text):
        calls.append(text)
        return 7

    with Vectrix(path, embedder=WordHashEmbedder(), token_counter=unnamed) as db:
        assert len(calls) == len(rows)
        assert set(_mirror_tokens(db).values()) == {7}
        db.add(["written with a counter that has no name"], ids=["unnamed"])
    rows_after, meta = _stored(path)
    assert meta["token_counter"] == DEFAULT_COUNTER_NAME  # the stored counts stay the default's
    assert rows_after[:-1] == rows and rows_after[-1][1] is None  # its count is not the default's: not stored
    with Vectrix(path, embedder=WordHashEmbedder()) as db:  # the default's writer counts that row, once
        text = "written with a counter that has no name"
        assert _mirror_tokens(db)[text] == count_tokens(text)
    assert [t for _, t in _stored(path)[0]] == [count_tokens(text) for text, _ in rows_after]


def test_a_counter_swapped_on_an_open_handle_stores_no_counts_under_the_old_name(tmp_path):
    path = str(tmp_path / "t.db")
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        db.add(["counted by the default"], ids=["a"])
        db.token_counter = lambda text: 99
        db.add(["counted by a lambda"], ids=["b"])
        db.token_counter = count_tokens
        db.add(["counted by the default again"], ids=["c"])
    rows, _ = _stored(path)
    assert rows == [("counted by the default", count_tokens("counted by the default")),
                    ("counted by a lambda", None),
                    ("counted by the default again", count_tokens("counted by the default again"))]
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:
        assert _mirror_tokens(db) == {text: count_tokens(text) for text, _ in rows}


def test_a_damaged_stored_count_is_counted_again(tmp_path):
    path = str(tmp_path / "t.db")
    _write(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE vx_docs SET tokens = 'many' WHERE rowid = 1")
    conn.execute("UPDATE vx_docs SET tokens = -3 WHERE rowid = 2")
    conn.execute("UPDATE vx_docs SET tokens = 2.5 WHERE rowid = 3")
    conn.commit()
    conn.close()
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:
        assert _mirror_tokens(db) == {text: count_tokens(text) for text, _ in _stored(path)[0]}


def _make_previous_schema(path):
    """What a vxmem of schema 4 left: no token column, no counter named (and every document in FTS5)."""
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE vx_docs DROP COLUMN tokens")
    conn.execute("DELETE FROM vx_meta WHERE key IN ('token_counter', 'fts_upto')")
    conn.execute("UPDATE vx_meta SET value = '4' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_a_file_of_the_previous_schema_is_read_as_it_is_and_upgraded_by_a_writable_open(tmp_path):
    path = str(tmp_path / "old.db")
    _write(path)
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:
        want = _mirror_tokens(db)
        view = [(r.id, r.text, r.metadata) for r in db.scan()]
    _make_previous_schema(path)
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:  # counted afresh, file untouched
        assert _mirror_tokens(db) == want
    conn = sqlite3.connect(path)
    assert "tokens" not in {r[1] for r in conn.execute("PRAGMA table_info(vx_docs)")}
    conn.close()
    with Vectrix(path, embedder=WordHashEmbedder()) as db:  # migrates, then stores the counts once
        assert _mirror_tokens(db) == want
        assert [(r.id, r.text, r.metadata) for r in db.scan()] == view
        db.remember("after the upgrade", session="s0", timestamp=T0 + 30 * DAY)
    rows, meta = _stored(path)
    assert meta["schema_version"] == str(database.SCHEMA_VERSION)
    assert meta["token_counter"] == DEFAULT_COUNTER_NAME
    assert [t for _, t in rows] == [count_tokens(text) for text, _ in rows]
    counter = Named(DEFAULT_COUNTER_NAME)  # a counter under the default's name is trusted, not called
    with Vectrix(path, embedder=WordHashEmbedder(), token_counter=counter, read_only=True) as db:
        assert counter.calls == 0
        assert np.all(np.array(list(_mirror_tokens(db).values())) >= 0)


def test_an_open_whose_counts_cannot_be_stored_still_opens_and_counts_them_next_time(tmp_path, monkeypatch):
    path = str(tmp_path / "old.db")
    _write(path)
    _make_previous_schema(path)

    def full(self, m, positions, name):
        raise sqlite3.OperationalError("database or disk is full")

    with monkeypatch.context() as patched:
        patched.setattr(database.Database, "_store_counts", full)
        with Vectrix(path, embedder=WordHashEmbedder()) as db:  # migrated; the counts stay unstored
            assert _mirror_tokens(db) == {text: count_tokens(text) for text, _ in _stored(path)[0]}
    rows, meta = _stored(path)
    assert "token_counter" not in meta and {t for _, t in rows} == {None}
    with Vectrix(path, embedder=WordHashEmbedder()):
        pass
    assert [t for _, t in _stored(path)[0]] == [count_tokens(text) for text, _ in rows]


def _context_db(counter):
    db = Vectrix(embedder=WordHashEmbedder(), token_counter=counter)
    for i in range(10):
        db.remember(f"turn number {i} about dinner plans", session="s", timestamp=T0 + i * DAY)
        db.remember(f"an older note {i} on dinner and wine", session="t", timestamp=T0 + i * 60)
    db.remember("Alice is vegetarian", session="s", pinned=True, timestamp=T0)
    return db


def test_the_context_block_costs_what_its_counter_says_of_its_text_newlines_included():
    db = _context_db(len)  # a counter that counts every character, newlines too
    for budget in range(40, 900, 23):
        block = db.context("dinner", session="s", token_budget=budget, recent_turns=4, now=T0 + 20 * DAY)
        assert block.tokens_used == len(block.text) <= budget, budget
        assert block.tokens_used == sum(block.tokens_by_section.values())
    assert block.recalled and block.recent and block.pinned  # the widest budget holds every section


def test_a_counter_that_does_not_add_up_line_by_line_still_keeps_the_block_in_budget():
    def counter(s):  # two characters a token, rounded down: a whole costs more than its pieces
        return len(s) // 2

    db = _context_db(counter)
    trimmed = 0
    for budget in range(20, 450, 11):
        block = db.context("dinner", session="s", token_budget=budget, recent_turns=4, now=T0 + 20 * DAY)
        assert block.tokens_used == counter(block.text) <= budget, budget
        trimmed += block.cut_recalled + block.cut_recent
    assert trimmed  # some budgets cut memories to fit
