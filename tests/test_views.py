"""The dashboard's frames and helpers (vxmem.workbench.views), without Streamlit."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from vxmem.memory.stages import PRESETS
from vxmem.models.rerank import default_reranker
from vxmem.ranking import scoring
from vxmem.workbench import views
from vxmem.workbench.datasets import DatasetError
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.policies import POLICIES
from vxmem.workbench.synth import generate

RANGES = {"half_life_days": (0.5, 180.0), "recency_weight": (0.0, 2.0), "feedback_weight": (0.0, 2.0),
          "feedback_half_life_days": (1.0, 180.0), "limit": (1, 20), "token_budget": (0, 2000),
          "hybrid_weight": (0.0, 1.0)}
SEED = [
    {"time": 0.0, "type": "turn", "label": "m1", "session": "s", "text": "I prefer dark mode in every editor."},
    {"time": 60.0, "type": "turn", "label": "m2", "session": "s", "text": "My sister lives in Lisbon."},
    {"time": 120.0, "type": "feedback", "label": "m3", "target": "m1", "outcome": "corrected",
     "correction": "Actually I switched to light mode."},
]


def test_settings_travel_through_a_url_and_back():
    s = {**views.DEFAULT_SETTINGS, "half_life_days": 30.0, "limit": 5, "mode": "lexical"}
    query = views.settings_to_query(s, views.DEFAULT_SETTINGS)
    assert query == {"half_life_days": "30", "limit": "5", "mode": "lexical"}
    back, problems = views.check_settings(query, RANGES)
    assert back == s and problems == []


@pytest.mark.parametrize("raw, problem", [
    ({"half_life_days": "0"}, "half_life_days '0'"),
    ({"limit": "2.5"}, "limit '2.5': expected a whole number"),
    ({"recency_weight": "lots"}, "not a number"),
    ({"mode": "semantic"}, "mode 'semantic'"),
    ({"embedder": "gpt"}, "embedder 'gpt'"),
    ({"colour": "red"}, "unknown setting 'colour'"),
])
def test_a_bad_setting_is_named_and_left_at_its_default(raw, problem):
    out, problems = views.check_settings(raw, RANGES)
    assert out == views.DEFAULT_SETTINGS
    assert len(problems) == 1 and problem in problems[0]


def test_settings_export_as_json_and_import_back():
    s = {**views.DEFAULT_SETTINGS, "feedback_weight": 1.25, "token_budget": 300}
    back, problems = views.settings_from_json(views.settings_json(s), RANGES)
    assert back == s and not problems
    with pytest.raises(ValueError, match="not a settings file"):
        views.settings_from_json("[1, 2]", RANGES)


def test_the_snippet_is_python_that_ranks_the_same_way():
    s = {**views.DEFAULT_SETTINGS, "half_life_days": 3.0, "mode": "hybrid", "hybrid_weight": 0.25, "limit": 4,
         "embedder": "hashing"}
    code = views.settings_snippet(s)
    compile(code, "snippet", "exec")
    assert "Vectrix(" in code and "half_life_days=3.0" in code and "hybrid_weight=0.25" in code
    assert "limit=4" in code and "mode='hybrid'" in code and "HashingEmbedder()" in code
    from vxmem import Vectrix
    from vxmem.models.embed import HashingEmbedder

    scope = {"Vectrix": Vectrix, "HashingEmbedder": HashingEmbedder, "query": "dark mode", "session": "s"}
    exec(code.replace('"chat.vxdb"', "None"), scope)  # runs: a real memory, a real recall
    assert scope["db"].memory.half_life_days == 3.0


def test_point_of_keeps_the_hybrid_weight_only_for_hybrid_pools():
    s = {**views.DEFAULT_SETTINGS, "hybrid_weight": 0.3}
    assert "hybrid_weight" not in views.point_of({**s, "mode": "dense"})
    assert views.point_of({**s, "mode": "hybrid"})["hybrid_weight"] == 0.3


def test_the_playground_saves_as_a_dataset_and_reads_back():
    s = {**views.DEFAULT_SETTINGS, "half_life_days": 12.0, "limit": 3}
    text = views.playground_jsonl(SEED, 3600.0, "which theme?", "s", s, "rule_key_value", ["m3"])
    (conv,) = views.load_bytes("playground.jsonl", text.encode())
    assert conv.meta["settings"]["half_life_days"] == 12.0 and conv.meta["judge"] == "rule_key_value"
    rep = replay(conv)
    assert rep.settings["limit"] == 3 and rep.probes[0]["relevant"] == ["m3"]
    back = views.playground_state(text)
    assert back["now"] == 3600.0 and back["query"] == "which theme?" and back["relevant"] == ["m3"]
    assert [e["label"] for e in back["events"]] == ["m1", "m2", "m3"]
    assert back["events"][1]["time"] == 60.0


def test_the_playground_explains_its_recall():
    out = views.playground_recall(SEED, "which theme do I like?", "s", 3600.0, views.DEFAULT_SETTINGS)
    why = out["why"].set_index("label")
    assert why.loc["m1", "reason"] == "superseded" and why.loc["m3", "reason"] == "returned"
    assert out["ranking"]["label"].tolist() == why[why["reason"] == "returned"].sort_values("rank").index.tolist()
    assert out["low_relevance"] is None or isinstance(out["low_relevance"], float)


def test_a_low_match_probability_does_not_warn_when_a_memory_marked_relevant_is_returned():
    level, text = views.relevance_note(0.47, None, "hybrid", "colbert", probability=0.28)
    assert level == "warning" and "nothing here may answer" in text and "28%" in text
    level, text = views.relevance_note(0.47, None, "hybrid", "colbert", probability=0.28, answered_at=1)
    assert level == "caption" and "28%" in text and "returned at rank 1" in text
    assert "nothing here may answer" not in text
    ranking = pd.DataFrame({"rank": [1, 2, 3], "relevant": [False, True, True]})
    assert views.first_relevant_rank(ranking) == 2
    assert views.first_relevant_rank(ranking.assign(relevant=False)) is None


def test_relevance_note_warns_below_the_threshold_and_always_shows_the_raw_figure():
    level, text = views.relevance_note(0.02, 0.1, "dense")
    assert level == "warning" and "0.020" in text and "0.100" in text
    level, text = views.relevance_note(0.4, 0.1, "dense")
    assert level == "caption" and "0.400" in text
    level, text = views.relevance_note(0.02, None, "lexical")
    assert level == "caption" and "0.020 (BM25)" in text


def test_low_relevance_is_read_when_the_memory_has_it():
    class Memory:
        def low_relevance(self, mode=None, rerank=None):
            return 0.2 if mode == "dense" else None

    assert views.low_relevance_of(Memory(), "dense") == 0.2
    assert views.low_relevance_of(Memory(), "lexical") is None
    assert views.low_relevance_of(object(), "dense") is None


def test_budget_replay_gives_every_probe_what_context_budgets_gives_one():
    conv = generate("preference_drift", weeks=3)
    every = views.budget_replay(conv, [50, 200], recent_turns=2)
    assert len(every) == len(conv.probes)
    one = views.context_budgets(conv, 1, [50, 200], recent_turns=2)
    pd.testing.assert_frame_equal(every[1]["sections"], one["sections"])
    assert every[1]["texts"] == one["texts"]


def test_point_report_gives_intervals_for_all_tune_and_holdout_probes():
    reps = [replay(generate("many_users", users=2)), replay(generate("feedback_loop"))]
    rep = views.point_report(reps, views.DEFAULT_POINT, n_boot=200)
    assert set(rep["subset"]) == {"all", "tune", "holdout"}
    assert (rep["lo"] <= rep["mean"] + 1e-12).all() and (rep["mean"] <= rep["hi"] + 1e-12).all()
    allp = rep[(rep["subset"] == "all") & (rep["metric"] == "hit")].iloc[0]
    # unanswerable probes have no hit to score (NaN): the count is of the probes scored
    scored = sum(1 for r in reps for p in r.probes if p["hit"] == p["hit"])
    assert 0 < scored < sum(r.n_probes for r in reps) and allp["probes"] == scored


def test_rank_movement_flags_the_probes_that_move():
    rep = replay(generate("preference_drift", weeks=4))
    flat = views.rank_movement([rep], views.DEFAULT_POINT, "feedback_weight", [0.0, 1.0, 2.0])
    assert not flat["moves"].any()  # no feedback in these pools
    moving = views.rank_movement([rep], views.DEFAULT_POINT, "recency_weight", [0.0, 1.0, 2.0])
    assert moving["moves"].any()


def test_stale_above_at_counts_ranked_pairs():
    rep = replay(generate("preference_drift", weeks=4), {"pool_limit": 20})
    rate, pairs = views.stale_above_at([rep], {**views.DEFAULT_POINT, "limit": 20})
    assert pairs > 0 and 0.0 <= rate <= 1.0
    high, _ = views.stale_above_at([rep], {**views.DEFAULT_POINT, "limit": 20, "recency_weight": 0.0})
    assert not math.isnan(high)


def test_a_chat_log_upload_is_read_and_a_bad_one_named():
    conv = views.chatlog_from_bytes("mine.csv", b"session,role,text\na,user,hello there\na,assistant,hi\n")
    assert conv.name == "mine" and views.turn_table(conv)["label"].tolist() == ["a:0", "a:1"]
    with pytest.raises(DatasetError, match="mine.csv"):
        views.chatlog_from_bytes("mine.csv", b"\xff\xfe\x00")
    with pytest.raises(DatasetError, match="Import page"):
        views.load_bytes("mine.csv", b"session,role,text\na,user,hello there\n")


def test_the_sweeps_pareto_points_are_those_nothing_beats():
    frame = pd.DataFrame({"ndcg": [0.9, 0.8, 0.9, 0.5], "stale_leak": [0.1, 0.0, 0.2, 0.0],
                          "tokens": [100.0, 50.0, 100.0, 60.0]})
    assert views.pareto_points(frame)["pareto"].tolist() == [True, True, False, False]


def test_explain_at_the_replay_settings_returns_the_recorded_recall():
    rep = replay(generate("contradicting_facts"), views.REPLAY_SETTINGS)
    for i in range(rep.n_probes):
        why = views.explain(rep, i, views.DEFAULT_POINT)
        assert views.returned(why)["rank"].tolist() == list(range(1, len(rep.probes[i]["recalled_ids"]) + 1))
        ids = why[why["reason"] == "returned"].sort_values("rank")["id"].tolist()
        assert ids == rep.probes[i]["recalled_ids"]
    assert np.isfinite(views.returned(views.explain(rep, 0, views.DEFAULT_POINT))["relevance"]).all()


def test_ages_from_access_travel_through_the_settings_into_the_replay_and_the_snippet():
    s = {**views.DEFAULT_SETTINGS, "recency_from": "accessed", "embedder": "hashing"}
    back, problems = views.check_settings(views.settings_to_query(s, views.DEFAULT_SETTINGS), RANGES)
    assert back == s and not problems
    _, problems = views.check_settings({"recency_from": "touched"}, RANGES)
    assert len(problems) == 1 and "recency_from" in problems[0]
    assert views.replay_settings(s)["recency_from"] == "accessed"
    assert "recency_from" not in views.replay_settings(views.DEFAULT_SETTINGS)
    code = views.settings_snippet(s)
    assert "recency_from='accessed'" in code
    from vxmem import Vectrix
    from vxmem.models.embed import HashingEmbedder

    scope = {"Vectrix": Vectrix, "HashingEmbedder": HashingEmbedder, "query": "dark mode", "session": "s"}
    exec(code.replace('"chat.vxdb"', "None"), scope)
    assert scope["db"].memory.recency_from == "accessed"


def test_the_budget_blocks_of_a_replay_aging_from_access_are_looks_not_events(hashing_embedder):
    from vxmem.workbench.synth import generate

    conv = generate("preference_drift", users=1)
    s = {**views.DEFAULT_SETTINGS, "recency_from": "accessed", "mode": "dense"}
    one = views.budget_replay(conv, [300], s, embedder=hashing_embedder)
    many = views.budget_replay(conv, [100, 300, 2000], s, embedder=hashing_embedder)
    # more budgets asked at each probe change nothing of what any one of them gets
    assert [p["texts"][300] for p in one] == [p["texts"][300] for p in many]


def test_a_look_at_a_memory_aging_from_access_ranks_by_it_and_records_nothing(word_embedder):
    from vxmem import Vectrix
    from vxmem.workbench.views.replays import unrecorded_look

    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    a = db.remember("my cat is called Miso", session="s", timestamp=0.0)
    db.recall("Miso", session="s", now=86400.0)
    rows = db.engine.database.conn.execute("SELECT count(*) FROM vx_access").fetchone()[0]
    look = unrecorded_look(db.memory)
    block = look.context("Miso", session="s", recent_turns=0, now=2 * 86400.0, recency_from=db.memory.recency_from)
    assert [r.id for r in block.recalled] == [a]
    assert block.recalled[0].metadata["_vx_scoring"]["age_days"] == 1.0  # aged from the recall a day before
    assert db.engine.database.conn.execute("SELECT count(*) FROM vx_access").fetchone()[0] == rows == 1
    assert db.memory.recency_from == "accessed"  # the memory itself is unchanged


def test_a_reranking_default_embedder_replays_per_hybrid_weight(monkeypatch):
    # with vxmem's own default (bge-small, which reranks) the hybrid weight decides which
    # candidates a replay's pools rerank, so the workbench records one replay per weight
    from vxmem.workbench.views import settings as view_settings

    monkeypatch.setattr(view_settings, "reranks_by_default", lambda embedder: True)
    s = {**views.DEFAULT_SETTINGS, "mode": "hybrid", "hybrid_weight": 0.3, "embedder": "default"}
    assert views.replay_settings(s)["hybrid_weight"] == 0.3
    assert "hybrid_weight" not in views.replay_settings({**s, "embedder": "hashing"})
    monkeypatch.setattr(view_settings, "reranks_by_default", lambda embedder: False)
    assert "hybrid_weight" not in views.replay_settings(s)


def test_the_pages_views_of_a_reranked_hybrid_replay_keep_its_own_weight(hashing_embedder):
    from vxmem.workbench.replay.run import replay
    from vxmem.workbench.synth import generate

    def overlap(query, texts):  # a deterministic word-overlap reranker
        q = set(query.lower().split())
        return [float(len(q & set(t.lower().split()))) for t in texts]

    rep = replay(generate("knowledge_update"), {"rerank": True, "reranker": overlap, "pool_limit": 10,
                                                "mode": "hybrid"}, embedder=hashing_embedder)
    assert rep.rerank is not None and rep.hybrid_weight == 0.5
    slider = {**views.DEFAULT_POINT, "hybrid_weight": 0.2}  # a slider the pools were not reranked at
    frame, summary = views.ab_frames([rep], slider, {**slider, "recency_weight": 1.0})
    assert len(frame) == rep.n_probes
    assert not views.why_table(views.explain(rep, 0, slider)).empty
    at_own = views.probe_metrics_at([rep], {**views.DEFAULT_POINT, "hybrid_weight": 0.5})
    assert len(at_own) == rep.n_probes


# ---------------------------------------------------------------- presets and policies against their cost


@pytest.fixture(scope="module")
def preset_replays(hashing_embedder):
    """knowledge_update (where the presets recall differently) replayed with each preset, without the
    replay cache, so each recall is timed as a live one. At two thirds of its default size: 140 turns,
    still more than the 120 late interaction reads, and 13 probes of every category."""
    conv = generate("knowledge_update", facts=3, weeks=6, per_day=2)
    return {p: [replay(conv, views.preset_settings({"embedder": "hashing"}, p), embedder=hashing_embedder,
                       cache=False)] for p in PRESETS}


def _dominated(frame, i):
    """Whether another row of ``frame`` has at least row i's recall at no more ms, and is better on one."""
    r, ms = frame.loc[i, "recall"], frame.loc[i, "ms_per_recall"]
    return bool(((frame["recall"] >= r) & (frame["ms_per_recall"] <= ms)
                 & ((frame["recall"] > r) | (frame["ms_per_recall"] < ms))).any())


