"""Every workbench page renders and reacts (streamlit's AppTest, no browser)."""

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages import config
from vxmem.memory import ConversationMemory
from vxmem.workbench import views
from vxmem.workbench.datasets import load_jsonl
from vxmem.workbench.replay.run import replay

# Every chart these pages draw is built from channel objects (conftest's fixture says why).
pytestmark = pytest.mark.usefixtures("charts_from_channel_objects")

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TITLES = {None: "Playground", "replay": "Replay", "tune": "Tune", "sweep": "Sweep", "ab": "A/B", "budget": "Budget",
          "compare": "Compare", "importer": "Import", "qa": "QA"}

OPENAI_CHAT = (
    b'{"conversation_id": "bike", "messages": [{"role": "system", "content": "be brief"}, '
    b'{"role": "user", "content": "I ordered a wide gel saddle for my road bike"}, '
    b'{"role": "assistant", "content": "Nice, gel saddles help on long rides"}, '
    b'{"role": "user", "content": "The weather was lovely at the lake today"}]}\n'
    b'{"conversation_id": "food", "messages": [{"role": "user", "content": "I am allergic to peanuts"}]}\n')


@pytest.fixture(autouse=True)
def sessions_dir(tmp_path, monkeypatch):
    """Saved playgrounds go to a temporary directory, not the home directory."""
    from app_pages import config

    monkeypatch.setattr(config, "SESSIONS_DIR", tmp_path / "sessions")
    return tmp_path / "sessions"


def page(name=None, dataset=None, query=None) -> AppTest:
    """A new session opened on page ``name`` (the Playground when None), as a link to that page
    opens it: its first run is that page's, not the Playground's first (about a second each).
    Before its first run AppTest knows a page only by its file's name, and Import's URL path is
    "import", not "importer": that one page is reached from the Playground's first run."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query or {})
    if dataset in views.shipped_datasets(config.DATASETS)["name"].tolist() and "dataset" not in at.query_params:
        at.query_params["dataset"] = dataset  # as a link opens it: the first run is on it (no default's replay)
    if name not in (None, "importer"):
        at.switch_page(f"app_pages/{name}.py")
    at.run()
    assert not at.exception, at.exception
    if name == "importer":
        at.switch_page("app_pages/importer.py").run()
        assert not at.exception, at.exception
    assert at.title[0].value == TITLES[name], [t.value for t in at.title]  # the page asked for, not the default
    if dataset is not None and at.selectbox(key="dataset_choice").value != dataset:
        at.selectbox(key="dataset_choice").set_value(dataset).run()  # Import, reached from the Playground
        assert not at.exception, at.exception
    return at


def metric_values(at):
    return {m.label: m.value for m in at.metric}


def charts(at):
    return at.get("vega_lite_chart")


def specs(at):
    return [json.loads(c.proto.spec) for c in charts(at)]


def texts(elements):
    return " ".join(e.value for e in elements)


def shown(elements) -> str:
    """The text of ``elements`` as a reader sees it: Markdown's backslash escapes (what a page puts before
    the special characters of text it did not write) removed."""
    return re.sub(r"\\(.)", r"\1", texts(elements))


def grade_box(at):
    """The Playground's grade box (keyed by what was ranked, so each ranking offers a fresh choice)."""
    return next(w for w in at.selectbox if str(w.key).startswith("pg_graded"))


# ---------------------------------------------------------------- Playground


def test_playground_ranks_the_correction_first_and_draws_score_parts():
    at = page()
    assert not at.error
    ranking = at.dataframe[0].value
    assert "light mode" in ranking.iloc[0]["text"]
    assert "I prefer dark mode" not in " ".join(ranking["text"])  # superseded: out of recall
    assert {"relevance", "relevance_norm"} <= set(ranking.columns)  # raw beside normalised
    assert charts(at), "the stacked bar of score parts is missing"
    # the assistant's fresh question (m7) is ranked at the pool's floor, and the page says why
    assert ranking.set_index("label").loc["m7", "asks_only"]
    assert any(c.value.startswith("m7 only asks") for c in at.caption)
    chains = at.dataframe[1].value
    assert chains["label"].tolist() == ["m2", "m4"]  # the supersession chain, oldest first


