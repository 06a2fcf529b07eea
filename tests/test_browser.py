"""End to end in a real browser: `streamlit run app.py`, headless Chromium, every page driven.

Chromium is Debian's (`make test` installs it with apt-get where it is missing) and
Playwright for Python only drives it: nothing is downloaded at run time. The test skips only
where Chromium or Playwright is absent *and* it is not running in CI; in CI it fails instead.
"""

import re
import time
from pathlib import Path

import pytest

from helpers import query_of, screenshot_module, wait_for_url

ROOT = Path(__file__).resolve().parents[1]
shot = screenshot_module()

pytestmark = pytest.mark.slow


def slider(label: str) -> str:
    """The CSS of the slider labelled ``label`` (its accessible name also holds its help text)."""
    return f'input[type="range"][aria-label="{label}"]'


def ranking_rows(page):
    return page.get_by_test_id("stTable").locator("tbody tr").all_inner_texts()


def open_from_the_sidebar(page, name: str) -> None:
    """Go to workbench page ``name`` as a reader does, by its link in the sidebar, and wait as
    ``shot.open_page`` does until it has drawn (its charts included)."""
    page.get_by_test_id("stSidebarNav").get_by_text(shot.TITLES[name], exact=True).click()
    page.get_by_role("heading", name=shot.TITLES[name]).first.wait_for(timeout=90_000)
    page.get_by_test_id("stMain").get_by_test_id(shot.READY[name]).first.wait_for(timeout=90_000)
    if name in shot.LAST:
        page.get_by_text(shot.LAST[name]).first.wait_for(timeout=180_000)
    shot.wait_until_idle(page)
    page.wait_for_timeout(500)  # charts draw after the run ends
    shot.wait_until_idle(page)


def test_every_page_loads_with_no_error_nothing_fetched_from_outside_and_no_deploy_button(app_url, ctx):
    page = ctx.new_page()
    outside = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((app_url, "data:", "blob:"))
            else None)
    # The first page by its URL, then every other one through the sidebar, in the same session, as a
    # reader goes: a link loads the whole frontend again (about 2 s a page); a link opening its page
    # in a new session is checked by the tests below (Tune, Replay, Import, QA) and, for every page,
    # by tests/test_app.py's AppTest runs. The smallest shipped dataset: what is checked is that each
    # page loads, not its figures (other tests).
    first, *others = shot.PAGES
    shot.open_page(page, app_url, first, "dataset=pinned_profile")
    for name in [first, *others]:
        if name != first:
            open_from_the_sidebar(page, name)
        assert "dataset=pinned_profile" in page.url, (name, page.url)
        assert not shot.errors_on(page), (name, shot.errors_on(page))
        assert page.get_by_role("heading", name=shot.TITLES[name]).count() >= 1
    assert not outside, f"fetched from the internet: {outside[:5]}"
    assert page.get_by_role("button", name="Deploy").count() == 0
    icon = page.locator('link[rel="shortcut icon"], link[rel="icon"]').first.get_attribute("href")
    assert icon and (icon.startswith(f"{app_url}/media/") or icon.startswith("/media/")), icon  # app_pages/icon.png
    page.close()


def test_the_server_log_has_no_inotify_overflow(workbench_server, ctx):
    url, log = workbench_server
    page = ctx.new_page()
    shot.open_page(page, url, "tune")
    page.close()
    text = log.read_text(errors="replace")
    assert "Inotify" not in text and "Traceback" not in text, text[-2000:]


