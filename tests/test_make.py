"""The Makefile's set-up says what it is doing: `make app` on a fresh machine installs for minutes first."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_app_says_it_is_installing_before_it_installs(tmp_path):
    # A dry run in a fresh copy (no .venv): the commands a first `make app` runs, in order.
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    plan = subprocess.run(["make", "-n", "app"], cwd=tmp_path, capture_output=True, text=True, timeout=60).stdout
    lines = plan.splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install" in line and "-e" in line)
    venv = next(i for i, line in enumerate(lines) if "-m venv" in line)
    said = " ".join(lines[:install])
    assert "installing vxmem" in said and "a few minutes" in said, plan
    assert any("creating the virtual environment" in line for line in lines[:venv]), plan