def test_playground_shows_why_each_memory_was_or_was_not_recalled():
    at = page()
    why = at.dataframe[2].value.set_index("label")
    assert why.loc["m4", "reason"] == "returned" and why.loc["m4", "rank"] == 1
    assert why.loc["m2", "reason"] == "superseded"
    assert set(why["reason"]) <= {"returned", "superseded", "out_ranked", "outside_pool", "expired"}


def test_playground_ticks_the_memories_marked_relevant_and_forgets_them_with_the_query():
    at = page()
    assert at.multiselect(key="pg_relevant").value == ["m4"]  # the seed query's answer
    why = at.dataframe[2].value.set_index("label")
    assert bool(why.loc["m4", "relevant"]) and not why.drop(index="m4")["relevant"].any()
    at.multiselect(key="pg_relevant").set_value(["m4", "m3"]).run()
    assert at.dataframe[2].value.set_index("label")["relevant"].sum() == 2
    at.text_input(key="pg_query").set_value("where does my sister live?").run()
    assert not at.exception
    assert at.multiselect(key="pg_relevant").value == []  # marks for the last question do not carry over
    assert not at.dataframe[2].value["relevant"].any()


def test_playground_score_bars_keep_every_label_and_a_few_ticks_at_limit_three():
    at = page(query={"limit": "3"})
    spec = specs(at)[0]
    enc = spec.get("encoding") or spec["layer"][0]["encoding"]
    assert enc["y"]["axis"]["labelOverlap"] is False  # Vega dropped the middle one of three labels
    assert enc["x"]["axis"]["tickCount"] <= 5
    assert spec["height"] >= 150


def test_playground_half_life_slider_changes_the_scores():
    at = page()
    before = at.dataframe[0].value["score"].tolist()
    at.slider(key="set_half_life_days").set_value(120.0).run()
    assert not at.exception
    assert at.dataframe[0].value["score"].tolist() != before


def test_playground_remembers_a_fact_and_moves_the_clock():
    at = page()
    clock = at.markdown[0].value
    at.button(key="pg_step_+1 month").click().run()
    assert at.markdown[0].value != clock
    at.text_area(key="pg_text").set_value("I switched back to dark mode after all").run()
    at.radio(key="pg_kind").set_value("fact").run()
    at.button(key="pg_remember").click().run()
    assert not at.exception and not at.error
    assert "I switched back to dark mode after all" in at.dataframe[0].value["text"].tolist()


def test_playground_grading_a_result_dead_end_lowers_its_feedback():
    at = page()
    top = at.dataframe[0].value.iloc[0]["label"]
    grade_box(at).set_value(top).run()
    at.button(key="pg_dead_end").click().run()
    assert not at.exception and not at.error
    row = at.dataframe[0].value.set_index("label").loc[top]
    assert row["feedback"] < 0


def test_playground_correction_extends_the_chain():
    at = page()
    at.selectbox(key="pg_target").set_value("m3").run()
    at.text_input(key="pg_correction").set_value("My sister Ana moved from Lisbon to Porto.").run()
    at.button(key="pg_correct").click().run()
    assert not at.exception and not at.error
    chains = at.selectbox(key="pg_chain").options
    assert any("m3" in c for c in chains)


@pytest.fixture
def fresh_caches():
    """Streamlit's caches outlive an AppTest; a test that changes the library clears them."""
    import streamlit as st

    st.cache_data.clear()
    yield
    st.cache_data.clear()


def test_a_nonsense_query_shows_the_raw_relevance_and_warns(monkeypatch, fresh_caches):
    # ConversationMemory.low_relevance comes with the semantic default; the page
    # reads it when it is there. Here it is given, as that method will give it.
    monkeypatch.setattr(ConversationMemory, "low_relevance", lambda self, mode=None, rerank=None: 0.1,
                        raising=False)
    at = page(query={"mode": "dense"})  # a cosine: the scale the threshold is on
    at.text_input(key="pg_query").set_value("zzqqxx").run()
    ranking = at.dataframe[0].value
    assert ranking.iloc[0]["relevance_norm"] == 1.0 or ranking["relevance_norm"].max() == 1.0
    assert ranking["relevance"].max() < 0.1
    assert at.warning and "Weak match" in at.warning[0].value
    assert f"{ranking['relevance'].max():.3f}" in at.warning[0].value


