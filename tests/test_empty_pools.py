"""An empty pool (a query in a session with nothing in it yet) ranks to an empty result everywhere."""

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.cli import main
from vxmem.ranking import scoring
from vxmem.workbench import views
from vxmem.workbench.analysis.why import why_recalled
from vxmem.workbench.datasets import load_jsonl
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import sweep

from helpers import T0

EMPTY_SESSION = (
    '{"format": "vxmem-conversation/1", "name": "empty_session"}\n'
    '{"time": "2024-01-01T09:00:00Z", "type": "turn", "session": "a", "text": "I like green tea", "label": "t1"}\n'
    '{"time": "2024-01-02T09:00:00Z", "type": "probe", "session": "b", "query": "what tea do I like?", '
    '"relevant": []}\n')


def word_overlap(query, texts):
    """A reranker of the caller's own: the words a text shares with the query."""
    q = set(query.lower().split())
    return np.array([len(q & set(t.lower().split())) for t in texts], dtype=np.float64)


RERANKED = {"rerank": True, "reranker": word_overlap}


@pytest.fixture
def empty_session(tmp_path):
    path = tmp_path / "empty_session.jsonl"
    path.write_text(EMPTY_SESSION)
    return path


def test_normalising_an_empty_pool_gives_an_empty_array():
    empty = np.zeros((1, 0))
    assert scoring.normalize_relevance(empty, valid=np.zeros((1, 0), bool)).shape == (1, 0)
    assert scoring.fuse_relevance(empty, empty, 0.5).shape == (1, 0)
    assert scoring.fuse_relevance(empty, empty, 0.5, valid=np.zeros((1, 0), bool)).shape == (1, 0)


def test_recall_in_an_empty_session_returns_nothing():
    db = Vectrix(embedder="hashing")
    db.remember("I like green tea", session="a", timestamp=T0)
    assert len(db.recall("what tea do I like?", session="b", now=T0 + 1)) == 0


@pytest.mark.parametrize("settings", [{}, RERANKED], ids=["plain", "reranked"])
def test_a_replay_probe_in_an_empty_session_records_an_empty_result(empty_session, hashing_embedder, settings):
    rep = replay(load_jsonl(empty_session), settings, embedder=hashing_embedder)
    assert rep.probes[0]["recalled_ids"] == [] and rep.probes[0]["pool"] == 0
    assert len(rep.pool(0)) == 0


@pytest.mark.parametrize("settings", [{}, RERANKED], ids=["plain", "reranked"])
def test_a_sweep_and_why_over_an_empty_pool_rank_nothing(empty_session, hashing_embedder, settings):
    rep = replay(load_jsonl(empty_session), settings, embedder=hashing_embedder)
    per_point = sweep(rep, {"half_life_days": [1.0, 7.0], "limit": [5, 10]}).per_point
    assert len(per_point) == 4 and (per_point["n_results"] == 0).all()
    why = why_recalled(rep, 0)
    assert why["reason"].tolist() == ["other_session"] and why["rank"].isna().all()


@pytest.mark.parametrize("embedder", ["hashing", "default"])  # default: bge-small and the cross-encoder's rerank
def test_vxmem_replay_on_an_empty_session_probe_exits_0(empty_session, capsys, embedder):
    assert main(["replay", str(empty_session), "--embedder", embedder]) == 0
    assert "1 probes" in capsys.readouterr().out


def test_the_playground_recall_of_an_empty_session_is_empty():
    events = [{"time": T0, "type": "turn", "session": "a", "text": "I like green tea", "label": "m1"}]
    for evs in ([], events):
        out = views.playground_recall(evs, "what tea do I like?", "b", T0 + 60, dict(views.DEFAULT_SETTINGS),
                                      embedder=views.embedder_for("hashing"))
        assert len(out["ranking"]) == 0


def test_recall_with_a_rerank_in_an_empty_session_returns_nothing():
    db = Vectrix(embedder="hashing", rerank=True, reranker=word_overlap)
    db.remember("I like green tea", session="a", timestamp=T0)
    assert len(db.recall("what tea do I like?", session="b", now=T0 + 1)) == 0


def test_replays_without_a_probe_score_nothing_under_every_policy_and_preset(hashing_embedder):
    from vxmem.workbench.datasets.model import Conversation, Event
    from vxmem.workbench.sweep.policies import POLICIES

    turns = Conversation(name="turns", events=[Event(T0, "turn", label="a", session="s", text="I live in Lisbon."),
                                               Event(T0 + 60, "turn", label="b", session="s", text="I drive a car.")])
    reps = {p: views.replay_all([turns], views.preset_settings({"embedder": "hashing"}, p), hashing_embedder,
                                cache=False) for p in ("fast", "default")}
    for name in POLICIES:  # the access-aged ones rank probe by probe: none to rank
        row = sweep(reps["fast"], {"limit": [10]}, policy=name).per_point.iloc[0]
        assert row["probes"] == 0 and np.isnan(row["recall"]), name
    table = views.compare_policies(reps["fast"])
    assert (table["probes"] == 0).all() and table["hit_lo"].isna().all()
    costs = views.presets_quality_cost(reps)
    assert costs["recall"].isna().all() and not costs["on_front"].any()
    assert (views.presets_table(reps)["probes"] == 0).all()
    assert scoring.take_last(np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)).shape == (0, 3)
