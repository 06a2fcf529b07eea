"""``/docs`` drawn by a real browser, offline: headless Chromium (Debian's, driven by Playwright)
opens the page of a server with a token, every request to another host refused, and Swagger UI
must draw the operations of the OpenAPI 3.1 description FastAPI writes."""


import pytest

from helpers import CHROMIUM, need_browser
from servers import rest_server

pytestmark = pytest.mark.slow




def test_docs_draws_every_verb_offline_with_a_token(tmp_path):
    need_browser()
    from playwright.sync_api import sync_playwright

    with rest_server(tmp_path / "docs.vxdb", "--token", "docs-token-not-a-secret") as url, \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            page = browser.new_page()
            elsewhere: list[str] = []

            def only_the_server(route):
                if route.request.url.startswith(url):
                    return route.continue_()
                elsewhere.append(route.request.url)
                return route.abort()

            page.route("**/*", only_the_server)
            page.goto(f"{url}/docs")
            page.wait_for_selector(".opblock-summary-path", timeout=60_000)
            paths = page.locator(".opblock-summary-path").all_inner_texts()
            errors = page.locator(".errors-wrapper, .loading-container .info").all_inner_texts()
        finally:
            browser.close()
    assert {"/v1/remember", "/v1/recall", "/v1/forget", "/v1/stats"} <= {p.strip() for p in paths}, paths
    assert not errors and elsewhere == []
