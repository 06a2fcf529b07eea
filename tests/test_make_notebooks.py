"""`make notebooks` starts JupyterLab on the project's notebooks, as root (CI, containers) and as anyone else."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from importlib.util import find_spec

import pytest

from helpers import ROOT

# Checked without importing it (about 2 s of CPU in every xdist worker that collects this module):
# the test runs JupyterLab through `make notebooks`, in a process of its own.
pytestmark = pytest.mark.skipif(find_spec("jupyterlab") is None, reason="needs jupyterlab (the notebooks extra)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answer(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_notebooks_starts_jupyterlab_that_answers_on_its_port():
    port = _free_port()
    proc = subprocess.Popen(["make", "-s", "notebooks", f"NOTEBOOKS_PORT={port}"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        answer = None
        deadline = time.monotonic() + 120  # a readiness wait, not a measurement: JupyterLab's start-up
        while answer is None and proc.poll() is None and time.monotonic() < deadline:
            answer = _answer(port)
            if answer is None:
                time.sleep(0.5)
        output = "" if answer is not None else proc.communicate(timeout=10)[0] if proc.poll() is not None else ""
        assert answer is not None and "version" in answer, f"JupyterLab did not start (uid {os.getuid()}):\n{output}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
