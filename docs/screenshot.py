"""Start the workbench headless, open it in Debian's Chromium through Playwright, save a screenshot.

    python docs/screenshot.py [out.png]        (or: make screenshot)  -> docs/dashboard.png

The browser is the system's (``apt-get install chromium``), never a download: Playwright
for Python only drives it. ``tests/test_browser.py`` uses the same two context managers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1360, "height": 1180}


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
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
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
        proc.terminate()
        try:
            proc.wait(timeout=10)
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


def open_tune(page, url: str) -> None:
    page.goto(f"{url}/tune")
    page.get_by_test_id("stTable").wait_for(timeout=60_000)
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(timeout=60_000)
    wait_until_idle(page)


def shrink_png(path: Path, colors: int = 128) -> None:
    """Quantise the PNG to a palette: a README screenshot does not need 24-bit colour."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def main(out: Path = ROOT / "docs" / "dashboard.png") -> Path:
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with serve(tmp / "streamlit.log") as url, browser(tmp / "profile") as ctx:
            page = ctx.new_page()
            open_tune(page, url)
            page.screenshot(path=str(out))
    shrink_png(out)
    print(f"wrote {out} ({os.path.getsize(out) // 1024} KiB)")
    return out


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "dashboard.png")