def test_without_a_threshold_the_raw_relevance_is_still_shown(monkeypatch, fresh_caches):
    # a pipeline with no absolute scale (BM25, an unreranked hybrid) gives no threshold
    monkeypatch.setattr(ConversationMemory, "low_relevance", lambda self, mode=None, rerank=None: None)
    at = page()
    at.text_input(key="pg_query").set_value("zzqqxx").run()
    best = at.dataframe[0].value["relevance"].max()
    said = (texts(at.caption) + " " + texts(at.warning)).lower()
    assert "raw relevance" in said and f"{best:.3f}" in said


def test_the_playground_download_is_a_dataset_the_replay_page_loads():
    at = page()
    at.checkbox(key="pg_judge").check().run()
    at.slider(key="set_half_life_days").set_value(30.0).run()
    labels = [d.proto.label for d in at.get("download_button")]
    assert any(label.startswith("Download this session") for label in labels)
    text = views.playground_jsonl(*_playground_args(at))
    convs = views.load_bytes("playground.jsonl", text.encode())
    conv = convs[0]
    (probe,) = conv.probes
    assert probe.query == at.text_input(key="pg_query").value and probe.relevant == {"m4": 1.0}
    assert conv.meta["judge"] == "rule_key_value" and conv.meta["settings"]["half_life_days"] == 30.0
    saved = views.playground_state(text)
    assert saved["query"] == probe.query and saved["settings"]["limit"] == 10


def _playground_args(at):
    s = at.session_state
    settings = s["settings"]
    return (s["pg_events"], s["pg_now"], s["pg_kept"]["query"], s["pg_kept"]["session"], settings,
            "rule_key_value" if s["pg_kept"]["judge"] else None, s["pg_kept"]["relevant"])


def test_a_reload_restores_the_playground_from_its_url(sessions_dir):
    at = page()
    at.text_area(key="pg_text").set_value("I adopted a cat named Miso").run()
    at.button(key="pg_remember").click().run()
    at.text_input(key="pg_query").set_value("what is my cat called?").run()
    key = at.query_params["pg"]
    assert (sessions_dir / f"playground-{key}.jsonl").exists()
    again = page(query={"pg": key})  # a new session: what a reload or a shared link gets
    assert again.text_input(key="pg_query").value == "what is my cat called?"
    assert "I adopted a cat named Miso" in again.dataframe[0].value["text"].tolist()
    assert "Restored" in texts(again.success)


def test_a_downloaded_session_uploads_back():
    at = page()
    at.slider(key="set_recency_weight").set_value(1.5).run()
    text = views.playground_jsonl(*_playground_args(at))
    fresh = page()
    fresh.file_uploader(key="pg_upload").upload("playground.jsonl", text.encode()).run()
    assert not fresh.exception
    assert fresh.slider(key="set_recency_weight").value == 1.5
    assert "Restored" in texts(fresh.success)


# ---------------------------------------------------------------- the shared state and the URL


def test_a_parameter_set_on_one_page_is_the_value_on_another_and_in_the_url():
    at = page("tune")
    at.slider(key="set_half_life_days").set_value(30.0).run()
    assert at.query_params["half_life_days"] == "30"
    at.switch_page("app_pages/replay.py").run()
    assert at.slider(key="set_half_life_days").value == 30.0
    assert at.query_params["half_life_days"] == "30"


def test_a_url_carries_the_settings_to_any_page():
    at = page("sweep", query={"recency_weight": "0", "limit": "5", "dataset": "many_users"})
    assert at.session_state["settings"]["recency_weight"] == 0.0 and at.session_state["settings"]["limit"] == 5
    at.switch_page("app_pages/tune.py").run()
    assert at.slider(key="set_limit").value == 5
    assert at.selectbox(key="dataset_choice").value == "many_users"
    assert len(at.table[0].value) <= 5


def test_a_bad_url_value_is_named_and_left_at_the_default():
    at = page("tune", query={"half_life_days": "9999", "mode": "magic"})
    assert at.slider(key="set_half_life_days").value == 7.0
    warned = shown(at.warning)
    assert "half_life_days '9999'" in warned and "mode 'magic'" in warned


