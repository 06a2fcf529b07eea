"""Start the workbench headless, open it in Debian's Chromium through Playwright, save screenshots.

    python docs/screenshot.py [outdir]        (or: make screenshot)  -> docs/*.png

One screenshot per page (docs/playground.png, replay.png, tune.png, sweep.png, ab.png,
budget.png, compare.png, import.png, qa.png) and docs/dashboard.png (the Tune page); the README shows
playground.png. The QA page's answers come from the tests' loopback chat-completions server
(tests/llm_server.py), which echoes the recalled memories and grades by substring: no model runs.
The browser is the system's (``apt-get install chromium``), never a download: Playwright
for Python only drives it. ``tests/test_browser.py`` uses the same helpers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1360, "height": 1180}
PAGES = {"playground": "", "replay": "replay", "tune": "tune", "sweep": "sweep", "ab": "ab", "budget": "budget",
         "compare": "compare", "import": "import", "qa": "qa"}
TITLES = {"playground": "Playground", "replay": "Replay", "tune": "Tune", "sweep": "Sweep", "ab": "A/B",
          "budget": "Budget", "compare": "Compare", "import": "Import", "qa": "QA"}
# An OpenAI-format chat log: one conversation per line, a system prompt the importer leaves out.
# What each page draws last: it is ready when this shows in the main block.
READY = {"playground": "stDataFrame", "replay": "stVegaLiteChart", "tune": "stTable", "sweep": "stVegaLiteChart",
         "ab": "stMetric", "budget": "stCode", "compare": "stVegaLiteChart", "import": "stFileUploader",
         "qa": "stExpander"}
# Pages that draw in stages, long after their first element: the text of their last one.
LAST = {"compare": "Each preset's quality per millisecond"}
CHAT = (
    '{"conversation_id": "bike", "messages": [{"role": "system", "content": "You are a helpful assistant."}, '
    '{"role": "user", "content": "I ordered a wide gel saddle for my road bike, it arrives Thursday."}, '
    '{"role": "assistant", "content": "Gel saddles help on long rides; adjust the height when it comes."}, '
    '{"role": "user", "content": "The weather was lovely at the lake today."}]}\n'
    '{"conversation_id": "food", "messages": [{"role": "user", "content": "I am allergic to peanuts."}, '
    '{"role": "assistant", "content": "Noted: no peanuts in any recipe I suggest."}]}\n')
CHAT_QUESTION = "which saddle did I order for my bike?"
# The QA page on LoCoMo's fixture, answered and graded by the loopback server's rules (no model).
QA_QUERY = "dataset=fixtures%2Flocomo_sample.json"
QA_MODELS = ("qa-answerer", "qa-judge")
CHAT_RELEVANT = "bike:0"


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(log_path: Path, timeout: float = 90.0) -> Iterator[str]:
    """``streamlit run app.py`` headless on a free loopback port; yields its URL.

    Polls the health endpoint (bounded by ``timeout``) and stops the server on exit.
    """
    port = free_port()
    # The project's .streamlit/config.toml as `make app` runs it, on a free port;
    # saved Playground sessions go beside the log, not to the home directory.
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    env = {**os.environ, "VXMEM_WORKBENCH_DIR": str(log_path.parent / "sessions")}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit did not come up in {timeout:.0f}s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.25)  # bounded polling for the server to come up
        yield url
    finally:
        stop(proc, url)


def stop(proc: subprocess.Popen, url: str, timeout: float = 10.0) -> None:
    """Stop the server: SIGTERM, then SIGKILL once it no longer answers.

    Streamlit's SIGTERM handler closes the sessions and the server at once, but where a polling
    file watcher runs (a developer's ``--server.fileWatcherType poll``), the interpreter's exit
    then joins its four threads, which first sleep out every queued 0.2 s poll, one per watched
    file: about 8 s, for nothing left to save. So once the health endpoint stops answering, a
    second of grace, then SIGKILL.
    """
    proc.terminate()
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1):
                pass
        except OSError:
            break  # the server is down: only the interpreter's exit is left
        time.sleep(0.1)  # bounded polling for the server to go down
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def browser(profile_dir: Path):
    """A headless Chromium context (Playwright over /usr/bin/chromium) with an empty profile."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile_dir), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT,
            device_scale_factor=1)
        try:
            yield ctx
        finally:
            ctx.close()


def wait_until_idle(page, timeout: float = 60_000) -> None:
    """Wait for the app to finish its run: the "Running..." status widget gone, content drawn."""
    page.wait_for_selector('[data-testid="stMain"]', timeout=timeout)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def open_page(page, url: str, name: str, query: str = "") -> None:
    """Open workbench page ``name`` (a key of :data:`PAGES`) and wait until it has drawn."""
    page.goto(f"{url}/{PAGES[name]}{'?' + query if query else ''}")
    page.get_by_role("heading", name=TITLES[name]).first.wait_for(timeout=90_000)
    page.get_by_test_id("stMain").get_by_test_id(READY[name]).first.wait_for(timeout=90_000)
    if name in LAST:
        page.get_by_text(LAST[name]).first.wait_for(timeout=180_000)
    wait_until_idle(page)
    page.wait_for_timeout(500)  # charts draw after the run ends
    wait_until_idle(page)


def open_tune(page, url: str) -> None:
    open_page(page, url, "tune")
    page.get_by_test_id("stTable").wait_for(timeout=60_000)
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(timeout=60_000)
    wait_until_idle(page)


