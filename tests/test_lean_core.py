"""The core install is lean: the library and the servers import no workbench package (pandas,
scikit-learn, pyarrow, joblib, scipy), and what does need one names the extra that brings it."""

import asyncio
import tomllib

import httpx
import pytest

from helpers import DAY, ROOT, T0, run_python
from servers import rest_server

WORKBENCH = ("pandas", "sklearn", "pyarrow", "joblib", "scipy")


def _imported(stderr: str) -> set[str]:
    """The top-level modules a ``-X importtime`` log says were imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_the_core_dependencies_leave_the_workbench_packages_to_their_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    assert not any(name in core for name in ("pandas", "scikit-learn", "pyarrow", "joblib", "scipy"))
    extras = project["optional-dependencies"]
    assert {"pandas", "scikit-learn", "pyarrow", "joblib"} <= {d.split(">")[0] for d in extras["workbench"]}
    for extra in ("app", "notebooks", "compare"):  # each imports pandas
        assert "vxmem[workbench]" in extras[extra]
    install = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "pip install -e" in line)
    assert "workbench" in install.split("[")[1]  # `make app` and `make test` install it


def test_tokenizers_is_only_the_tests_reference():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("tokenizers") for d in project["dependencies"])
    assert any(d.startswith("tokenizers") for d in project["optional-dependencies"]["dev"])


@pytest.mark.model
@pytest.mark.subprocess
def test_the_default_models_remember_and_recall_without_tokenizers_installed():
    """As on a core install: importing tokenizers (or the Hugging Face hub it brings) fails."""
    out = run_python("""
        import sys
        for name in ("tokenizers", "huggingface_hub"):
            sys.modules[name] = None
        from vxmem import Vectrix
        db = Vectrix()
        db.remember("I moved to Lisbon last spring", timestamp=0)
        db.remember("my sister plays the cello", timestamp=1)
        for preset in ("default", "accurate"):  # late interaction; and the cross-encoder
            print(db.recall("where do I live now?", now=2, preset=preset)[0].text)
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("tokenizers", "huggingface_hub")
                     and sys.modules[m] is not None))
    """, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["I moved to Lisbon last spring"] * 2 + ["[]"]


@pytest.mark.subprocess
def test_a_process_using_the_library_and_building_both_servers_imports_no_workbench_package():
    out = run_python("""
        import sys
        import vxmem
        from vxmem import Vectrix
        from vxmem.serve.mcp import build_server
        from vxmem.serve.rest import create_app
        db = Vectrix(embedder="hashing")
        db.remember("I prefer dark mode", timestamp=0)
        print(len(db.recall("which theme?", now=1)), callable(create_app), callable(build_server))
        print(sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[1:]))
    """, *WORKBENCH)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1 True True", "[]"]


@pytest.mark.subprocess
def test_a_server_answering_rest_and_mcp_imports_no_workbench_package(tmp_path):
    mcp = pytest.importorskip("mcp")
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    log = (tmp_path / "server.log").open("w+")
    with rest_server(tmp_path / "m.vxdb", "--embedder", "hashing", "--user", "solo", log=log,
                     env={"PYTHONPROFILEIMPORTTIME": "1"}) as url:
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.post("/v1/remember", json={"text": "the car is on level 3", "timestamp": T0}).status_code == 200
            found = c.post("/v1/recall", json={"query": "where is the car", "now": T0 + DAY}).json()
        assert [r["text"] for r in found["results"]] == ["the car is on level 3"]
        log.seek(0)
        assert "mcp" not in _imported(log.read())  # the MCP SDK loads with the first request to /mcp

        async def over_mcp():
            http = httpx2.AsyncClient(timeout=60)
            async with mcp.Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                return await client.call_tool("recall", {"query": "car level"})

        recalled = asyncio.run(over_mcp())
    assert not recalled.is_error
    log.seek(0)
    imported = _imported(log.read())
    assert {"vxmem", "fastapi", "mcp", "numpy"} <= imported  # the log is the server's whole import list
    assert not imported & set(WORKBENCH)


@pytest.mark.subprocess
def test_without_pandas_to_frame_and_the_workbench_commands_name_the_extra():
    out = run_python("""
        import sys
        sys.modules["pandas"] = None  # as on a core install: importing it fails
        from vxmem import Vectrix
        from vxmem.cli import main
        db = Vectrix(embedder="hashing")
        db.remember("I prefer dark mode", timestamp=0)
        try:
            db.recall("theme", now=1).to_frame()
        except ImportError as exc:
            print(exc)
        print(main(["replay", sys.argv[1], "--embedder", "hashing"]))
    """, str(ROOT / "datasets" / "knowledge_update.jsonl"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ['to_frame() needs pandas: pip install "vxmem[workbench]"', "2"]
    assert "replay needs the 'workbench' extra (pandas is missing): pip install 'vxmem[workbench]'" in out.stderr