def test_every_preset_with_every_policy_and_every_system_is_a_point(preset_replays):
    systems = pd.DataFrame({"system": ["bm25", "oracle"], "recall": [0.5, 1.0], "ms_per_recall": [0.01, 1e6],
                            "probes": [15, 15]})
    frame = views.presets_quality_cost(preset_replays, systems)
    policies = frame[frame["kind"] == "policy"]
    assert len(frame) == len(PRESETS) * len(POLICIES) + 2
    assert set(zip(policies["preset"], policies["policy"])) == {(p, q) for p in PRESETS for q in POLICIES}
    assert "default · blend" in set(frame["label"]) and frame["kind"].tolist()[-2:] == ["system", "system"]
    for preset, reps in preset_replays.items():
        mine = policies[policies["preset"] == preset].set_index("policy")
        live = np.nanmean([p["recall"] for r in reps for p in r.probes])  # what the probe rows report
        assert mine.loc["blend", "recall"] == pytest.approx(live, abs=1e-12)
        ms = mine["ms_per_recall"]  # every policy re-ranks the preset's pool: the preset's own time
        assert np.isfinite(ms).all() and (ms > 0).all() and ms.nunique() == 1
        assert ms.iloc[0] == views.median_recall_ms(reps)
    assert len(set(policies["recall"].round(6))) > 1  # the presets and policies do differ here
    for i in frame.index:
        assert frame.loc[i, "on_front"] == (not _dominated(frame, i))
    shorter = views.presets_quality_cost(preset_replays, point={"limit": 1, "token_budget": 0})
    assert (shorter["recall"].to_numpy() <= frame["recall"].to_numpy()[:len(shorter)] + 1e-12).all()


