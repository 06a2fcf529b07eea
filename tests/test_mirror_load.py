"""Opening a database fills the mirror column by column; it must equal the mirror the
writer built one document at a time (every reserved column, the as-of bounds, the scopes)."""

import numpy as np

from vxmem import Vectrix
from vxmem.store.mirror.mirror import COLUMNS

from helpers import DAY, T0


def _state(m):
    # Vectors by position: where each lies in the heap (``slot``) is the mirror's own affair.
    cols = {name: getattr(m, name)[: m.n] for name in COLUMNS if name not in ("heap", "slot")}
    cols["vectors"] = m.vectors(np.arange(m.n))
    # A session's code is the order it was first seen in (a deleted row's session too): compare keys.
    cols["session"] = np.array([m.session_keys[c] if c >= 0 else "" for c in cols["session"].tolist()])
    sessions = {m.session_keys[c]: pos for c in range(len(m.session_keys)) if (pos := m.session_positions(c).tolist())}
    return cols, list(m.ids), list(m.texts), m.latest, sessions, set(m.session_codes), dict(m.user_codes)


def test_an_opened_mirror_equals_the_one_the_writer_built(tmp_path, word_embedder):
    path = str(tmp_path / "m.db")
    db = Vectrix(path, embedder=word_embedder)
    t = T0
    ids = []
    for i in range(60):
        t += DAY / 7
        ids.append(db.remember(f"turn {i} about topic {i % 5}", session=f"s{i % 3}", kind="turn",
                               user=f"u{i % 2}" if i % 4 else None, timestamp=t))
    fact = db.remember("the user lives in Lisbon", session="s0", kind="fact", user="u1", timestamp=t)
    db.feedback(fact, "corrected", correction="the user lives in Porto", timestamp=t + DAY)
    db.feedback(ids[3], "useful", timestamp=t + 2 * DAY)
    db.remember("vegetarian", session=None, pinned=True, timestamp=t, ttl_days=30)
    db.add(["a plain document"], metadata=[{"topic": "x"}])
    db.forget(ids=[ids[5]])
    with db.engine.locked() as m:
        written = _state(m)
    db.close()
    reopened = Vectrix(path, embedder=word_embedder, read_only=True)
    with reopened.engine.locked() as m:
        loaded = _state(m)
    reopened.close()
    wcols, *wrest = written
    lcols, *lrest = loaded
    # The writer's positions keep the forgotten document's hole; the opened mirror has none.
    keep = wcols["alive"]
    for name in wcols:
        np.testing.assert_array_equal(wcols[name][keep], lcols[name], err_msg=name)
    w_ids, w_texts, w_latest, _, w_sessions, w_users = wrest
    l_ids, l_texts, l_latest, _, l_sessions, l_users = lrest
    assert [i for i, k in zip(w_ids, keep) if k] == l_ids
    assert [x for x, k in zip(w_texts, keep) if k] == l_texts
    assert l_latest == w_latest and l_latest == t + 2 * DAY
    # s0-s2 of no user, of u0 and of u1, and None
    assert w_users == l_users and set(l_sessions) == set(w_sessions) and len(l_sessions) == 10