def test_moving_the_half_life_slider_on_the_tune_page_changes_the_ranking(app_url, ctx, tmp_path):
    from playwright.sync_api import expect

    page = ctx.new_page()
    shot.open_tune(page, app_url)
    before = ranking_rows(page)
    assert len(before) == 10, before
    ndcg = page.get_by_test_id("stMetricValue").nth(2).inner_text()

    half_life = page.locator(slider("half-life (days)"))
    assert half_life.input_value() == "7"
    half_life.focus()
    half_life.press("End")  # to the slider's maximum: 180 days
    expect(half_life).to_have_value("180")

    # The ranking table re-renders from the sweep engine; poll until it differs (bounded).
    deadline = time.monotonic() + 30
    after = ranking_rows(page)
    while after == before and time.monotonic() < deadline:
        page.wait_for_timeout(250)
        after = ranking_rows(page)
    shot.wait_until_idle(page)
    after = ranking_rows(page)
    assert len(after) == 10
    assert page.get_by_test_id("stMetricValue").nth(2).inner_text() != ndcg or after != before
    page.screenshot(path=str(tmp_path / "tune_after_slider.png"), full_page=True)
    assert (tmp_path / "tune_after_slider.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.close()


def test_a_parameter_set_on_tune_travels_in_the_url_to_another_page(app_url, ctx):
    page = ctx.new_page()
    shot.open_page(page, app_url, "tune")
    recency = page.locator(slider("recency weight"))
    recency.focus()
    recency.press("Home")  # recency weight 0
    wait_for_url(page, "recency_weight", "0")

    # To another page through the sidebar: the state and the URL come along.
    page.get_by_test_id("stSidebarNav").get_by_text("Sweep", exact=True).click()
    page.get_by_role("heading", name="Sweep").first.wait_for(timeout=60_000)
    shot.wait_until_idle(page)
    wait_for_url(page, "recency_weight", "0")
    link = page.url

    # The link alone, in a fresh tab (a new session), opens Replay at the same settings.
    fresh = ctx.new_page()
    fresh.goto(link.replace("/sweep", "/replay"))
    fresh.get_by_role("heading", name="Replay").first.wait_for(timeout=60_000)
    shot.wait_until_idle(fresh)
    fresh.get_by_text("Ranking parameters (shared by every page)").click()
    there = fresh.locator(slider("recency weight"))
    there.wait_for(timeout=30_000)
    assert there.input_value() == "0"
    assert query_of(fresh).get("recency_weight") == "0"
    fresh.close()
    page.close()


def test_an_openai_chat_file_is_imported_a_probe_written_and_why_recalled_read(app_url, ctx, tmp_path):
    chat = tmp_path / "chats.jsonl"
    chat.write_text(shot.CHAT)
    page = ctx.new_page()
    shot.import_chat(page, app_url, chat)
    assert not shot.errors_on(page)
    assert page.get_by_text("Added probe q1.").count() == 1
    # The why-recalled table of the probe's relevant turn: returned at rank 1, with why.
    rows = shot.table_rows(page, -1) if page.get_by_test_id("stTable").count() == 1 else shot.table_rows(page, 0)
    assert len(rows) == 1, rows
    cells = rows[0].split("\t")
    assert cells[0].strip() == "returned" and shot.CHAT_RELEVANT in rows[0], rows
    assert re.search(r"rank 1 of \d+, score", rows[0]), rows
    page.close()


def test_a_hostile_url_is_shown_as_text_runs_no_script_and_fetches_nothing(app_url, ctx):
    from urllib.parse import urlencode

    page = ctx.new_page()
    dialogs, outside = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((app_url, "data:", "blob:"))
            else None)
    script = "<script>alert(1)</script>"
    query = urlencode({"mode": script, "hybrid_weight": "<img src=x onerror=alert(2)>",
                       "recency_from": "![x](http://attacker.invalid/pixel.png)", "evil": script,
                       "limit": "9" * 5000, "pg": "../../etc/passwd"})
    shot.open_page(page, app_url, "tune", query)
    assert not shot.errors_on(page), shot.errors_on(page)
    sidebar = page.get_by_test_id("stSidebar").inner_text()
    assert script in sidebar and "unknown parameter 'evil'" in sidebar  # named, as the characters it is
    assert page.locator("script", has_text="alert(").count() == 0
    assert page.locator('img[src="x"], img[src*="attacker"]').count() == 0
    assert not dialogs and not outside, (dialogs, outside[:5])
    assert "evil" not in query_of(page) and query_of(page).get("mode") is None  # the URL is rewritten clean
    page.close()


def test_the_qa_page_answers_grades_and_charts_accuracy_per_category(app_url, ctx):
    page = ctx.new_page()
    with shot.loopback_llm() as endpoint:
        shot.run_qa(page, app_url, endpoint)
    assert not shot.errors_on(page), shot.errors_on(page)
    main_block = page.get_by_test_id("stMain")
    assert main_block.get_by_test_id("stVegaLiteChart").count() == 1
    text = main_block.inner_text()
    assert re.search(r"\d+ replies came from the cache, \d+ were asked of the endpoint\.", text), text
    assert "whiskers their bootstrap 95% intervals" in text
    download = main_block.get_by_role("button", name="Download the report (JSON)")
    download.wait_for(timeout=60_000)  # drawn after the chart: on a loaded machine, a moment later
    assert download.count() == 1
    page.close()
