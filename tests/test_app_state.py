"""What the workbench keeps while the user moves around it: a limit above 10 on A/B, Sweep and Tune
(pools recorded wide enough, one replay for it), an uploaded dataset and every page's own settings
across a visit to another page, what a restored Playground did not take, a chat log's reordered
timestamps, and the memory a second correction replaced (streamlit's AppTest, no browser)."""

import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, ROOT, metric_values, page, sessions_dir, shown  # noqa: F401  (sessions_dir: autouse)

from vxmem.workbench import views

# Every chart these pages draw is built from channel objects (conftest's fixture says why).
pytestmark = pytest.mark.usefixtures("charts_from_channel_objects")

LONGMEMEVAL = (ROOT / "datasets" / "fixtures" / "longmemeval_sample.json").read_bytes()


@pytest.fixture
def replays(monkeypatch):
    """How many datasets the pages replay (the replays a cache already held are not counted)."""
    calls = []
    real = views.replay_all

    def counted(*args, **kwargs):
        calls.append(dict(args[1]) if len(args) > 1 else kwargs.get("settings"))
        return real(*args, **kwargs)

    monkeypatch.setattr(views, "replay_all", counted)
    return calls


def away_and_back(at, name: str, other: str = "tune"):
    """Visit page ``other``, then come back to page ``name``."""
    at.switch_page(f"app_pages/{other}.py").run()
    assert not at.exception, at.exception
    at.switch_page(f"app_pages/{name}.py").run()
    assert not at.exception, at.exception
    return at


# ---------------------------------------------------------------- a limit above 10 (hybrid pools)


def test_ab_compares_b_at_a_limit_above_ten():
    at = page("ab")
    at.slider(key="ab_limit").set_value(20).run()
    assert not at.exception and not at.error, shown(at.error)
    m = metric_values(at)
    assert sum(int(m[k]) for k in ("B wins", "B loses", "ties")) > 0
    changed = next(d.value for d in at.dataframe if "ranked_b" in d.value.columns)
    assert changed["ranked_b"].map(len).max() > 10  # B ranked at limit 20, A at 10
    assert changed["ranked_a"].map(len).max() <= 10
    at.run()  # the slider's value stays: the page keeps working
    assert not at.exception and not at.error


def test_ab_limits_share_one_replay(replays):
    at = page("ab")
    at.slider(key="ab_limit").set_value(15).run()
    at.slider(key="ab_limit").set_value(18).run()
    assert not at.exception and not at.error
    assert len(replays) <= 1, replays  # one replay, pools for every limit up to 20, serves both sides


def test_sweep_over_the_limit_runs_over_its_whole_range(replays):
    at = page("sweep")
    at.selectbox(key="sweep_x").set_value("limit").run()
    assert not at.exception and not at.error
    assert not any("Cannot sweep" in i.value for i in at.info), shown(at.info)
    assert at.slider(key="sweep_range_limit").value == (1, 20)
    best = next(m.value for m in at.markdown if m.value.startswith("**best point**"))
    assert "limit =" not in best  # the limit is the user's: held at the shared value, and said so
    assert any("`limit` is held at 10" in c.value for c in at.caption)
    at.slider(key="sweep_range_limit").set_value((5, 15)).run()
    assert not at.exception and not any("Cannot sweep" in i.value for i in at.info)
    at.switch_page("app_pages/tune.py").run()
    at.selectbox(key="tune_vary").set_value("limit").run()
    assert not at.exception
    assert len(replays) <= 1, replays  # one replay with pools for limit 20 serves the sweep and Tune


def test_tune_varies_the_limit_over_its_whole_range_at_the_same_metrics():
    at = page("tune")
    before = metric_values(at)
    at.selectbox(key="tune_vary").set_value("limit").run()
    assert not at.exception and not at.error
    assert not any("Cannot vary" in i.value for i in at.info), shown(at.info)
    assert any("change rank over this range" in c.value for c in at.caption) or \
        any("None of the" in i.value for i in at.info)
    assert metric_values(at) == before  # wider pools rank the limit of the sliders exactly as before