def import_chat(page, url: str, chat_path: Path) -> None:
    """On the Import page: upload an OpenAI-format chat file and write a probe for it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    open_page(page, url, "import")
    page.get_by_test_id("stMain").locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(
        str(chat_path))
    page.get_by_label("Question").wait_for(timeout=60_000)
    wait_until_idle(page)
    question = page.get_by_label("Question")
    question.fill(CHAT_QUESTION)
    question.press("Enter")
    wait_until_idle(page)
    page.get_by_test_id("stMultiSelect").first.click()
    page.keyboard.type(CHAT_RELEVANT)
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    wait_until_idle(page)
    wait_until_idle(page)
    page.get_by_role("button", name="Add the probe").click()  # waits until the button is enabled
    why = page.get_by_text("The turns this probe should return, and why")
    try:
        why.wait_for(timeout=60_000)
    except PlaywrightTimeout:  # a rerun still in flight swallowed the click: click once more
        wait_until_idle(page)
        page.get_by_role("button", name="Add the probe").click()
        why.wait_for(timeout=60_000)
    # The header is drawn a moment before the table under it: wait for the table itself, since
    # the status widget may not have shown yet when the click's rerun starts.
    page.get_by_test_id("stTable").locator("tbody tr").first.wait_for(timeout=60_000)
    wait_until_idle(page)


@contextmanager
def loopback_llm() -> Iterator[str]:
    """The tests' loopback chat-completions server (tests/llm_server.py) as a child process; yields
    its base URL for the SDK (``http://127.0.0.1:PORT/v1``)."""
    tests = ROOT / "tests"
    proc = subprocess.Popen([sys.executable, str(tests / "llm_server.py"), str(tests / "data" / "llm_answers.json")],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the loopback chat server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def run_qa(page, url: str, endpoint: str, models: tuple[str, str] = QA_MODELS) -> None:
    """On the QA page (LoCoMo's fixture): name the endpoint and the two models, leave the reply
    cache off (nothing written to the home directory), answer and grade, wait for the chart."""
    import re

    open_page(page, url, "qa", QA_QUERY)
    main_block = page.get_by_test_id("stMain")
    main_block.get_by_label("Endpoint URL (OpenAI-compatible)", exact=True).fill(endpoint)
    main_block.get_by_label("Answer model", exact=True).fill(models[0])
    main_block.get_by_label("Judge model (blank: the answer model)", exact=True).fill(models[1])
    main_block.get_by_test_id("stCheckbox").filter(has_text="Cache replies").click()
    main_block.get_by_role("button", name=re.compile("^Answer and grade")).click()
    main_block.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=180_000)
    wait_until_idle(page)
    page.wait_for_timeout(500)  # the chart draws after the run ends
    wait_until_idle(page)


def table_rows(page, index: int = 0) -> list[str]:
    """The rows of the ``index``-th ``st.table`` of the page, as text."""
    return page.get_by_test_id("stTable").nth(index).locator("tbody tr").all_inner_texts()


def errors_on(page) -> list[str]:
    """The exception boxes the page shows (none, on a healthy page)."""
    return page.get_by_test_id("stException").all_inner_texts()


def shrink_png(path: Path) -> None:
    """Re-save the PNG optimised, in full colour: a palette merged the small patches of colour
    (a legend's symbols, a few green dots) into grey."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return
    with Image.open(path) as im:
        rgb = im.convert("RGB")
    rgb.save(path, optimize=True)


def main(outdir: Path = ROOT / "docs") -> list[Path]:
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        chat = tmp / "chats.jsonl"
        chat.write_text(CHAT)
        with serve(tmp / "streamlit.log") as url, browser(tmp / "profile") as ctx:
            page = ctx.new_page()
            shots = {"playground": "", "replay": "", "tune": "", "sweep": "", "ab": "",
                     "budget": "dataset=pinned_profile", "compare": ""}
            for name, query in shots.items():
                open_page(page, url, name, query)
                if name == "budget":  # a budget the pinned facts alone overflow: the note shows
                    wait_until_idle(page)  # a rerun may still show the last run's slider beside the new one
                    main_block = page.get_by_test_id("stMain")
                    slider = main_block.locator('input[type="range"][aria-label="token_budget"]').last
                    slider.focus()
                    for _ in range(config_steps_to(50)):
                        slider.press("ArrowLeft")
                    wait_until_idle(page)
                    page.wait_for_timeout(300)
                if name == "tune":  # the README's: the first screenful of Tune
                    written.append(_shot(page, outdir / "dashboard.png", full=False))
                written.append(_shot(page, outdir / f"{name}.png", full=True))
            import_chat(page, url, chat)
            written.append(_shot(page, outdir / "import.png", full=True))
            with loopback_llm() as endpoint:
                run_qa(page, url, endpoint)
                written.append(_shot(page, outdir / "qa.png", full=True))
    for path in written:
        shrink_png(path)
        print(f"wrote {path} ({os.path.getsize(path) // 1024} KiB)")
    return written


def config_steps_to(budget: int) -> int:
    """How many steps left from the Budget page's default budget to ``budget``."""
    sys.path.insert(0, str(ROOT))
    from app_pages import config

    return config.BUDGETS.index(config.DEFAULT_BUDGET) - config.BUDGETS.index(budget)


def _shot(page, path: Path, full: bool) -> Path:
    """A screenshot of the page; ``full``: all of it (Streamlit scrolls inside its main block, so
    the window is made as tall as the content first)."""
    if full:
        height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], min(height, 5000))})
        page.wait_for_timeout(500)
        wait_until_idle(page)
    page.screenshot(path=str(path))
    page.set_viewport_size(VIEWPORT)
    return path


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
