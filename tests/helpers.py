"""What several test files share: constants, a fast embedder, child interpreters, and
white-box looks that go through the collection's public parts only (``db.engine.locked()``,
``db.engine.database``; see docs/ARCHITECTURE.md)."""

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np

from vxmem.core.clock import DAY

T0 = 1_700_000_000.0  # a fixed "now" for tests that pass time explicitly
TESTS = str(Path(__file__).resolve().parent)
ROOT = Path(TESTS).parent

__all__ = ["DAY", "T0", "TESTS", "ROOT", "CHAT_CSV", "WordHashEmbedder", "run_python", "vxmem_here", "fts_count",
           "vector_of", "new_pg_database", "drop_pg_database"]

# A chat log of three turns in one session, as a CSV export (the `imported` fixture imports it).
CHAT_CSV = ("session,role,text,timestamp\n"
            "me,user,I live in Lisbon,2024-01-01T09:00:00Z\n"
            "me,user,My cat is called Miso,2024-01-02T09:00:00Z\n"
            "me,user,I moved from Lisbon to Porto last week,2024-03-01T09:00:00Z\n")


class WordHashEmbedder:
    """A trivial, fast, deterministic embedder: each lower-cased word lands on one of
    ``dim`` buckets (crc32, so the same in every process). Lexical, like the default, at a
    fraction of its start-up cost; for tests that exercise bookkeeping, not ranking quality."""

    def __init__(self, dim: int = 32):
        self.dim = dim

    def __call__(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.encode("utf-8", "surrogatepass")) % self.dim] += 1.0
            out[i, zlib.crc32(t.encode("utf-8", "surrogatepass")) % self.dim] += 0.01
        return out


def run_python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``code`` (dedented) in a fresh interpreter that can ``import helpers``."""
    prelude = f"import sys\nsys.path.insert(0, {TESTS!r})\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code), *args], capture_output=True,
                          text=True, timeout=timeout)


def vxmem_here(*args: str) -> subprocess.CompletedProcess:
    """``vxmem *args`` run to its end in this process by ``vxmem.cli.main``, its stdout and stderr
    captured, shaped as ``servers.run_vxmem``'s answer. For commands that print and end (keys,
    export, restore), where a child interpreter (about a second to start) adds nothing a test
    checks; a test of the process itself (serving, signals, exit on a crash) starts one."""
    from vxmem.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["vxmem", *args], code, out.getvalue(), err.getvalue())


def fts_count(db, word: str, pending: bool = True) -> int:
    """How many documents FTS5 itself says hold ``word``, once a writer has indexed the ones
    it holds back for its next batch (``pending=False``: as FTS5 stands)."""
    if pending:
        db.engine.database.index_pending()
    return db.engine.database.conn.execute("SELECT count(*) FROM vx_fts WHERE vx_fts MATCH ?",
                                     (f'"{word}"',)).fetchone()[0]


def vector_of(db, id: str) -> list:
    """The vector the collection holds for ``id``, as a list."""
    with db.engine.locked() as m:
        return m.vector(m.pos_of_id[id]).tolist()


def reap(proc: subprocess.Popen) -> None:
    """Kill ``proc`` if it still runs, wait for it, and close the pipes it was given."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def new_pg_database(server_url: str) -> str:
    """A new, empty database on the PostgreSQL server at ``server_url``: its URL."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"vx_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))


def drop_pg_database(server_url: str, url: str) -> None:
    """Drop the database ``new_pg_database`` made (its connections ended first)."""
    from urllib.parse import urlsplit

    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def play_history(db, ops, start: float = T0) -> list[str]:
    """Play a random history's ``ops`` on ``db``, an hour apart from ``start`` (the property tests'
    operations: ``("remember", kind, session, user, ttl_days, text)``, ``("feedback", i, outcome, text)``,
    ``("forget", i)``, ``("expire",)``; ``i`` picks a live memory); the ids it made, in order."""
    ids, ts = [], start
    for op in ops:
        ts += 3600.0
        live = [i for i in ids if i in db]
        if op[0] == "remember":
            _, kind, session, user, ttl, text = op
            ids.append(db.remember(text, session=session, user=user, ttl_days=ttl, pinned=kind == "pinned",
                                   kind="fact" if kind == "fact" else None, timestamp=ts))
        elif op[0] == "feedback" and live:
            new = db.feedback(live[op[1] % len(live)], op[2], correction=op[3] if op[2] == "corrected" else None,
                              timestamp=ts)
            ids += [new] if new else []
        elif op[0] == "forget" and live:
            db.forget(ids=[live[op[1] % len(live)]], now=ts)
        elif op[0] == "expire":
            db.expire(now=ts)
    return ids


CHROMIUM = "/usr/bin/chromium"  # Debian's: `make test` installs it with apt-get where it is missing


def need_browser() -> None:
    """Chromium and Playwright, or the test cannot run: skipped on a machine without them, failed
    in CI (where `make test` must have installed them)."""
    import pytest  # here, not at the top: the writer and crash children import this module too

    for ok, why in ((Path(CHROMIUM).exists(), f"{CHROMIUM} is missing (apt-get install -y chromium)"),
                    (importlib.util.find_spec("playwright") is not None,
                     "the playwright package is missing (pip install playwright)")):
        if ok:
            continue
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must run the browser tests (make test installs chromium with apt-get)")
        pytest.skip(f"{why}: cannot run the browser test on this machine")


def screenshot_module():
    """docs/screenshot.py as a module: the workbench's server and browser helpers the browser tests share."""
    spec = importlib.util.spec_from_file_location("workbench_screenshot", ROOT / "docs" / "screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def query_of(page) -> dict:
    """The query parameters of a Playwright page's URL, one value each."""
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def wait_for_url(page, key: str, value: str, seconds: float = 30) -> None:
    """Wait (bounded) until the page's URL holds ``key=value``: the app writes it on its next run."""
    deadline = time.monotonic() + seconds
    while query_of(page).get(key) != value and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert query_of(page).get(key) == value, page.url