def test_median_times_carry_intervals_and_overlapping_ones_are_named_untold():
    few, many = np.array([3.0, 9.0, 4.0]), np.array([5.0, 5.1, 4.9, 5.05, 4.95] * 20)
    lo, hi = views.median_interval(few)
    assert 3.0 <= lo < 4.0 < hi <= 9.0  # three recalls: the median may be anywhere among them
    lo, hi = views.median_interval(many)
    assert 4.9 <= lo <= 5.0 <= hi <= 5.1  # a hundred: the interval is tight
    assert all(math.isnan(v) for v in views.median_interval(np.array([np.nan])))
    table = pd.DataFrame({"preset": ["fast", "default", "accurate"], "ms_p50_lo": [1.0, 2.0, 20.0],
                          "ms_p50_hi": [2.5, 4.0, 30.0]})
    assert views.untold_timings(table) == [("fast", "default")]  # accurate is told apart from both


def test_the_presets_table_gives_each_preset_its_quality_per_millisecond(preset_replays):
    table = views.presets_table(preset_replays)
    assert table["preset"].tolist() == list(PRESETS)
    assert table["depth"].tolist() == [10, 120, 120]  # fast's top k; late interaction's 120, which accurate reads too
    for row in table.to_dict("records"):
        (rep,) = preset_replays[row["preset"]]
        probes = pd.DataFrame(rep.probes)
        assert row["recall"] == pytest.approx(probes["recall"].mean(), abs=1e-12)  # the live recall
        assert row["recall_lo"] <= row["recall"] <= row["recall_hi"] and row["probes"] == rep.n_probes
        assert row["mrr"] == pytest.approx(probes["rr"].mean(), abs=1e-12)  # how high the first relevant one sits
        by_category = probes.groupby("category")["recall"].mean().dropna()  # "unanswerable" has nothing to find
        assert {c: row[f"recall · {c}"] for c in by_category.index} == pytest.approx(by_category.to_dict())
        assert not [c for c in row if c.startswith("recall · ") and c.removeprefix("recall · ") not in by_category]
        coverage = views.stage_coverage(rep)
        assert 0 <= row["coverage"] <= 1 and row["coverage"] == pytest.approx(np.nanmean(coverage))
        ms = [p["recall_ms"] for p in rep.probes]
        assert row["ms_p50"] == pytest.approx(np.median(ms)) and row["ms_p99"] >= row["ms_p50"] > 0
        assert min(ms) <= row["ms_p50_lo"] <= row["ms_p50"] <= row["ms_p50_hi"] <= max(ms)
        assert math.isfinite(row["ms_per_write"]) and row["ms_per_write"] > 0
    assert (table["ms_per_write"].to_numpy() > 0).all() and table["ms_p99"].notna().all()


