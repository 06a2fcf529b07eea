"""The notebooks run top to bottom, offline, and are committed without outputs."""

import json
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

# Checked without importing: nbformat and nbclient (with jsonschema) take about 2 s of CPU to import,
# and every xdist worker collects this module whether or not it runs its tests.
pytestmark = pytest.mark.skipif(find_spec("nbformat") is None or find_spec("nbclient") is None,
                                reason="needs nbformat and nbclient (the notebooks extra)")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
KERNEL = "vxmem-test-venv"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A kernelspec that runs this interpreter (the venv's), whatever else is installed."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "vxmem test kernel", "language": "python"}))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(root))
    mp.setenv("MPLBACKEND", "Agg")
    yield KERNEL
    mp.undo()


def test_there_are_the_three_notebooks():
    assert [p.stem for p in NOTEBOOKS] == ["01_quickstart", "02_replay_and_sweep", "03_real_benchmark_format"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_an_id(path):
    # nbformat 4.5 wants one: without, every save rewrites the file and a validator warns
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert (raw["nbformat"], raw["nbformat_minor"]) >= (4, 5)
    ids = [c.get("id") for c in raw["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), f"{path.name}: cells without an id"


def _frozen_bars(nb) -> list[str]:
    """Progress bars a run left in the outputs: a saved notebook shows them stuck where they were drawn."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") + json.dumps(out.get("data", {}))
            if "it/s]" in text or "%|" in text or "widget-view" in text:
                found.append(f"cell {cell.get('id')}: {text[:120]}")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, kernel):
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=kernel, timeout=180,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert not _frozen_bars(nb)  # "replays: 0%| 0/2" forever, in a notebook read after its run
