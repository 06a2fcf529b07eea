"""End to end in a real browser: `streamlit run app.py`, headless Chromium, move a Tune slider.

Chromium is Debian's (`make test` installs it with apt-get where it is missing) and
Playwright for Python only drives it: nothing is downloaded at run time. The test skips only
where Chromium or Playwright is absent *and* it is not running in CI; in CI it fails instead.
"""

import importlib
import importlib.util
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("workbench_screenshot", ROOT / "docs" / "screenshot.py")
shot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shot)

pytestmark = pytest.mark.slow


def _need(condition: bool, why: str) -> None:
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI must run the browser test (make test installs chromium with apt-get)")
    pytest.skip(f"{why}: cannot run the browser test on this machine")


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    _need(Path(shot.CHROMIUM).exists(), f"{shot.CHROMIUM} is missing (apt-get install -y chromium)")
    _need(importlib.util.find_spec("playwright") is not None,
          "the playwright package is missing (pip install playwright)")
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with shot.serve(log) as url:
        yield url


def ranking_rows(page):
    return page.get_by_test_id("stTable").locator("tbody tr").all_inner_texts()


def test_moving_the_half_life_slider_on_the_tune_page_changes_the_ranking(app_url, tmp_path):
    from playwright.sync_api import expect

    with shot.browser(tmp_path / "profile") as ctx:
        page = ctx.new_page()
        shot.open_tune(page, app_url)
        before = ranking_rows(page)
        assert len(before) == 10, before
        nDCG = page.get_by_test_id("stMetricValue").nth(2).inner_text()

        half_life = page.get_by_role("slider").first
        assert half_life.get_attribute("aria-label") == "half-life (days)"
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
        assert after != before
        assert len(after) == 10
        assert page.get_by_test_id("stMetricValue").nth(2).inner_text() != nDCG
        page.screenshot(path=str(tmp_path / "tune_after_slider.png"), full_page=True)
        assert (tmp_path / "tune_after_slider.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
