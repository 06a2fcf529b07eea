"""Starting the real servers for the tests: ``vxmem serve`` as a child process on a free
loopback port, ready once ``/healthz`` answers."""

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time

import httpx

from helpers import ROOT


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, attempts: int = 600, log=None) -> None:
    """Poll ``url/healthz`` until it answers; fail with the server's stderr (its pipe, or the
    file ``log``) if it exits first. One client for every poll: ``httpx.get`` makes a client,
    and its TLS context, each time (some 24 ms of CPU a poll, a quarter second a server start)."""
    with httpx.Client(timeout=2) as client:
        for _ in range(attempts):
            if proc.poll() is not None:
                if log is not None:
                    log.seek(0)
                said = (log or proc.stderr).read()
                raise AssertionError(f"the server exited ({proc.returncode}): {said}")
            try:
                if client.get(f"{url}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # a poll interval, never asserted on
    raise AssertionError("the server never answered /healthz")


@contextlib.contextmanager
def rest_server(db_path, *flags: str, env: dict | None = None, log=None):
    """``vxmem serve --db db_path *flags`` on a free port; yields its base URL (always loopback).
    Its stderr (the access log among it) goes to the file ``log`` if given, else to one of its
    own: a pipe no one reads would stop the server once full."""
    port = free_port()
    cmd = [sys.executable, "-m", "vxmem", "serve", "--db", str(db_path), "--port", str(port), *flags]
    with contextlib.ExitStack() as stack:
        err = log if log is not None else stack.enter_context(tempfile.TemporaryFile("w+"))
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                env={**os.environ, **(env or {})})
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, proc, log=err)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
                proc.wait()


def run_vxmem(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m vxmem *args``, to its end."""
    return subprocess.run([sys.executable, "-m", "vxmem", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@contextlib.contextmanager
def llm_stub():
    """The loopback chat-completions server (``tests/llm_server.py``, a real process playing back
    ``tests/data/llm_answers.json``): its base URL, ``http://127.0.0.1:PORT``."""
    from helpers import TESTS, reap

    answers = os.path.join(TESTS, "data", "llm_answers.json")
    proc = subprocess.Popen([sys.executable, os.path.join(TESTS, "llm_server.py"), answers],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"the loopback server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        finally:
            reap(proc)


def stub_rewound(base: str) -> str:
    """The loopback chat stub at ``base`` with its scripts rewound and its request log empty: its URL for the SDK."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{base}/reset", data=b"{}", method="POST"), timeout=10).read()
    return f"{base}/v1"


def stub_received(url: str) -> list[dict]:
    """The request bodies the loopback chat stub (its SDK ``url``) received since it was rewound."""
    import json
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/v1") + "/requests", timeout=10) as r:
        return json.loads(r.read())