@pytest.fixture(scope="module")
def cross_encoder_replay(hashing_embedder):
    """knowledge_update replayed with a cross-encoder of the caller's as the only second stage."""
    return replay(generate("knowledge_update"), {"rerank": True, "reranker": default_reranker()},
                  embedder=hashing_embedder, cache=False)


def test_coverage_counts_the_relevant_the_second_stage_reads(cross_encoder_replay, preset_replays):
    rep = cross_encoder_replay  # the cross-encoder reads the first stage's 20 most relevant
    coverage = views.stage_coverage(rep)
    for i in range(rep.n_probes):
        read = rep.pool(i)  # the candidates its recall reranked (record.reranked_pool)
        n = rep.pools["n_relevant"][i]
        assert len(read) == 20 and views.stage_depth(rep, rep.probes[i]["limit"]) == 20
        want = np.count_nonzero(read.grade > 0) / n if n else math.nan
        assert coverage[i] == pytest.approx(want, nan_ok=True)
    # By hand: one relevant memory among the 20 read, one in the pool beyond them, one outside the pool.
    ids = list(rep.pool_ids[0][: int(rep.pools["n"][0])])
    inside = ids.index(rep.pool(0).ids[0])
    outside = next(j for j, m in enumerate(ids) if m not in set(rep.pool(0).ids))
    grade, n_relevant = np.zeros_like(rep.pools["grade"]), rep.pools["n_relevant"].copy()
    grade[0, [inside, outside]], n_relevant[0] = 1.0, 3
    made = dataclasses.replace(rep, pools={**rep.pools, "grade": grade, "n_relevant": n_relevant})
    assert views.stage_coverage(made)[0] == pytest.approx(1 / 3)
    (fast,) = preset_replays["fast"]  # fast: its top k by the neighbour-smoothed first stage
    for i in range(fast.n_probes):
        pool, k = fast.pool(i), fast.probes[i]["limit"]
        top = scoring.rank_order(pool.relevance, pool.ts)[:k]
        n = fast.pools["n_relevant"][i]
        want = np.count_nonzero(pool.grade[top] > 0) / n if n else math.nan
        assert views.stage_coverage(fast)[i] == pytest.approx(want, nan_ok=True)