# ---------------------------------------------------------------- an upload survives a visit elsewhere


@pytest.mark.parametrize("other", ["playground", "importer"])
def test_an_uploaded_dataset_survives_a_visit_to_the_playground_or_import(other):
    at = page("tune", dataset="Upload a file...")
    at.selectbox(key="dataset_format").set_value("LongMemEval JSON").run()
    at.file_uploader(key="dataset_upload").upload("lme.json", LONGMEMEVAL).run()
    assert not at.exception and not at.error and len(at.metric) == 4
    before = metric_values(at)
    away_and_back(at, "tune", other)
    assert not at.error, shown(at.error)
    assert at.selectbox(key="dataset_choice").value == "Upload a file..."
    assert at.selectbox(key="dataset_format").value == "LongMemEval JSON"
    assert metric_values(at) == before
    assert "lme.json, uploaded earlier" in shown(at.sidebar.caption)


def test_removing_the_uploaded_file_forgets_it():
    at = page("tune", dataset="Upload a file...")
    at.file_uploader(key="dataset_upload").upload("lme.json", LONGMEMEVAL).run()
    assert len(at.metric) == 4
    at.file_uploader(key="dataset_upload").clear().run()
    assert not at.exception
    assert "Upload a file in the sidebar" in shown(at.error)
    away_and_back(at, "tune", "playground")
    assert "Upload a file in the sidebar" in shown(at.error)


# ---------------------------------------------------------------- each page's own settings survive too


def test_ab_settings_survive_a_visit_to_another_page():
    at = page("ab")
    at.slider(key="ab_half_life_days").set_value(30.0).run()
    at.selectbox(key="ab_policy_b").set_value("cosine").run()
    at.selectbox(key="ab_metric").set_value("ndcg").run()
    before = metric_values(at)
    away_and_back(at, "ab")
    assert at.slider(key="ab_half_life_days").value == 30.0
    assert at.selectbox(key="ab_policy_b").value == "cosine"
    assert at.selectbox(key="ab_metric").value == "ndcg"
    assert metric_values(at) == before


def test_sweep_axes_and_metric_survive_a_visit_to_another_page():
    at = page("sweep")
    at.selectbox(key="sweep_x").set_value("feedback_weight").run()
    at.selectbox(key="sweep_metric").set_value("mrr").run()
    at.slider(key="sweep_steps_feedback_weight").set_value(4).run()
    away_and_back(at, "sweep")
    assert at.selectbox(key="sweep_x").value == "feedback_weight"
    assert at.selectbox(key="sweep_metric").value == "mrr"
    assert at.slider(key="sweep_steps_feedback_weight").value == 4


def test_budget_settings_survive_a_visit_to_another_page():
    at = page("budget")
    at.select_slider(key="budget_tokens").set_value(50).run()
    at.number_input(key="budget_recent").set_value(3).run()
    away_and_back(at, "budget", "playground")
    assert at.select_slider(key="budget_tokens").value == 50
    assert at.number_input(key="budget_recent").value == 3
    assert int(metric_values(at)["tokens used"].split(" / ")[1]) == 50


def test_a_half_typed_probe_on_import_survives_a_visit_to_another_page():
    from test_app import OPENAI_CHAT

    at = page("importer")
    at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT).run()
    at.text_input(key="import_query").set_value("which saddle").run()
    at.multiselect(key="import_relevant").set_value(["bike:0"]).run()
    away_and_back(at, "importer", "replay")
    assert at.text_input(key="import_query").value == "which saddle"
    assert at.multiselect(key="import_relevant").value == ["bike:0"]
    other = OPENAI_CHAT.replace(b"saddle", b"bell")
    at.file_uploader(key="import_upload").upload("other.jsonl", other).run()  # a new file: a fresh form
    assert at.text_input(key="import_query").value == "" and at.multiselect(key="import_relevant").value == []