def test_settings_import_back_from_their_json_export():
    at = page("tune")
    exported = views.settings_json({**at.session_state["settings"], "feedback_weight": 1.0, "limit": 4})
    at.file_uploader(key="settings_upload").upload("s.json", exported.encode()).run()
    at.button(key="settings_apply").click().run()
    assert at.slider(key="set_feedback_weight").value == 1.0 and at.slider(key="set_limit").value == 4
    assert "Vectrix(" in at.code[0].value and "feedback_weight=1.0" in at.code[0].value


def test_the_search_mode_is_a_control_and_replays_once_for_a_new_mode():
    at = page("tune")
    assert at.selectbox(key="set_mode").value == "hybrid"  # the library's default pipeline
    assert at.slider(key="set_hybrid_weight").value == 0.5
    before = metric_values(at)
    at.selectbox(key="set_mode").set_value("lexical").run()
    assert not at.exception
    assert not [s for s in at.slider if s.key == "set_hybrid_weight"]  # a weight only hybrid has
    assert metric_values(at) != before
    assert at.query_params["mode"] == "lexical"


def test_ages_from_access_are_a_control_that_replays_once_and_travels_in_the_url():
    at = page("tune")
    before = metric_values(at)
    at.selectbox(key="set_recency_from").set_value("accessed").run()
    assert not at.exception
    assert at.query_params["recency_from"] == "accessed"
    assert metric_values(at) != before  # the replay's recalls age from their own accesses now
    assert "recency_from='accessed'" in at.code[0].value
    again = page("tune", query={"recency_from": "accessed"})
    assert again.selectbox(key="set_recency_from").value == "accessed"
    assert metric_values(again) == metric_values(at)


# ---------------------------------------------------------------- Replay


def test_replay_page_shows_the_timeline_and_the_recall_at_a_probe():
    at = page("replay")
    assert not at.error
    assert charts(at), "the timeline chart is missing"
    results = at.dataframe[1].value
    assert {"rank", "label", "text", "relevant", "stale"} <= set(results.columns)
    assert len(results) > 0


def test_the_default_probe_shows_recall_working():
    at = page("replay")
    results = at.dataframe[1].value
    assert results["relevant"].head(3).any(), "the first probe's relevant memory is not in the top 3"


def test_replay_shows_score_parts_raw_relevance_and_why():
    at = page("replay")
    results = at.dataframe[1].value
    assert {"score", "relevance", "relevance_norm", "recency", "feedback"} <= set(results.columns)
    assert any("contribution" in json.dumps(s) for s in specs(at)), "no score breakdown chart"
    why = next(d.value for d in at.dataframe if "reason" in d.value)  # the why table
    assert {"reason", "detail"} <= set(why.columns) and (why["reason"] == "returned").sum() == len(results)


def test_replay_probe_slider_changes_what_recall_returned():
    at = page("replay")
    before = at.dataframe[1].value["text"].tolist()
    slider = at.select_slider(key="replay_probe")
    slider.set_value(len(slider.options) - 1).run()  # the values are probe numbers
    assert not at.exception
    assert at.dataframe[1].value["text"].tolist() != before


def test_replay_of_the_locomo_fixture_marks_relevant_evidence():
    at = page("replay", dataset="fixtures/locomo_sample.json")
    assert not at.error
    assert at.dataframe[1].value is not None


def test_replay_labels_consolidated_and_expired_turns_by_the_event_that_deleted_them():
    at = page("replay", dataset="long_thread")
    caption = next(c.value for c in at.caption if c.value.startswith("Dotted lines"))
    # long_thread's expire and consolidate events delete turns at shared moments; the caption
    # counts each memory by the event that deleted it, as the replay's own events count them
    # (batches the summarizer finds nothing in keep their turns, so not every old turn goes).
    deleted: dict[str, int] = {}
    for e in replay(load_jsonl(ROOT / "datasets" / "long_thread.jsonl")).events:
        deleted[e["type"]] = deleted.get(e["type"], 0) + e["deleted"]
    assert deleted["consolidate"] > 0 and deleted["expire"] > 0
    assert f"{deleted['consolidate']} consolidated" in caption and f"{deleted['expire']} expired" in caption


