"""One memory, served and in Python: what a server stores for a user is found by ``Vectrix`` with
that user, their session's name and the stored names of their ids, and what Python stores so is served."""

import httpx

from vxmem import Vectrix
from vxmem.serve.scope import served_id

from helpers import DAY, T0
from servers import rest_server


def test_what_rest_stores_python_finds_with_the_user_and_the_session(tmp_path):
    path = tmp_path / "both.vxdb"
    with rest_server(path) as url, httpx.Client(base_url=url, timeout=30) as c:
        said = c.post("/v1/remember", json={"user": "u", "session": "s", "id": "note-1", "timestamp": T0,
                                            "text": "the user prefers dark mode"})
        assert said.status_code == 200 and said.json() == {"id": "note-1"}, said.text
        with Vectrix(path, read_only=True) as db:
            found = db.recall("dark mode", user="u", session="s", now=T0 + DAY)
            assert [r.id for r in found] == [served_id("u", "note-1")]
            assert found[0].metadata["_vx_user"] == "u" and found[0].metadata["_vx_session"] == "s"
            assert [t.text for t in db.turns("s", user="u", now=T0 + DAY)] == ["the user prefers dark mode"]
            assert not db.recall("dark mode", user="v", session="s", now=T0 + DAY)  # another user's session s
            assert not db.recall("dark mode", session="s", now=T0 + DAY)  # the session s of no user
            assert db.turns("s", now=T0 + DAY) == []


def test_what_python_stores_for_a_user_rest_serves_to_that_user_alone(tmp_path):
    path = tmp_path / "both.vxdb"
    with Vectrix(path) as db:
        db.remember("the user lives in Paris", user="u", session="s", timestamp=T0)
        db.remember("the user plays chess", user="u", session="s", timestamp=T0 + 1, id=served_id("u", "chess"))
        db.remember("someone else's Paris", user="v", session="s", timestamp=T0 + 2)
    with rest_server(path) as url, httpx.Client(base_url=url, timeout=30) as c:
        hits = c.post("/v1/recall", json={"user": "u", "session": "s", "query": "Paris", "now": T0 + DAY}).json()
        assert [h["text"] for h in hits["results"]][:1] == ["the user lives in Paris"]
        assert {h["session"] for h in hits["results"]} == {"s"}
        turns = c.post("/v1/turns", json={"user": "u", "session": "s", "now": T0 + DAY}).json()["turns"]
        assert [t["text"] for t in turns] == ["the user lives in Paris", "the user plays chess"]
        assert [t["turn"] for t in turns] == [0, 1]  # u's own counter: v's turn is v's session's
        assert c.get("/v1/memories/chess", params={"user": "u"}).json()["text"] == "the user plays chess"
        assert c.get("/v1/memories/chess", params={"user": "v"}).status_code == 404
        other = c.post("/v1/recall", json={"user": "v", "session": "s", "query": "chess", "now": T0 + DAY}).json()
        assert [h["text"] for h in other["results"]] == ["someone else's Paris"] or other["results"] == []
