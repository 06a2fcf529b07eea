"""Replay: a conversation driven through a fresh memory on a simulated clock."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from vxmem.core.clock import DAY, to_epoch
from vxmem.workbench import views
from vxmem.workbench.datasets import Conversation, Event
from vxmem.workbench.replay.record import Replay
from vxmem.workbench.replay.run import replay, replay_many

T0 = to_epoch("2024-03-01T09:00:00Z")


def _conv():
    ev = [
        Event(T0, "turn", label="a", session="s1", text="I prefer dark mode for the editor."),
        Event(T0 + 60, "turn", label="b", session="s1", text="The weather in the editor's town is nice."),
        Event(T0 + 120, "turn", label="x", session="s2", text="I prefer light mode for the editor."),
        Event(T0 + 180, "fact", label="p", session="s1", text="The user's name is Kim.", pinned=True),
        Event(T0 + 240, "turn", label="tmp", session="s1", text="The door code is 1234 today.", ttl_days=1.0),
        Event(T0 + 0.5 * DAY, "probe", label="q1", session="s1", query="which editor mode do I prefer?",
              relevant={"a": 1}, category="before"),
        Event(T0 + 2 * DAY, "feedback", label="c", target="a", outcome="corrected",
              correction="I prefer light mode for the editor now."),
        Event(T0 + 2 * DAY + 60, "feedback", target="b", outcome="dead_end"),
        Event(T0 + 3 * DAY, "probe", label="q2", session="s1", query="which editor mode do I prefer?",
              relevant={"c": 2}, stale=["a"], category="after"),
        Event(T0 + 3 * DAY + 60, "probe", label="q3", session="s1", query="what is the door code?",
              stale=["tmp"], category="expired"),
        Event(T0 + 3 * DAY + 120, "expire"),
        Event(T0 + 4 * DAY, "forget", targets=("b",)),
        Event(T0 + 4 * DAY + 60, "feedback", target="b", outcome="useful"),
        Event(T0 + 5 * DAY, "probe", label="q4", session=None, query="editor mode", relevant=["c", "x"]),
    ]
    return Conversation("handmade", ev)


@pytest.fixture(scope="module")
def rep(request):
    emb = request.getfixturevalue("hashing_embedder")

    def on_probe(mem, ev, now):
        pool = mem.candidate_pool(ev.query, session=ev.session, limit=10, now=now)
        return {"recall": mem.recall(ev.query, session=ev.session, now=now).ids, "pool": pool}

    r = replay(_conv(), {"limit": 10}, embedder=emb, on_probe=on_probe)
    return r


def _labels(r, ids):
    lab = {m["id"]: m["labels"] for m in r.memories}
    return [tuple(lab[i]) for i in ids]


def test_each_probe_records_the_live_recall(rep):
    for probe, extra in zip(rep.probes, rep.extras):
        assert probe["recalled_ids"] == extra["recall"]


def test_each_probe_caches_the_candidate_pool(rep):
    for i, extra in enumerate(rep.extras):
        pool, cached = extra["pool"], rep.pool(i)
        assert cached.ids == pool.ids
        np.testing.assert_array_equal(cached.relevance, pool.relevance)
        np.testing.assert_array_equal(cached.age_days, pool.age_days)
        np.testing.assert_array_equal(cached.tokens, pool.tokens)
        assert cached.kinds == pool.kinds


def test_pool_flags_relevant_grades(rep):
    p0 = rep.pool(0)
    grades = dict(zip(_labels(rep, p0.ids), p0.grade))
    assert grades[("a",)] == 1.0 and grades[("b",)] == 0.0
    p1 = rep.pool(1)
    grades = dict(zip(_labels(rep, p1.ids), p1.grade))
    assert grades[("c",)] == 2.0


def test_corrected_memory_leaves_the_pool_and_counts_as_stale_elsewhere(rep):
    assert ("a",) not in _labels(rep, rep.pool(1).ids)
    assert rep.probes[1]["stale_leak"] == 0.0
    assert rep.probes[1]["n_relevant"] == 1


def test_feedback_history_is_in_the_pool(rep):
    p1 = rep.pool(1)
    b = _labels(rep, p1.ids).index(("b",))
    assert p1.feedback_signs[b].tolist()[:1] == [-1.0]
    assert p1.feedback_ages[b][0] == pytest.approx(1.0 - 60 / DAY)


def test_expired_turn_is_never_recalled(rep):
    assert ("tmp",) not in _labels(rep, rep.probes[2]["recalled_ids"])
    assert rep.probes[2]["stale_leak"] == 0.0


def test_probe_across_sessions_sees_every_session_and_no_foreign_flag(rep):
    p3 = rep.pool(3)
    assert set(_labels(rep, p3.ids)) >= {("c",), ("x",)}
    assert not p3.foreign.any()


def test_memories_frame_tracks_supersession_and_deletion(rep):
    mem = rep.to_frames()["memories"]
    by_label = {tuple(m["labels"]): m for m in rep.memories}
    assert by_label[("a",)]["superseded_at"] == T0 + 2 * DAY
    assert by_label[("tmp",)]["deleted"] == T0 + 3 * DAY + 120  # expire()
    assert by_label[("b",)]["deleted"] == T0 + 4 * DAY  # forget()
    assert len(mem) == 6  # five stored, one correction


def test_feedback_on_a_deleted_memory_is_skipped_and_reported(rep):
    ev = rep.to_frames()["events"]
    assert ev.loc[12, "status"].startswith("skipped")


def test_frames_have_events_memories_probes_and_pools(rep):
    frames = rep.to_frames()
    assert set(frames) == {"events", "memories", "probes", "pools"}
    assert len(frames["events"]) == len(_conv().events)
    assert list(frames["probes"]["category"][:3]) == ["before", "after", "expired"]
    pools = frames["pools"]
    top = pools.query("probe == 0 and rank == 1")["id"].item()
    assert top == rep.probes[0]["recalled_ids"][0]  # the blend at the replay's settings


def test_save_and_load_round_trip(rep, tmp_path):
    path = tmp_path / "r.npz"
    rep.save(path)
    back = Replay.load(path)
    assert back.settings == rep.settings and back.memories == rep.memories
    for name, frame in rep.to_frames().items():
        pd.testing.assert_frame_equal(back.to_frames()[name], frame)
    for k, v in rep.pools.items():
        np.testing.assert_array_equal(back.pools[k], v)


def test_each_probe_times_its_live_recall(rep, tmp_path):
    assert all(math.isfinite(p["recall_ms"]) and p["recall_ms"] > 0 for p in rep.probes)
    rep.save(tmp_path / "r.npz")
    assert [p["recall_ms"] for p in Replay.load(tmp_path / "r.npz").probes] == [p["recall_ms"] for p in rep.probes]
    assert views.median_recall_ms([rep]) > 0


def test_each_write_is_timed_and_kept_in_a_saved_replay(rep, tmp_path):
    writes = [e for e in rep.events if e["type"] in ("turn", "fact")]
    assert len(writes) == 5 and all(math.isfinite(e["write_ms"]) and e["write_ms"] > 0 for e in writes)
    assert all(math.isnan(e["write_ms"]) for e in rep.events if e["type"] not in ("turn", "fact"))
    rep.save(tmp_path / "r.npz")
    back = Replay.load(tmp_path / "r.npz")
    assert [e["write_ms"] for e in back.events if e["type"] in ("turn", "fact")] == [e["write_ms"] for e in writes]
    assert views.write_times([back]).tolist() == [e["write_ms"] for e in writes]
    table = views.presets_table({"default": [back]})
    assert table["ms_per_write"].item() == pytest.approx(np.median([e["write_ms"] for e in writes]))


def test_a_replay_saved_before_recalls_and_writes_were_timed_still_loads(rep, tmp_path):
    path = tmp_path / "old.npz"
    rep.save(path)
    with np.load(path, allow_pickle=False) as z:  # the file as it was written before: no recall_ms, no write_ms
        arrays = {k: z[k] for k in z.files}
    blob = json.loads(arrays.pop("_json").tobytes().decode("utf-8"))
    for p in blob["probes"]:
        del p["recall_ms"]
    for e in blob["events"]:
        del e["write_ms"]
    np.savez_compressed(path, _json=np.frombuffer(json.dumps(blob).encode("utf-8"), dtype=np.uint8), **arrays)
    old = Replay.load(path)
    assert old.to_frames()["probes"]["recall_ms"].isna().all()
    assert old.to_frames()["events"]["write_ms"].isna().all()
    assert math.isnan(views.median_recall_ms([old]))
    assert old.rank("blend") == rep.rank("blend")
    table = views.presets_table({"default": [old]})  # the quality still scores; the timings are NaN
    assert table[["ms_p50", "ms_p99", "ms_per_write"]].isna().all(axis=None)
    assert np.isfinite(table["recall"]).all()


def test_load_refuses_a_file_that_is_not_a_replay(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a saved replay"):
        Replay.load(bad)


def test_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="unknown setting 'half_life'"):
        replay(_conv(), {"half_life": 3})


def test_policy_choice_reranks_the_same_pool(hashing_embedder):
    r = replay(_conv(), embedder=hashing_embedder, policy="cosine")
    assert [p["ranked_ids"] for p in r.probes] == r.rank("cosine")
    assert r.meta["policy"] == "cosine"


def test_replay_many_in_parallel_equals_one_by_one(word_embedder):
    convs = [_conv(), _conv()]
    seq = replay_many(convs, embedder=word_embedder, n_jobs=1)
    par = replay_many(convs, embedder=word_embedder, n_jobs=2)
    cols = ["label", "n_relevant", "hit", "recall", "rr", "ndcg", "stale_leak"]
    for a, b in zip(par, seq):
        pd.testing.assert_frame_equal(a.to_frames()["probes"][cols], b.to_frames()["probes"][cols])
        assert [len(p["recalled_ids"]) for p in a.probes] == [len(p["recalled_ids"]) for p in b.probes]