def test_replay_timeline_legends_sit_below_the_chart_unclipped():
    at = page("replay")
    spec = json.dumps(specs(at)[0])
    assert '"orient": "bottom"' in spec


# ---------------------------------------------------------------- Tune


def test_tune_page_shows_metrics_with_intervals_and_a_ranking():
    at = page("tune")
    assert not at.error
    labels = [m.label for m in at.metric]
    assert labels == ["hit@k", "MRR", "nDCG@k", "stale-leak@k"]
    assert sum("95% CI" in c.value for c in at.caption) == 4
    assert len(at.table) == 1 and len(at.table[0].value) == 10
    assert {"score", "relevance (raw)", "rel. norm", "recency", "feedback"} <= set(at.table[0].value.columns)
    assert charts(at), "the rank-movement chart is missing"
    assert "Stale ranked above its replacement" in texts(at.caption)


def test_tune_half_life_slider_changes_metrics_and_ranking():
    at = page("tune", dataset="preference_drift")
    metrics, ranking = metric_values(at), at.table[0].value["text"].tolist()
    at.slider(key="set_half_life_days").set_value(180.0).run()
    assert not at.exception
    assert metric_values(at) != metrics
    assert at.table[0].value["text"].tolist() != ranking


def test_tune_limit_slider_shortens_the_ranking():
    at = page("tune")
    at.slider(key="set_limit").set_value(3).run()
    assert len(at.table[0].value) == 3


def test_tune_says_when_no_probe_changes_rank():
    # preference_drift has no feedback in its pools: the feedback weight moves nothing.
    at = page("tune", dataset="preference_drift")
    at.selectbox(key="tune_vary").set_value("feedback_weight").run()
    assert not at.exception
    assert any("None of the" in i.value and "changes rank" in i.value for i in at.info)
    assert not any("of 24 probes with a relevant memory change rank" in c.value for c in at.caption)
    assert "has no effect here" in texts(at.caption)  # and the slider is flagged inert


def test_tune_colours_the_probes_that_move_with_enough_distinct_colours():
    at = page("tune", dataset="preference_drift")
    spec = json.dumps(specs(at)[-1])
    assert "tableau20" in spec and '"symbolLimit": 0' in spec
    picked = next(w for w in at.multiselect if w.key.startswith("tune_picked"))
    assert 0 < len(picked.value) <= 10


# ---------------------------------------------------------------- Sweep


def test_sweep_page_draws_a_heatmap_with_best_and_current_and_offers_csv():
    at = page("sweep")
    assert not at.error
    assert charts(at), "the heatmap is missing"
    assert [m.label for m in at.metric][:2] == ["best nDCG@k", "current nDCG@k"]
    assert float(at.metric[0].value) >= float(at.metric[1].value)
    assert at.get("download_button"), "no CSV download"


def test_sweep_heatmap_has_one_marker_legend_readable_numbers_and_plain_ticks():
    at = page("sweep")
    heat = json.dumps(specs(at)[0])
    assert heat.count('"title": "marked"') == 3  # stroke, dash and width of one field: Vega-Lite draws one legend
    assert '"fill": null' in heat or '"filled": false' in heat  # an outline, not a marker over the number
    assert '"value": "black"' in heat  # dark numbers on the light (yellow) cells
    assert ".4~r" in heat  # 1150, not 1.15e+3


def test_sweep_outlines_the_current_point_even_on_the_best_one_and_says_when_it_is_off_the_grid():
    at = page("sweep")
    at.button(key="sweep_use_best").click().run()  # now the current point is the best one
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    spec = specs(at)[0]
    outline = next(layer for layer in spec["layer"] if "strokeWidth" in layer.get("encoding", {}))
    rows = [r for d in charts(at)[0].proto.datasets for r in convert_arrow_bytes_to_pandas_df(d.data.data)
            .to_dict("records") if isinstance(r.get("point"), str)]
    assert [r["point"] for r in rows] == ["best", "current"] and rows[0]["half_life_days"] == rows[1]["half_life_days"]
    width = outline["encoding"]["strokeWidth"]["scale"]
    assert width["domain"] == ["best", "current"] and width["range"][0] > width["range"][1]  # red round black
    at.slider(key="sweep_range_half_life_days").set_value((60.0, 180.0)).run()  # the current 7 days: off the grid
    assert "not on this grid" in texts(at.caption)
    outline = next(layer for layer in specs(at)[0]["layer"] if "strokeWidth" in layer.get("encoding", {}))
    assert outline["encoding"]["stroke"]["scale"]["domain"] == ["best"]  # no legend entry for a mark not drawn