def test_the_quality_cost_front_on_a_hand_made_table():
    systems = pd.DataFrame({"system": ["a", "b", "c", "d", "e", "f"], "recall": [0.9, 0.8, 1.0, np.nan, 0.95, 0.9],
                            "ms_per_recall": [1.0, 2.0, 5.0, 0.1, np.nan, 1.0]})
    frame = views.presets_quality_cost({}, systems)
    # b is beaten by a; c is the best recall; a NaN is never on the front; a and f tie, neither beats the other
    assert frame["on_front"].tolist() == [True, False, True, False, False, True]
    assert frame["probes"].tolist() == [0] * 6
    with pytest.raises(KeyError, match="ms_per_recall"):
        views.presets_quality_cost({}, systems.drop(columns=["ms_per_recall"]))


def test_spot_labels_write_one_label_where_points_coincide():
    frame = pd.DataFrame({
        "label": ["fast · blend", "fast · cosine", "fast · memorybank", "default · blend", "bm25", "vxmem"],
        "kind": ["policy"] * 4 + ["system"] * 2, "preset": ["fast"] * 3 + ["default", None, None],
        "policy": ["blend", "cosine", "memorybank", "blend", None, None],
        "recall": [0.9, 0.9, 0.5, 1.0, 1.0, 0.4], "ms_per_recall": [1.0, 1.0, 1.0, 3.0, 3.0, 2.0],
        "on_front": [True, True, False, True, True, False]})
    spots = views.spot_labels(frame)  # the front's spots only: vxmem is beaten
    assert spots["text"].tolist() == ["fast · blend, cosine", "default · blend, bm25"]
    assert spots["above"].tolist() == [False, True]  # neighbours on either side of the front
    assert views.spot_labels(frame.assign(on_front=False)).empty