def test_a_kept_value_that_no_longer_fits_starts_its_widget_at_the_default():
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["widgets_kept"] = {"ab_limit": 999, "ab_metric": "nonsense", "budget_tokens": "lots",
                                        "tune_vary": "nonsense"}
    at.run()
    at.switch_page("app_pages/ab.py").run()
    assert not at.exception and not at.error
    assert at.slider(key="ab_limit").value == 10 and at.selectbox(key="ab_metric").value == "rr"
    at.switch_page("app_pages/budget.py").run()
    assert at.select_slider(key="budget_tokens").value == 200
    at.switch_page("app_pages/tune.py").run()
    assert not at.exception and at.selectbox(key="tune_vary").value == "half_life_days"


@pytest.mark.parametrize("key, value", [("widgets_kept", "junk"), ("widgets_kept", {3: 1}),
                                        ("upload_kept", {"name": "x.json", "data": "not bytes"}),
                                        ("upload_kept", 7)])
def test_kept_values_of_the_wrong_type_are_reset_and_named(key, value):
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[key] = value
    at.run()
    assert not at.exception and not at.error
    assert "Reset in this session" in shown(at.sidebar.warning) and key in shown(at.sidebar.warning)


# ---------------------------------------------------------------- Playground and Import say what they changed


def test_a_restored_playground_names_the_settings_it_did_not_take():
    at = page()
    s = at.session_state
    text = views.playground_jsonl(s["pg_events"], s["pg_now"], s["pg_kept"]["query"], s["pg_kept"]["session"],
                                  {**s["settings"], "limit": 999, "recency_weight": 7.0, "half_life_days": 30.0})
    at.slider(key="set_limit").set_value(5).run()
    at.file_uploader(key="pg_upload").upload("playground.jsonl", text.encode()).run()
    assert not at.exception and not at.error
    said = shown(at.warning)
    assert "Restored a session of 7 events" in said and "Not restored" in said
    assert "limit 999" in said and "recency_weight 7" in said and "half_life_days" not in said
    assert at.slider(key="set_limit").value == 5  # left as it was, and said so
    assert at.slider(key="set_half_life_days").value == 30.0  # what was in range is restored


def test_a_chat_whose_timestamps_go_backwards_says_they_were_moved():
    chat = (b"session,role,text,timestamp\n"
            b"me,user,I live in Lisbon,2024-01-02T09:00:00Z\n"
            b"me,user,My cat is called Miso,2024-01-01T09:00:00Z\n"
            b"me,user,I moved to Porto,2024-01-01T08:00:00Z\n"
            b"me,user,I like tea,2024-03-01T09:00:00Z\n")
    at = page("importer")
    at.file_uploader(key="import_upload").upload("chat.csv", chat).run()
    assert not at.exception and not at.error, shown(at.error)
    assert "2 timestamps were moved forward to keep time in order" in shown(at.caption)
    at.file_uploader(key="import_upload").upload("chat.csv", chat.replace(b"2024-01-01T08", b"2024-01-03T08")).run()
    assert "1 timestamp was moved forward" in shown(at.caption)


def test_correcting_a_corrected_memory_names_the_memory_it_replaced():
    at = page()
    at.selectbox(key="pg_target").set_value("m3").run()
    at.text_input(key="pg_correction").set_value("Ana moved to Porto").run()
    at.button(key="pg_correct").click().run()
    assert "m8 now supersedes m3." in shown(at.success)
    at.selectbox(key="pg_target").set_value("m3").run()
    at.text_input(key="pg_correction").set_value("Ana moved to Faro").run()
    at.button(key="pg_correct").click().run()
    assert not at.exception and not at.error
    said = shown(at.success)
    assert "m9 now supersedes m8" in said and "supersedes m3" not in said, said
    assert "m3 -> m8 -> m9" in at.selectbox(key="pg_chain").options