def test_sweep_trade_off_legends_sit_below_the_chart():
    at = page("sweep", dataset="preference_drift")
    scatter = next(s for s in specs(at) if "tokens" in json.dumps(s) and '"circle"' in json.dumps(s))
    assert scatter["encoding"]["size"]["legend"]["orient"] == "bottom"
    assert scatter["encoding"]["color"]["legend"]["orient"] == "bottom"


def test_sweep_range_slider_changes_the_best_point():
    at = page("sweep")
    before = metric_values(at)
    at.slider(key="sweep_range_recency_weight").set_value((1.5, 2.0)).run()
    assert not at.exception
    assert metric_values(at) != before


def test_sweeps_best_point_becomes_the_current_settings_in_one_click():
    at = page("sweep")
    best = at.markdown[[m.value.startswith("**best point**") for m in at.markdown].index(True)].value
    at.button(key="sweep_use_best").click().run()
    s = at.session_state["settings"]
    labels = {"half-life (days)": "half_life_days", "recency weight": "recency_weight"}
    said = dict(part.split(" = ") for part in best.removeprefix("**best point**: ").split(", "))
    assert said and all(float(v) == s[labels[k]] for k, v in said.items()), (said, s)
    at.switch_page("app_pages/tune.py").run()
    assert at.slider(key="set_half_life_days").value == s["half_life_days"]


def test_sweep_shows_a_pareto_front_and_a_holdout_report():
    at = page("sweep")
    assert any("Pareto front" in c.value for c in at.caption)
    report = next(d.value for d in at.dataframe if "subset" in d.value.columns)
    assert set(report["subset"]) == {"tune", "holdout"}


# ---------------------------------------------------------------- A/B


def test_ab_page_counts_wins_losses_and_ties_and_lists_the_biggest_changes():
    at = page("ab")
    assert not at.error
    m = metric_values(at)
    probes = sum(int(m[k]) for k in ("B wins", "B loses", "ties"))
    assert probes > 0
    assert at.dataframe[0].value is not None


def test_ab_with_equal_sides_is_all_ties():
    at = page("ab")
    at.slider(key="ab_recency_weight").set_value(0.5).run()
    m = metric_values(at)
    assert m["B wins"] == "0" and m["B loses"] == "0"
    assert any("No probe changes" in i.value for i in at.info)


def test_ab_can_put_two_search_modes_side_by_side():
    at = page("ab")
    at.slider(key="ab_recency_weight").set_value(0.5).run()
    at.selectbox(key="ab_mode_b").set_value("lexical").run()
    assert not at.exception
    m = metric_values(at)
    assert int(m["B wins"]) + int(m["B loses"]) > 0


def test_ab_with_a_non_blend_policy_says_the_blend_sliders_do_nothing_and_shows_its_own():
    at = page("ab")
    at.selectbox(key="ab_policy_b").set_value("langchain").run()
    assert not at.exception
    said = shown(at.caption)
    for label in ("recency weight", "feedback weight", "half-life (days)"):
        assert f"B's {label} has no effect here" in said.replace("**", ""), said
        assert at.slider(key=f"ab_{config_key(label)}").disabled
    assert not at.slider(key="ab_limit").disabled  # every policy ships at most limit memories
    before = metric_values(at)
    at.slider(key="ab_b_decay_rate").set_value(0.2).run()  # LangChain's own parameter moves B
    assert not at.exception and metric_values(at) != before
    at.selectbox(key="ab_policy_a").set_value("cosine").run()
    assert "A's recency weight has no effect here" in shown(at.caption).replace("**", "")


def test_the_ab_scatter_legends_sit_below_it_unclipped():
    at = page("ab")
    scatter = next(layer for s in specs(at) for layer in s.get("layer", []) if "size" in layer.get("encoding", {}))
    assert scatter["encoding"]["size"]["legend"]["orient"] == "bottom"
    assert scatter["encoding"]["color"]["legend"]["orient"] == "bottom"


