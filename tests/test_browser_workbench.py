"""What a researcher expects next, done in a real browser: a benchmark file read where it lies,
named settings on Tune and Sweep, a best point kept to a bound, the one-click report, corrections
marked in an imported chat (`streamlit run app.py`, headless Chromium through Playwright).

The Streamlit server the browser tests share (conftest), a browser context for the module, the
hashing embedder and the smallest datasets that show each thing, so it stays quick; what is
asserted is what the page shows after each action.
Chromium and Playwright as in tests/test_browser.py: skipped where absent outside CI, failing in CI.
"""

import hashlib
import json
import re
import shutil
import time
from pathlib import Path

import pytest

from helpers import query_of, screenshot_module, wait_for_url

ROOT = Path(__file__).resolve().parents[1]
shot = screenshot_module()

pytestmark = pytest.mark.slow
FAST = "embedder=hashing"  # no model to load: each replay of these small datasets takes a moment
# A chat where Dana moves (the rule-based judge finds it) and changes her drink (said in passing: marked by hand).
DANA = ("session,role,text,timestamp\n"
        "s1,user,Dana lives in Lisbon.,2024-01-01T10:00:00Z\n"
        "s1,user,Dana drinks green tea every morning.,2024-01-02T10:00:00Z\n"
        "s1,user,Dana has moved to Porto.,2024-02-01T10:00:00Z\n"
        "s1,user,These days Dana drinks black coffee every morning.,2024-02-02T10:00:00Z\n")


@pytest.fixture
def page(ctx):
    p = ctx.new_page()
    yield p
    p.close()


# ---------------------------------------------------------------- what the page shows


def main(page):
    return page.get_by_test_id("stMain")


def grid_rows(frame) -> list[list[str]]:
    """The cells of an ``st.dataframe``, row by row, header first (from the grid's accessible table)."""
    return frame.locator('[role="row"]').evaluate_all(
        "rows => rows.map(r => Array.from(r.querySelectorAll('[role=gridcell],[role=columnheader],th,td'))"
        ".map(c => c.textContent))")


def grid_with(page, column: str, seconds: float = 30) -> list[list[str]]:
    """The rows of the page's ``st.dataframe`` that has a column ``column`` (waited for: grids draw late)."""
    deadline = time.monotonic() + seconds
    while True:
        for frame in main(page).get_by_test_id("stDataFrame").all():
            rows = grid_rows(frame)
            if rows and column in rows[0]:
                return rows
        assert time.monotonic() < deadline, f"no table with a column {column!r}"
        page.wait_for_timeout(100)  # bounded polling: the grid draws its rows after the run


def chart_with(page, text: str):
    """The chart (Vega draws SVG here) whose text includes ``text``: an axis title, a legend entry, a label."""
    chart = main(page).get_by_test_id("stVegaLiteChart").filter(has=page.locator("text", has_text=text))
    chart.first.wait_for(timeout=60_000)
    return chart.first


def svg_texts(chart) -> list[str]:
    return chart.locator("text").all_text_contents()


def drawn_with(page, chart, *texts: str, seconds: float = 30) -> list[str]:
    """The texts of ``chart`` once it shows all of ``texts`` (Vega redraws a moment after the run)."""
    deadline = time.monotonic() + seconds
    while not set(texts) <= set(shown := svg_texts(chart)) and time.monotonic() < deadline:
        page.wait_for_timeout(100)  # bounded polling for the redraw
    return shown


def metric_value(page, label: str) -> str:
    """The value of the ``st.metric`` tile labelled ``label``."""
    tile = main(page).get_by_test_id("stMetric").filter(
        has=page.get_by_test_id("stMetricLabel").get_by_text(label, exact=True))
    return tile.get_by_test_id("stMetricValue").inner_text()


def choose(page, where, label: str, option: str) -> None:
    """Pick ``option`` in the select box labelled ``label`` inside ``where``."""
    where.get_by_test_id("stSelectbox").filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    shot.wait_until_idle(page)


def to_page(page, title: str) -> None:
    """To another page through the sidebar (the session, and what it holds, comes along)."""
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)
    shot.wait_until_idle(page)


def settled(page, element):
    """``element`` once it is one enabled element. A widget's change starts a rerun a moment after
    the page looks idle, and during a rerun an element's stale copy is shown beside the new one:
    using it then is ambiguous, or reaches the copy."""
    deadline = time.monotonic() + 30
    while not (element.count() == 1 and element.is_enabled()) and time.monotonic() < deadline:
        page.wait_for_timeout(100)  # bounded polling: the stale copy goes when the run ends
    return element


def type_into(page, label: str, text: str) -> None:
    box = settled(page, main(page).get_by_label(label, exact=True))
    box.fill(text)
    box.press("Enter")
    shot.wait_until_idle(page)


