"""The workbench's widgets start afresh when what they were about changes; every mean it shows
carries its bootstrap interval and probe count; charts and tables that fit and say something
(streamlit's AppTest, no browser)."""

import json
import re

import pytest
from test_app import OPENAI_CHAT, ROOT, charts, grade_box, page, sessions_dir, shown, specs  # noqa: F401

from vxmem.workbench import views
from vxmem.workbench.datasets import load_jsonl

# Every chart these pages draw is built from channel objects (conftest's fixture says why).
pytestmark = pytest.mark.usefixtures("charts_from_channel_objects")


def chart_rows(chart) -> list[dict]:
    """Every row of every dataset a drawn chart carries (Arrow, as Streamlit ships it)."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    return [r for d in chart.proto.datasets for r in convert_arrow_bytes_to_pandas_df(d.data.data).to_dict("records")]


# ---------------------------------------------------------------- widgets keep no old state (29.5)


def test_the_grade_box_starts_afresh_when_the_query_changes():
    at = page()
    labels = grade_box(at).options
    grade_box(at).set_value(labels[2]).run()
    assert grade_box(at).value == labels[2]
    at.text_input(key="pg_query").set_value("where does my sister live?").run()
    assert not at.exception
    ranking = at.dataframe[0].value
    assert grade_box(at).value == ranking.iloc[0]["label"]  # the new ranking's first, not the old pick


def test_the_grade_box_starts_afresh_when_the_session_changes():
    at = page()
    grade_box(at).set_value(grade_box(at).options[3]).run()
    at.text_area(key="pg_text").set_value("I started learning the cello").run()
    at.button(key="pg_remember").click().run()
    at.text_input(key="pg_session").set_value("work").run()
    at.text_area(key="pg_text").set_value("The cello lesson is on Tuesday").run()
    at.button(key="pg_remember").click().run()
    at.text_input(key="pg_query").set_value("when is the cello lesson?").run()
    assert not at.exception
    assert grade_box(at).value == at.dataframe[0].value.iloc[0]["label"]


def test_a_message_goes_when_the_session_changes():
    at = page()
    at.text_area(key="pg_text").set_value("I adopted a cat named Miso").run()
    at.button(key="pg_remember").click().run()
    assert "Remembered" in shown(at.success)
    at.text_input(key="pg_session").set_value("work").run()
    assert not at.exception
    assert "Remembered" not in shown(at.success)


def test_a_reset_starts_the_playground_widgets_afresh():
    at = page()
    at.text_area(key="pg_text").set_value("half typed").run()
    at.selectbox(key="pg_target").set_value("m5").run()
    at.button(key="pg_reset").click().run()
    assert at.text_area(key="pg_text").value == ""
    assert at.selectbox(key="pg_target").value == "m1"


def test_the_replay_probe_starts_at_the_first_when_the_conversation_changes():
    at = page("replay", dataset="fixtures/longmemeval_sample.json")
    at.selectbox(key="replay_conv").set_value(0).run()
    slider = at.select_slider(key="replay_probe")
    slider.set_value(len(slider.options) - 1).run()
    at.selectbox(key="replay_conv").set_value(1).run()
    assert not at.exception
    assert at.select_slider(key="replay_probe").value == 0


def test_the_probe_pickers_start_afresh_on_another_dataset():
    at = page("tune", dataset="preference_drift")
    at.selectbox(key="tune_probe").set_value(5).run()
    at.selectbox(key="dataset_choice").set_value("many_users").run()
    assert not at.exception
    assert at.selectbox(key="tune_probe").value == 0


def test_the_import_form_and_its_message_start_afresh_for_a_new_file():
    at = page("importer")
    at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT).run()
    at.text_input(key="import_query").set_value("which saddle did I order?").run()
    at.multiselect(key="import_relevant").set_value(["bike:0"]).run()
    at.button(key="import_add").click().run()
    assert "Added probe q1" in shown(at.success)
    at.text_input(key="import_query").set_value("half a question").run()
    other = OPENAI_CHAT.replace(b"saddle", b"bell")
    at.file_uploader(key="import_upload").upload("other.jsonl", other).run()
    assert not at.exception and not at.error
    assert not at.success
    assert at.text_input(key="import_query").value == ""


# ---------------------------------------------------------------- every mean with its interval (29.6)


def test_the_replay_page_gives_the_conversations_means_with_intervals_and_probe_counts():
    at = page("replay")
    caption = next(c.value for c in at.caption if c.value.startswith("Means over"))
    for label in ("hit@k", "MRR", "nDCG@k", "stale-leak@k"):
        assert re.search(re.escape(label) + r" \d\.\d{3} \(95% CI \d\.\d{3}-\d\.\d{3}, \d+ probes\)", caption), caption
    assert all("(this probe)" in m.label for m in at.metric)  # one probe's values, said to be one probe's


def test_below_thirty_probes_every_page_says_the_means_are_uncertain():
    for name in ("replay", "tune", "sweep", "ab", "compare"):
        at = page(name, dataset="pinned_profile")  # 3 probes
        assert not at.exception
        assert "fewer than 30" in shown(at.warning), name
        assert "Only 3 probes" in shown(at.warning) or "Only 2 probes" in shown(at.warning), name
        if name == "compare":  # under the policies' table and under the presets' table
            assert sum("fewer than 30" in w.value for w in at.warning) == 2


def test_thirty_probes_or_more_carry_no_caveat():
    at = page("replay")  # contradicting_facts: 36 probes
    assert "fewer than 30" not in shown(at.warning)


def test_sweep_best_and_current_carry_intervals():
    at = page("sweep")
    cis = [c.value for c in at.caption if c.value.startswith("95% CI")]
    assert len(cis) == 2 and all(re.fullmatch(r"95% CI \d\.\d{3}-\d\.\d{3}, \d+ probes", c) for c in cis), cis


def test_ab_means_carry_intervals_and_probe_counts():
    at = page("ab")
    cis = [c.value for c in at.caption if c.value.startswith("95% CI")]
    assert len(cis) == 3, cis  # mean A, mean B, the change
    assert all(re.search(r"\d+ probes$", c) for c in cis)


def test_compare_gives_every_metric_with_its_interval_and_draws_whiskers():
    at = page("compare")
    table = at.dataframe[0].value
    assert "probes" in table
    assert table["ndcg"].str.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]").all()
    policy_charts = [s for s in specs(at) if "ms_per_recall" not in json.dumps(s)]  # not the systems chart
    assert policy_charts and all('"rule"' in json.dumps(s) and "_lo" in json.dumps(s) for s in policy_charts)


# ---------------------------------------------------------------- charts and tables (29.7)


def test_sweep_axis_values_are_rounded():
    at = page("sweep")
    values = {v for r in chart_rows(charts(at)[0]) for k, v in r.items() if k in ("half_life_days", "recency_weight")}
    assert values and all(len(f"{v:g}".replace(".", "").lstrip("0")) <= 2 or v in (180.0,) for v in values), values
    best = next(m.value for m in at.markdown if m.value.startswith("**best point**"))
    assert not re.search(r"\d\.\d{3,}", best), best  # no "4.4092"


def test_an_all_zero_metric_is_said_not_drawn():
    at = page("compare", dataset="many_users")  # nothing stale to leak, every probe hit: flat
    assert not at.exception
    said = shown(at.info)
    assert "stale-leak@k (lower is better) is 0.000 everywhere" in said and "hit@k" in said
    policy_charts = [s for s in specs(at) if "ms_per_recall" not in json.dumps(s)]  # not the systems chart
    assert len(policy_charts) == 2  # MRR and nDCG only


def test_a_flat_sweep_metric_is_said_not_mapped():
    at = page("sweep", dataset="many_users")
    at.selectbox(key="sweep_metric").set_value("stale_leak").run()
    assert not at.exception
    assert "at every point of this grid" in shown(at.info)
    assert not any('"rect"' in json.dumps(s) for s in specs(at))  # no heatmap


def test_the_ab_scatter_draws_one_dot_per_pair_sized_by_its_probes():
    at = page("ab")
    frame_probes = sum(int(at.metric[i].value) for i in range(3))  # wins, losses, ties
    scatter = next(c for c in charts(at) if '"probes:Q"' in c.proto.spec or '"probes"' in c.proto.spec)
    rows = {(r["a"], r["b"], r["outcome"]): r["probes"] for r in chart_rows(scatter) if "probes" in r}
    assert sum(rows.values()) == frame_probes
    assert len({(a, b) for a, b, _ in rows}) == len(rows) < frame_probes  # the ties are one dot, not thirty
    assert '"size"' in scatter.proto.spec


def test_compare_draws_every_preset_and_policy_against_its_cost():
    from vxmem.memory.stages import PRESETS
    from vxmem.workbench.sweep.policies import POLICIES

    at = page("compare")
    assert not at.exception and not at.error
    assert "Presets and policies: quality against cost" in shown(at.header)
    chart = next(c for c in charts(at) if '"colour"' in c.proto.spec)  # the presets chart
    points = [r for r in chart_rows(chart) if "kind" in r]
    labels = {r["label"] for r in points}
    assert {f"{p} · {q}" for p in PRESETS for q in POLICIES} <= labels
    assert {"vxmem", "vxmem:fast", "bm25"} <= labels  # the systems picked by default
    assert all(r["ms_per_recall"] > 0 for r in points) and any(r["on_front"] for r in points)
    spec = chart.proto.spec
    assert '"strokeDash"' in spec and '"log"' in spec and "recall@10" in spec and "ms per recall" in spec
    assert any("text" in r for r in chart_rows(chart))  # the front labelled
    shown_table = next(d for d in at.dataframe if "coverage" in d.value)  # each preset's quality per millisecond
    table, config = shown_table.value, json.loads(shown_table.proto.columns or "{}")
    widths = [config.get(c, {}).get("width") for c in table.columns]
    assert all(isinstance(w, int) for w in widths) and sum(widths) <= PAGE_WIDTH, widths  # it fits the page
    assert table["preset"].tolist() == list(PRESETS)
    assert table["recall"].str.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]").all()
    assert table["coverage"].between(0, 1).all() and table["depth"].tolist() == [10, 120, 120]
    assert (table[["ms_p99", "ms_per_write"]] > 0).all(axis=None)
    assert table["ms_p50"].str.fullmatch(r"\d+\.\d{2} \[\d+\.\d{2}, \d+\.\d{2}\]").all()  # the median with its interval
    by_category = next(d.value for d in at.dataframe if any(c.startswith("recall · ") for c in d.value))
    assert by_category["preset"].tolist() == list(PRESETS)  # a column per probe category, in a table of its own
    assert any("on this machine" in c.value and "coverage@D" in c.value for c in at.caption)
    at.multiselect(key="compare_systems").set_value([]).run()  # no system: the presets and policies alone
    assert not at.exception and not at.error
    chart = next(c for c in charts(at) if '"colour"' in c.proto.spec)
    assert {r["label"] for r in chart_rows(chart) if "kind" in r} == {f"{p} · {q}" for p in PRESETS for q in POLICIES}


def test_the_timeline_spreads_memories_made_together():
    at = page("replay")
    spec = json.dumps(specs(at)[0])
    assert '"yOffset"' in spec and '"jitter' in spec
    (rep,) = views.replay_all([load_jsonl(ROOT / "datasets" / "contradicting_facts.jsonl")],
                              embedder=views.embedder_for("hashing"))
    mem = views.memory_timeline(rep)
    assert mem.groupby("lane")["jitter"].nunique().min() > 1  # not one line of dots
    assert mem["jitter"].between(-0.5, 0.5).all()


PAGE_WIDTH = 880  # the main block of the wide layout in a 1360 px window is about 900 px


def test_ranking_and_why_tables_fit_the_page():
    for name in ("replay", "importer"):
        at = page(name)
        if name == "importer":
            at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT).run()
            at.text_input(key="import_query").set_value("which saddle did I order?").run()
            at.multiselect(key="import_relevant").set_value(["bike:0"]).run()
            at.button(key="import_add").click().run()
        checked = 0
        for d in at.dataframe:
            config, order = json.loads(d.proto.columns or "{}"), list(d.proto.column_order)
            if {"rank", "label", "text"} <= set(order):
                widths = [config.get(c, {}).get("width") for c in order]
                assert all(isinstance(w, int) for w in widths), (name, order, widths)
                assert sum(widths) <= PAGE_WIDTH, (name, order, widths)
                checked += 1
        assert checked >= 2, name


def test_legends_say_on_the_front_in_words_and_cost_columns_have_plain_labels():
    at = page("compare")
    systems = next(s for s in specs(at) if '"system"' in json.dumps(s) and '"colour"' not in json.dumps(s))
    text = json.dumps(systems)
    assert '"on the front"' in text and '"behind it"' in text and '"field": "on_front"' not in text
    table = next(d for d in at.dataframe if "setup_s" in d.value)
    labels = {c: v.get("label") for c, v in json.loads(table.proto.columns or "{}").items()}
    assert labels["ms_per_recall"] == "ms per recall" and labels["setup_s"] == "setup (s)"
    assert labels["ms_per_write"] == "ms per write"
    at = page("sweep")
    scatter = next(s for s in specs(at) if "tokens" in json.dumps(s) and '"circle"' in json.dumps(s))
    size = scatter["encoding"]["size"]
    assert size["field"] == "front" and size["scale"]["domain"] == ["behind it", "on the front"]


def test_sweep_picks_the_best_point_subject_to_a_bound_and_says_when_none_keeps_it():
    at = page("sweep", dataset="preference_drift")
    at.selectbox(key="sweep_bound").set_value("stale_leak").run()
    at.number_input(key="sweep_bound_value").set_value(0.2).run()
    assert not at.exception, at.exception
    notes = shown(at.caption)
    assert "points that keep stale_leak <= 0.2" in notes
    tuned = shown(at.markdown)
    assert "keeping stale-leak@k ≤ 0.2 there" in tuned
    at.selectbox(key="sweep_bound").set_value("hit").run()
    at.number_input(key="sweep_bound_value").set_value(1.0).run()  # a hit on every probe: no point keeps it
    assert not at.exception, at.exception
    assert any("No point of the grid keeps hit >= 1" in w.value for w in at.warning)
    assert [m.label for m in at.metric][:1] == ["best nDCG@k"]  # the page still picks, without the bound


def test_replay_offers_the_report_as_html_and_json_at_the_shared_settings():
    at = page("replay", query={"recency_weight": "0"})
    assert not at.exception, at.exception
    buttons = {b.label: b for b in at.get("download_button")}
    assert {"Download the report (HTML)", "Download the report (JSON)"} <= set(buttons)
    assert "Load a report (HTML or JSON)" in [u.label for u in at.get("file_uploader")]
    assert any("dataset's sha256" in c.value for c in at.caption)


def test_replay_prints_recall_by_category_and_conversation_with_intervals_as_the_cli_does():
    at = page("replay", query={"embedder": "hashing"}, dataset="fixtures/locomo_sample.json")
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "category" in d.value and "all" in d.value)
    assert list(table.columns) == ["category", "conv-fx1", "conv-fx2", "all", "probes"]
    assert table["category"].tolist() == ["multi-hop", "open-domain", "single-hop", "temporal", "all"]
    rows = table.set_index("category")
    assert rows.loc["all", "probes"] == 5 and rows.loc["temporal", "conv-fx2"] == ""  # no such probe there
    assert re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", rows.loc["all", "all"])
    assert "recall@10 by category and conversation" in [h.value for h in at.subheader]


def test_a_long_dataset_on_disk_says_how_long_it_will_take_and_starts_when_asked(tmp_path):
    from vxmem.workbench.datasets import save_jsonl
    from vxmem.workbench.synth import generate

    path = tmp_path / "long.jsonl"
    conv = generate("plain_chat", rounds=1)
    assert len(conv.events) >= 500  # long enough to be asked first
    save_jsonl(conv, path)
    at = page("replay", query={"embedder": "hashing"})
    at.selectbox(key="dataset_choice").set_value("A file on this machine...").run()
    assert "Type the path" in " ".join(e.value for e in at.error)
    at.text_input(key="dataset_path").set_value(str(tmp_path / "missing.jsonl")).run()
    assert "No file at" in " ".join(e.value for e in at.error)
    at.text_input(key="dataset_path").set_value(str(path)).run()
    assert not at.exception, at.exception
    told = " ".join(i.value for i in at.info)
    assert "takes about" in told and f"{len(conv.events):,} events" in told
    assert not charts(at)  # nothing replayed yet
    at.button(key="long_replay_start").click().run()
    assert not at.exception, at.exception
    assert not any("takes about" in i.value for i in at.info) and charts(at)  # replayed, the timeline drawn


def test_named_settings_run_side_by_side_on_every_shipped_dataset():
    at = page("tune", query={"embedder": "hashing", "recency_weight": "0"})
    at.text_input(key="named_name").set_value("no recency").run()
    at.button(key="named_save").click().run()
    assert at.session_state["named_settings"]["no recency"]["recency_weight"] == 0.0
    at.slider(key="set_recency_weight").set_value(1.0).run()  # the current settings move on
    at.button(key="named_run").click().run()
    while any(b.key == "long_replay_start" for b in at.button):  # a long dataset says how long, then starts
        at.button(key="long_replay_start").click().run()
    assert not at.exception, at.exception
    frame = next(d.value for d in at.dataframe if "macro" in d.value)
    assert set(frame["config"]) == {"(current settings)", "no recency"}
    bars = chart_rows(next(c for c in charts(at) if "\"dataset\"" in c.proto.spec))  # not the overlay on this one
    assert {"all datasets", "preference_drift"} <= {r["dataset"] for r in bars}
    assert {r["config"] for r in bars} == {"(current settings)", "no recency"}
    drift = {r["config"]: r["mean"] for r in bars if r["dataset"] == "preference_drift"}
    assert drift["no recency"] != drift["(current settings)"]  # each ranked at its own settings
    at.button(key="named_forget:no recency").click().run()
    assert "no recency" not in at.session_state["named_settings"]


def test_named_settings_are_drawn_on_tune_beside_the_current_ones_with_their_own_figures():
    at = page("tune", query={"embedder": "hashing", "recency_weight": "0"}, dataset="preference_drift")
    assert not [c for c in charts(at) if '"mean (95% CI)"' in c.proto.spec]  # nothing saved: no overlay
    at.text_input(key="named_name").set_value("no recency").run()
    at.button(key="named_save").click().run()
    at.slider(key="set_recency_weight").set_value(1.0).run()  # the current settings move on
    assert not at.exception, at.exception
    overlay = next(c for c in charts(at) if '"mean (95% CI)"' in c.proto.spec)
    rows = chart_rows(overlay)
    assert {r["config"] for r in rows} == {"(current settings)", "no recency"}
    means = {(r["config"], r["metric"]): r["mean"] for r in rows}
    tiles = {m.label: m.value for m in at.metric}
    assert len(tiles) == 4
    for label, tile in tiles.items():  # the current settings' dots are the tiles' figures
        assert f"{means[('(current settings)', label)]:.3f}" == tile, (label, tile, means)
    assert means[("no recency", "nDCG@k")] != means[("(current settings)", "nDCG@k")]  # ranked at its own point
    assert "The named settings (saved below) on this dataset" in shown(at.caption)


def test_named_settings_on_the_sweep_grid_are_written_above_their_cells():
    at = page("tune", query={"recency_weight": "0"})
    at.text_input(key="named_name").set_value("flat").run()
    at.button(key="named_save").click().run()
    at.switch_page("app_pages/sweep.py").run()
    assert not at.exception, at.exception
    rows = [r for c in charts(at) for r in chart_rows(c) if r.get("name") == "flat"]
    assert rows and rows[0]["recency_weight"] == 0.0
    assert "Named settings (saved on the Tune page)" in shown(at.caption)


def test_the_playground_starts_again_from_a_plain_chat_where_nothing_says_what_changed():
    at = page()
    at.selectbox(key="pg_demo").set_value("a plain chat (a move told in passing)").run()
    at.button(key="pg_reset").click().run()
    assert not at.exception and not at.error
    assert at.text_input(key="pg_query").value == "which city does the user live in?"
    ranking = at.dataframe[0].value.set_index("label")
    assert {"m1", "m4", "m5"} <= set(ranking.index)  # the old city, the move and the other-sense mention
    assert not any("light mode" in t for t in ranking["text"])  # the other demo's memories are gone
    at.selectbox(key="pg_demo").set_value("a correction (dark mode, then light mode)").run()
    at.button(key="pg_reset").click().run()
    assert "light mode" in at.dataframe[0].value.iloc[0]["text"]


def test_a_progress_bar_moves_in_steps_of_five_percent_and_ends_full(monkeypatch):
    """Work reports up to a hundred times; each move of a bar is a message the browser redraws."""
    from app_pages import shared

    moves = []

    class Bar:
        def progress(self, value, text):
            moves.append((value, text))

        def empty(self):
            moves.append("emptied")

    monkeypatch.setattr(shared.st, "progress", lambda value, text: Bar())
    done = [*range(0, 730, 7), 730]  # as a Reporter calls it: every few events, and at the end
    got = shared.with_progress("Replaying...", lambda progress: [progress(i, 730, "events") for i in done]
                               + [progress(1, 2, "replays"), progress(2, 2, "replays")])
    assert len(got) == len(done) + 2
    events = [m for m in moves if m != "emptied" and "events" in m[1]]
    assert 20 <= len(events) <= 21, events
    assert all(b[0] - a[0] > 0.04 for a, b in zip(events, events[1:])), events
    assert events[-1] == (1.0, "Replaying... events: 730 of 730")
    assert [m[1] for m in moves[-3:-1]] == ["Replaying... replays: 1 of 2", "Replaying... replays: 2 of 2"]
    assert moves[-1] == "emptied"