def test_preset_settings_name_the_preset_whatever_the_embedder():
    for embedder in ("hashing", "default"):
        s = {**views.DEFAULT_SETTINGS, "embedder": embedder, "mode": "hybrid", "hybrid_weight": 0.3}
        assert [views.preset_settings(s, p)["preset"] for p in PRESETS] == list(PRESETS)
        assert views.preset_settings(s, "accurate")["hybrid_weight"] == 0.3  # it decides what the stage reads
        assert views.preset_settings({**s, "embedder": "hashing"}, "fast").get("hybrid_weight") is None
        assert views.preset_settings({**s, "mode": "dense"}, "default")["mode"] == "dense"
    with pytest.raises(ValueError, match="preset"):
        views.preset_settings({}, "turbo")


@pytest.mark.parametrize("load", [views.load_bytes, views.conversation_from_bytes])
def test_an_upload_of_no_known_format_points_at_the_pages_format_box(load):
    with pytest.raises(DatasetError, match="pick it in the Format box") as err:
        load("notes.txt", b"dear diary\n")
    assert "format=" not in str(err.value)


def test_a_policy_names_the_shared_sliders_it_ignores_and_offers_its_own_parameters():
    names = ("half_life_days", "recency_weight", "feedback_weight", "feedback_half_life_days", "limit",
             "token_budget")
    ignored = views.ignored_by("langchain", views.DEFAULT_SETTINGS, names)
    assert set(ignored) == {"half_life_days", "recency_weight", "feedback_weight", "feedback_half_life_days"}
    assert "langchain policy scores by" in ignored["recency_weight"]
    assert views.policy_params("langchain") == {"decay_rate": 0.01}
    assert set(views.ignored_by("multiplicative", views.DEFAULT_SETTINGS, names)) == set(ignored) - {"half_life_days"}
    at_zero = views.ignored_by("blend", {**views.DEFAULT_SETTINGS, "recency_weight": 0.0}, names)
    assert list(at_zero) == ["half_life_days"] and "recency_weight is 0" in at_zero["half_life_days"]