def press_slider(page, label: str, key: str) -> None:
    slider = main(page).locator(f'input[type="range"][aria-label="{label}"]')
    slider.focus()
    slider.press(key)


# ---------------------------------------------------------------- 2: a benchmark file on disk


def test_a_dataset_file_on_disk_says_how_long_first_then_prints_recall_by_category(app_url, page, tmp_path):
    long = tmp_path / "long_chat.jsonl"  # 725 events: long enough to be told how long before it starts
    shutil.copy(ROOT / "datasets" / "plain_chat.jsonl", long)
    locomo = tmp_path / "locomo_two.json"  # two LoCoMo conversations: a table by category and conversation
    shutil.copy(ROOT / "datasets" / "fixtures" / "locomo_sample.json", locomo)
    shot.open_page(page, app_url, "replay", f"dataset=pinned_profile&{FAST}")
    sidebar = page.get_by_test_id("stSidebar")
    choose(page, sidebar, "Shipped scenario, fixture or upload", "A file on this machine...")
    path = sidebar.get_by_label("Path of the file", exact=True)
    path.fill(str(long))
    path.press("Enter")
    told = main(page).get_by_text(re.compile(r"takes about \d+ (s|min)"))
    told.wait_for(timeout=60_000)
    assert "(725 events)" in told.inner_text()
    assert "dataset" not in query_of(page)  # a link names shipped datasets only: a path is not one
    assert main(page).get_by_role("button", name="Replay it now").count() == 1
    assert main(page).get_by_test_id("stVegaLiteChart").count() == 0  # nothing replayed before it is asked

    path.fill(str(locomo))
    path.press("Enter")
    heading = main(page).get_by_role("heading", name="recall@10 by category and conversation")
    heading.wait_for(timeout=60_000)
    shot.wait_until_idle(page)
    rows = grid_with(page, "conv-fx2")
    assert rows[0] == ["category", "conv-fx1", "conv-fx2", "all", "probes"], rows
    assert [r[0] for r in rows[1:]] == ["multi-hop", "open-domain", "single-hop", "temporal", "all"], rows
    assert re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", rows[-1][3]) and rows[-1][4] == "5", rows
    assert not shot.errors_on(page), shot.errors_on(page)


# ---------------------------------------------------------------- 3: named settings on Tune and Sweep


def save_named(page, name: str) -> None:
    type_into(page, "Name the current settings", name)  # Enter only submits the text: the button saves
    main(page).get_by_role("button", name="Save", exact=True).click()
    main(page).get_by_text(f"{name}:", exact=False).first.wait_for(timeout=30_000)
    shot.wait_until_idle(page)


def test_two_named_settings_are_drawn_on_tune_and_written_on_the_sweep_grid(app_url, page):
    shot.open_page(page, app_url, "tune", f"dataset=contradicting_facts&recency_weight=0&{FAST}")
    assert main(page).locator("text", has_text="mean (95% CI)").count() == 0  # nothing saved, nothing drawn
    save_named(page, "no recency")
    press_slider(page, "recency weight", "End")  # recency weight 2: on the Sweep grid's edge
    wait_for_url(page, "recency_weight", "2")
    shot.wait_until_idle(page)
    save_named(page, "max recency")
    shot.wait_until_idle(page)

    overlay = chart_with(page, "mean (95% CI)")
    names = ("(current settings)", "no recency", "max recency")
    assert set(names) <= set(drawn_with(page, overlay, *names))  # the legend
    dots = overlay.locator('[role="graphics-symbol"][aria-label*="config: "]').evaluate_all(
        "ps => ps.map(p => p.getAttribute('aria-label'))")
    ndcg = {re.search(r"config: ([^;]+)", d)[1]: float(re.search(r"mean \(95% CI\): ([\d.]+)", d)[1])
            for d in dots if "metric: nDCG@k" in d and "mean (95% CI)" in d}  # the dots (not their whiskers)
    assert set(ndcg) == {"(current settings)", "no recency", "max recency"}, dots
    assert f"{ndcg['(current settings)']:.3f}" == metric_value(page, "nDCG@k")  # the tile's figure
    assert ndcg["no recency"] != ndcg["max recency"]  # each ranked at its own settings

    to_page(page, "Sweep")
    heat = chart_with(page, "no recency")
    assert "max recency" in drawn_with(page, heat, "max recency")
    assert main(page).get_by_text("Named settings (saved on the Tune page) are written above their cells in red.")\
        .count() == 1
    assert not shot.errors_on(page), shot.errors_on(page)


# ---------------------------------------------------------------- 4: the best point kept to a bound