def config_key(label):
    return {"recency weight": "recency_weight", "feedback weight": "feedback_weight",
            "half-life (days)": "half_life_days"}[label]


# ---------------------------------------------------------------- Budget


def test_budget_page_splits_tokens_by_section_and_shows_the_text():
    at = page("budget")
    assert not at.error
    used, limit = at.metric[0].value.split(" / ")
    assert int(used) <= int(limit)
    assert at.code and at.code[0].value != "(empty)"
    assert charts(at)


def test_budget_slider_changes_the_tokens_used():
    at = page("budget")
    before = metric_values(at)
    at.select_slider(key="budget_tokens").set_value(50).run()
    assert not at.exception
    after = metric_values(at)
    assert after != before
    assert int(after["tokens used"].split(" / ")[0]) <= 50


def test_budget_shows_pinned_tokens_and_the_over_budget_note():
    at = page("budget", dataset="pinned_profile")
    assert int(metric_values(at)["pinned tokens"]) > 0
    at.select_slider(key="budget_tokens").set_value(50).run()
    assert at.warning and "pinned facts alone take" in at.warning[0].value


def test_budget_replays_once_for_every_probe_and_budget(monkeypatch):
    calls = []
    real = views.budget_replay

    def counted(conv, *a, **k):
        calls.append(conv.name)
        return real(conv, *a, **k)

    monkeypatch.setattr(views, "budget_replay", counted)
    at = page("budget", dataset="many_users")  # the default dataset first, unless another test replayed it
    for probe in at.selectbox(key="budget_probe").options[:4]:
        at.selectbox(key="budget_probe").set_value(probe).run()
        at.select_slider(key="budget_tokens").set_value(100).run()
    assert not at.exception
    assert calls.count("many_users") <= 1


# ---------------------------------------------------------------- Compare


def test_compare_page_has_every_policy_at_default_and_best():
    at = page("compare")
    assert not at.error
    table = at.dataframe[0].value
    assert set(table["policy"]) == {"blend", "cosine", "multiplicative", "langchain", "generative_agents",
                                    "memorybank"}
    assert sorted(table["setting"].unique()) == ["best", "default"]
    # each best is chosen on tune probes and reported, beside the default, on held-out ones: on those it may
    # lose to the default (what an in-sample "best" would hide)
    tuned = re.search(r"chosen on (\d+) tune probes; both rows are reported on the other (\d+), held out",
                      texts(at.caption))
    assert tuned and int(tuned[1]) > int(tuned[2]) > 0, texts(at.caption)


def test_compare_bars_have_y_axis_titles():
    at = page("compare")
    spec = json.dumps(specs(at))
    for title in ("hit@k (higher is better)", "MRR (higher is better)", "stale-leak@k (lower is better)"):
        assert title in spec


def test_compare_limit_slider_changes_the_metrics():
    at = page("compare")
    before = at.dataframe[0].value[["hit", "ndcg"]].to_numpy().tolist()
    at.slider(key="set_limit").set_value(2).run()
    assert not at.exception
    assert at.dataframe[0].value[["hit", "ndcg"]].to_numpy().tolist() != before


# ---------------------------------------------------------------- Import


def test_import_a_chat_log_write_a_probe_and_see_why_it_was_recalled():
    at = page("importer")
    at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT).run()
    assert not at.exception and not at.error
    turns = at.dataframe[0].value
    assert turns["label"].tolist() == ["bike:0", "bike:1", "bike:2", "food:0"]
    at.text_input(key="import_query").set_value("which saddle did I order for the bike?").run()
    at.multiselect(key="import_relevant").set_value(["bike:0"]).run()
    at.button(key="import_add").click().run()
    assert not at.exception and not at.error
    assert at.dataframe[1].value["query"].tolist() == ["which saddle did I order for the bike?"]
    why = at.dataframe[-1].value
    assert set(why["label"]) == {"bike:0", "bike:1", "bike:2", "food:0"}
    assert why.set_index("label").loc["bike:0", "reason"] == "returned"
    assert at.get("download_button")