def _grid_frame(x, xs, y, ys, metric, value):
    rows = [{x: a, y: b, metric: value(a, b), "point": i * len(ys) + j} for i, a in enumerate(xs)
            for j, b in enumerate(ys)]
    return pd.DataFrame(rows)


def test_the_best_point_never_shrinks_the_limit_to_lower_a_leak():
    # stale-leak falls with the limit: a limit of 1 leaks least and returns almost nothing
    frame = _grid_frame("limit", [1, 5, 10, 20], "recency_weight", [0.0, 0.5, 1.0], "stale_leak",
                        lambda limit, w: limit / 20 - w / 10)
    assert views.best_row(frame, "stale_leak")["limit"] == 1  # what the page used to pick
    pick = views.pick_best(frame, "stale_leak", ("limit", "recency_weight"), {**views.DEFAULT_POINT, "limit": 10})
    assert pick.row["limit"] == 10 and pick.row["recency_weight"] == 1.0
    assert pick.values == {"recency_weight": 1.0}  # the limit is the user's, not the sweep's
    assert any("`limit` is held at 10" in n for n in pick.notes)


def test_tied_points_lean_to_the_default_and_an_inert_half_life_is_left_alone():
    # recency weight 0 is best, and there the half-life multiplies nothing: every half-life ties
    frame = _grid_frame("half_life_days", [1.0, 7.0, 30.0, 90.0], "recency_weight", [0.0, 0.25, 0.5], "ndcg",
                        lambda h, w: 0.8 - w / 10)
    assert views.best_row(frame, "ndcg")["half_life_days"] == 1.0  # the first on ties, as the page used to
    pick = views.pick_best(frame, "ndcg", ("half_life_days", "recency_weight"), views.DEFAULT_POINT)
    assert pick.tied == 4 and pick.values == {"recency_weight": 0.0}
    assert pick.row["half_life_days"] == views.DEFAULT_POINT["half_life_days"]
    assert any("`half_life_days` has no effect" in n and "recency_weight is 0" in n for n in pick.notes)
    # ties where both parameters count lean to the point nearest the defaults, whatever the grid's order
    flat = _grid_frame("recency_weight", [2.0, 1.0, 0.5], "feedback_weight", [2.0, 0.25], "ndcg", lambda w, f: 0.5)
    pick = views.pick_best(flat, "ndcg", ("recency_weight", "feedback_weight"), views.DEFAULT_POINT)
    assert pick.values == {"recency_weight": 0.5, "feedback_weight": 0.25}