def test_the_best_point_subject_to_a_stale_leak_bound_keeps_it_where_it_is_used(app_url, page):
    shot.open_page(page, app_url, "sweep", f"dataset=contradicting_facts&{FAST}")
    unbound = float(metric_value(page, "best nDCG@k"))
    choose(page, main(page), "best subject to", "stale-leak@k ≤")
    type_into(page, "bound", "0.02")
    main(page).get_by_text(re.compile(r"points that keep stale_leak (<=|≤) 0\.02")).wait_for(timeout=30_000)
    bound = float(metric_value(page, "best nDCG@k"))
    assert bound < unbound  # the bound costs nDCG here: the unbounded best leaks
    chosen = main(page).get_by_text(re.compile(r"^best point: ")).inner_text()
    main(page).get_by_role("button", name="Use the best point").click()
    values = dict(re.findall(r"(half-life \(days\)|recency weight) = ([\d.]+)", chosen))
    assert values, chosen
    wait_for_url(page, "recency_weight", values.get("recency weight", query_of(page).get("recency_weight")))

    to_page(page, "Tune")
    main(page).get_by_test_id("stTable").wait_for(timeout=60_000)
    assert float(metric_value(page, "stale-leak@k")) <= 0.02  # read where the point is used
    assert metric_value(page, "nDCG@k") == f"{bound:.3f}"
    assert not shot.errors_on(page), shot.errors_on(page)


# ---------------------------------------------------------------- 5: the one-click report


def test_the_report_downloads_as_one_html_page_and_a_json_bundle_that_loads_back(app_url, page, tmp_path):
    from vxmem.workbench.analysis.report import load_report

    shot.open_page(page, app_url, "replay", f"dataset=pinned_profile&{FAST}")
    with page.expect_download() as html_download:
        main(page).get_by_role("button", name="Download the report (HTML)").click()
    html = tmp_path / html_download.value.suggested_filename
    html_download.value.save_as(html)
    with page.expect_download() as json_download:
        main(page).get_by_role("button", name="Download the report (JSON)").click()
    bundle = tmp_path / json_download.value.suggested_filename
    json_download.value.save_as(bundle)

    text = html.read_text()
    assert html.suffix == ".html" and "<table" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text, re.I)  # nothing fetched from outside
    loaded = load_report(bundle.read_bytes())
    sha = hashlib.sha256((ROOT / "datasets" / "pinned_profile.jsonl").read_bytes()).hexdigest()
    assert loaded["dataset"]["sha256"] == sha
    assert load_report(html.read_bytes())["metrics"] == loaded["metrics"] == json.loads(bundle.read_text())["metrics"]

    main(page).locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(bundle))
    main(page).get_by_text("the same as this one's", exact=False).wait_for(timeout=60_000)
    assert main(page).get_by_role("button", name="Use the report's settings").count() == 1
    assert not shot.errors_on(page), shot.errors_on(page)


# ---------------------------------------------------------------- 6: corrections in an imported chat


def add_probe(page, question: str, relevant: str, stale: str) -> None:
    type_into(page, "Question", question)
    for i, label in ((0, relevant), (1, stale)):
        main(page).get_by_test_id("stMultiSelect").nth(i).click()
        page.keyboard.type(label)
        page.keyboard.press("Enter")
        page.keyboard.press("Escape")
        shot.wait_until_idle(page)
    settled(page, main(page).get_by_role("button", name="Add the probe")).click()
    main(page).get_by_text("Added probe q1.").wait_for(timeout=60_000)
    shot.wait_until_idle(page)


def test_corrections_found_by_the_judge_and_marked_by_hand_leave_recall(app_url, page, tmp_path):
    chat = tmp_path / "dana.csv"
    chat.write_text(DANA)
    shot.open_page(page, app_url, "import", FAST)
    main(page).locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(str(chat))
    main(page).get_by_text("None marked yet.", exact=False).wait_for(timeout=60_000)
    main(page).get_by_role("button", name="Find corrections").click()  # the rule-based judge
    main(page).get_by_role("button", name="Mark these 1 as corrections").click()
    main(page).get_by_text("s1:2 corrects s1:0", exact=False).wait_for(timeout=30_000)
    shot.wait_until_idle(page)
    choose(page, main(page), "corrects", "s1:1: Dana drinks green tea every morning.")  # "This turn": the last
    main(page).get_by_role("button", name="Mark", exact=True).click()
    main(page).get_by_text("2 marked: s1:2 corrects s1:0; s1:3 corrects s1:1").wait_for(timeout=30_000)
    shot.wait_until_idle(page)

    add_probe(page, "what does Dana drink in the morning?", "s1:3", "s1:1")
    why = main(page).get_by_test_id("stTable").locator("tbody tr").first
    why.wait_for(timeout=60_000)
    assert re.match(r"returned\s+1\s+s1:3", why.inner_text()), why.inner_text()
    every = grid_with(page, "reason")
    tea = next(r for r in every if "s1:1" in r)
    assert tea[0] == "superseded", every  # the hand-marked correction took the old turn out of recall
    lisbon = next(r for r in every if "s1:0" in r)
    assert lisbon[0] == "superseded", every  # and so did the judge's
    assert not shot.errors_on(page), shot.errors_on(page)