def test_an_imported_chat_is_a_dataset_for_the_other_pages():
    at = page("importer")
    at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT).run()
    at.text_input(key="import_query").set_value("am I allergic to anything?").run()
    at.multiselect(key="import_relevant").set_value(["food:0"]).run()
    at.button(key="import_add").click().run()
    at.switch_page("app_pages/replay.py").run()
    at.selectbox(key="dataset_choice").set_value("Imported chat (Import page)").run()
    assert not at.exception and not at.error
    assert "peanuts" in " ".join(at.dataframe[1].value["text"])


def test_a_bad_chat_log_gets_a_clear_error():
    at = page("importer")
    at.file_uploader(key="import_upload").upload("chats.csv", b"who,what\nme,hi\n").run()
    assert not at.exception
    assert at.error and "chats.csv" in at.error[0].value and "column" in at.error[0].value


# ---------------------------------------------------------------- uploads


@pytest.mark.parametrize("name, content", [
    ("broken.jsonl", b'{"format": "vxmem-conversation/1", "name": "x"}\n{"time": "yesterday", "type": "turn"}\n'),
    ("broken.json", b"[{\"sample_id\": \"s1\", \"conversation\": 3}]"),
    ("notjson.json", b"\xff\xfe this is not json"),
])
def test_a_bad_upload_gets_a_clear_error_not_a_traceback(name, content):
    at = page("tune", dataset="Upload a file...")
    assert at.error  # asks for a file
    at.file_uploader(key="dataset_upload").upload(name, content).run()
    assert not at.exception
    assert at.error and "Cannot load" in at.error[0].value and name in at.error[0].value


def test_an_uploaded_longmemeval_file_is_replayed():
    data = (ROOT / "datasets" / "fixtures" / "longmemeval_sample.json").read_bytes()
    at = page("tune", dataset="Upload a file...")
    at.file_uploader(key="dataset_upload").upload("lme.json", data).run()
    assert not at.exception and not at.error
    assert len(at.metric) == 4


def test_the_dataset_choice_survives_a_visit_to_the_playground():
    at = page("tune", dataset="many_users")
    at.switch_page("app_pages/playground.py").run()
    at.switch_page("app_pages/tune.py").run()
    assert not at.exception
    assert at.selectbox(key="dataset_choice").value == "many_users"


def test_sweeps_best_stale_leak_keeps_the_limit_and_leaves_an_inert_half_life_alone():
    at = page("sweep", dataset="preference_drift")
    at.selectbox(key="sweep_x").set_value("limit").run()
    at.selectbox(key="sweep_metric").set_value("stale_leak").run()
    assert not at.exception
    assert "`limit` is held at 10" in texts(at.caption) or "limit is held at 10" in shown(at.caption)
    at.button(key="sweep_use_best").click().run()
    assert at.session_state["settings"]["limit"] == 10  # not 1, which leaks least by returning least
    at.selectbox(key="sweep_x").set_value("half_life_days").run()
    at.selectbox(key="sweep_metric").set_value("ndcg").run()
    at.slider(key="sweep_range_recency_weight").set_value((0.0, 0.0)).run()  # every point: recency off
    before = at.session_state["settings"]["half_life_days"]
    assert "half_life_days` has no effect at the best point" in texts(at.caption)
    at.button(key="sweep_use_best").click().run()
    assert at.session_state["settings"]["half_life_days"] == before
    assert at.session_state["settings"]["recency_weight"] == 0.0


def test_the_replay_timeline_is_tall_enough_and_dates_every_tick_with_its_year():
    at = page("replay", dataset="pinned_profile")  # one session: one lane, which used to be 70 px of plot
    spec = specs(at)[0]
    assert spec["height"]["step"] * len(set(views.memory_timeline(
        replay(load_jsonl(ROOT / "datasets" / "pinned_profile.jsonl"), {"limit": 10}))["lane"])) >= 220
    axis = next(layer["encoding"]["x"]["axis"] for layer in spec["layer"] if "axis" in layer["encoding"]["x"])
    assert axis["format"].startswith("%Y-%m-%d")  # not Vega's "March" / "Tue 05" / "12 PM" mix
    assert views.time_format(["2024-01-01T09:00Z", "2024-01-01T18:00Z"]) == "%Y-%m-%d %H:%M"
    assert views.time_format(["2024-01-01T09:00Z", "2024-03-01T18:00Z"]) == "%Y-%m-%d"
