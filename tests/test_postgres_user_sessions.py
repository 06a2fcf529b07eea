"""A session belongs to its user on PostgreSQL too, and a database of schema 3 (one session name
shared by every user, a server's sessions stored as ``user/session``) is migrated once on open."""

import json

import psycopg

from vxmem import Vectrix
from vxmem.store.postgres import schema

from helpers import DAY, T0

_OLD = {"u": "u/chat"}  # the session a schema-3 server stored u's "chat" as


def _as_schema_3(url):
    """Turn a database this vxmem wrote into the one schema 3 held: u's session "chat" stored as
    "u/chat", each session keyed by its name alone, one turn counter per session name (which had
    numbered every user's turns of that name)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for rowid, metadata in conn.execute("SELECT rowid, metadata FROM vx_docs WHERE user_id IS NOT NULL"
                                            ).fetchall():
            meta = json.loads(metadata)
            if meta.get("_vx_session") == "chat" and meta.get("_vx_user") in _OLD:
                meta["_vx_session"] = _OLD[meta["_vx_user"]]
            conn.execute("UPDATE vx_docs SET metadata = %s, session_key = %s WHERE rowid = %s",
                         (json.dumps(meta), json.dumps(meta.get("_vx_session")), rowid))
        shared = {'turn:["u", "chat"]': 'turn:"u/chat"', 'turn:["ann", "shared"]': 'turn:"shared"',
                  'turn:["bob", "shared"]': 'turn:"shared"'}
        for new, old in shared.items():
            conn.execute("INSERT INTO vx_counters (name, value) SELECT %s, value FROM vx_counters WHERE name = %s "
                         "ON CONFLICT (name) DO UPDATE SET value = vx_counters.value + excluded.value",
                         (old, new))
            conn.execute("DELETE FROM vx_counters WHERE name = %s", (new,))
        conn.execute("UPDATE vx_meta SET value = '3' WHERE key = 'schema_version'")


def test_a_schema_3_database_moves_each_users_rows_to_sessions_of_their_own(pg_url, word_embedder):
    with Vectrix(pg_url, embedder=word_embedder) as db:
        db.remember("I like green tea", session="chat", user="u", timestamp=T0)
        db.remember("and the weather is cold", session="chat", user="u", timestamp=T0 + 60)
        db.remember("ann says tea please", session="shared", user="ann", timestamp=T0 + 120)
        db.remember("bob says coffee please", session="shared", user="bob", timestamp=T0 + 180)
        db.remember("ann says milk too", session="shared", user="ann", timestamp=T0 + 240)
    _as_schema_3(pg_url)
    with Vectrix(pg_url, embedder=word_embedder) as db:
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0] == str(
                schema.SCHEMA_VERSION)
        assert [t.text for t in db.turns("chat", user="u", now=T0 + DAY)] == ["I like green tea",
                                                                              "and the weather is cold"]
        for mode in ("lexical", "dense"):
            got = db.recall("green tea", session="chat", user="u", mode=mode, now=T0 + DAY)
            assert got[0].text == "I like green tea", mode
        assert [t.text for t in db.turns("shared", user="bob", now=T0 + DAY)] == ["bob says coffee please"]
        # The shared counter stood at 3: each user's session goes on from there, no number given twice.
        bob = db.remember("bob again", session="shared", user="bob", timestamp=T0 + DAY)
        assert db.get(bob).metadata["_vx_turn"] == 3
        assert db.get(db.remember("u again", session="chat", user="u", timestamp=T0 + DAY)).metadata["_vx_turn"] == 2
    scoped = f"{pg_url}{'&' if '?' in pg_url else '?'}scope=user"
    with Vectrix(scoped, embedder=word_embedder) as db:  # a scoped handle reads the moved rows
        assert [t.text for t in db.turns("chat", user="u", now=T0 + 2 * DAY)] == [
            "I like green tea", "and the weather is cold", "u again"]
        # A filter on a session's name matches it in every user's sessions, scoped handle or not.
        assert len(list(db.scan({"_vx_session": "shared"}))) == 4
        assert len(db.search("tea coffee", filter={"_vx_session": "shared"}, limit=10)) == 4