def test_compare_chooses_each_best_on_tune_probes_and_reports_it_on_held_out_ones(hashing_embedder):
    from vxmem.workbench.sweep.holdout import split_probes
    from vxmem.workbench.sweep.run import sweep

    reps = [replay(generate(name), {"pool_limit": 20}, embedder=hashing_embedder)
            for name in ("knowledge_update", "preference_drift", "contradicting_facts")]
    table = views.compare_policies(reps, "ndcg").set_index(["policy", "setting"])
    split = split_probes(reps)
    for policy, param in (("multiplicative", "half_life_days"), ("memorybank", "strength_days")):
        grid = views.POLICY_GRIDS[policy][param]
        per = sweep(reps, {param: grid}, policy=policy).per_probe
        tune = {v: per[per[param] == v]["ndcg"].to_numpy()[split.tune] for v in grid}
        hold = {v: per[per[param] == v]["ndcg"].to_numpy()[split.holdout] for v in grid}
        best = table.loc[(policy, "best")]
        chosen = float(best["params"].split("=")[1])
        assert np.nanmean(tune[chosen]) == pytest.approx(max(np.nanmean(t) for t in tune.values()))
        assert best["ndcg"] == pytest.approx(np.nanmean(hold[chosen]))  # reported on the held-out probes
        assert best["probes"] <= split.holdout.sum() < len(split.holdout) / 2
        assert best["tuned_on"] == split.tune.sum()


def test_honest_tuning_breaks_ties_toward_the_defaults_not_the_grids_first_point(hashing_embedder):
    from vxmem.workbench.sweep.holdout import split_probes, tune_holdout

    reps = [replay(generate("preference_drift"), {"pool_limit": 20}, embedder=hashing_embedder)]
    # recency weight 0 only: every half-life ranks alike, so all tie on the tune probes
    res = tune_holdout(reps, {"half_life_days": [1.0, 3.0, 7.0, 30.0], "recency_weight": [0.0]}, split_probes(reps))
    assert res.best["half_life_days"] == views.DEFAULT_POINT["half_life_days"]  # not 1, the grid's first
