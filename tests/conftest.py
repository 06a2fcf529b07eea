"""Shared fixtures and the hypothesis profile. Helpers that tests import live in helpers.py."""

import functools
import os
import tempfile
import threading

# Bookkeeping tests run on the model-free hashing embedder: Vectrix() with no embedder uses it here
# (and in every child interpreter a test starts). The default model's own tests ask for it by name,
# and `VXMEM_EMBEDDER=bge-small pytest` runs the whole suite on it. The embedding cache of replays
# goes to a directory of this run, never to ~/.cache.
os.environ.setdefault("VXMEM_EMBEDDER", "hashing")
os.environ.setdefault("VXMEM_CACHE_DIR", tempfile.mkdtemp(prefix="vxmem-test-cache-"))
# Under pytest-xdist each worker inherits the controller's directory and takes a folder of its own in
# it: a worker's cache then sees only its own tests' work, as one serial run would.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["VXMEM_CACHE_DIR"] = os.path.join(os.environ["VXMEM_CACHE_DIR"], os.environ["PYTEST_XDIST_WORKER"])

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from vxmem.models.embed import get_embedder

from helpers import CHAT_CSV, WordHashEmbedder, drop_pg_database, need_browser, new_pg_database, screenshot_module  # noqa: E402

# Markers by module (registered in pyproject.toml, --strict-markers): a module is listed when some of its
# tests load a real ONNX model, or start interpreters or servers; `-m "not model and not subprocess"`
# then runs the in-process, model-free rest. `slow` goes on the tests themselves (see `make test-fast`).
MODEL_MODULES = {
    "test_cascade", "test_compare", "test_concurrency", "test_confidence", "test_default_model", "test_empty_pools",
    "test_late_context", "test_presets", "test_readme", "test_rerank", "test_semantic", "test_sweep", "test_views"}
SUBPROCESS_MODULES = {
    "test_browser", "test_cli", "test_client", "test_compare", "test_concurrency", "test_corrupt", "test_crash",
    "test_crash_points", "test_default_model", "test_disk_full", "test_export", "test_fts_batches", "test_hardening",
    "test_langchain", "test_keys", "test_layers", "test_llm", "test_make_notebooks", "test_mcp", "test_mcp_tools",
    "test_mirror_file",
    "test_notebooks", "test_postgres_processes", "test_reader_processes", "test_readers", "test_readme", "test_rest",
    "test_rest_records", "test_scaleout", "test_search_modes", "test_semantic", "test_serve_config",
    "test_serve_inputs_strict", "test_store", "test_vector_dtype"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.stem
        if module in MODEL_MODULES:
            item.add_marker(pytest.mark.model)
        if module in SUBPROCESS_MODULES:
            item.add_marker(pytest.mark.subprocess)
        if module.startswith("test_postgres"):
            item.add_marker(pytest.mark.postgres)


# CI never fails by chance: the same examples every run, no example database between runs.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.load_profile("ci")


@pytest.fixture
def make_db():
    """The one way a test builds a collection it does not close itself: ``make_db(**kwargs)`` is
    ``Vectrix(**kwargs)`` (in memory unless ``path=`` says otherwise), and every collection it made is
    closed at teardown, so no test leaves a database or an index thread behind for the next one."""
    from vxmem import Vectrix

    made: list[Vectrix] = []

    def make(path=None, **kwargs) -> Vectrix:
        made.append(Vectrix(path, **kwargs))
        return made[-1]

    yield make
    for handle in reversed(made):
        handle.close()


@pytest.fixture
def db(make_db):
    """An empty in-memory collection on the suite's embedder (hashing, unless VXMEM_EMBEDDER says
    otherwise). A module that needs another embedder or contents overrides it on ``make_db``."""
    return make_db()


@pytest.fixture(scope="session")
def hashing_embedder():
    """The hashing embedder: the process-wide shared instance."""
    return get_embedder("hashing")


@pytest.fixture(scope="session")
def word_embedder():
    return WordHashEmbedder()


@pytest.fixture
def imported(tmp_path, capsys):
    """A chat log (``CHAT_CSV``) imported by ``vxmem import`` as a vxmem JSONL dataset (no
    probes yet): its path and its turn labels."""
    from vxmem.cli import main
    from vxmem.workbench.datasets.jsonl import load_jsonl

    src, out = tmp_path / "chat.csv", tmp_path / "chat.jsonl"
    src.write_text(CHAT_CSV)
    assert main(["import", str(src), "-o", str(out)]) == 0
    capsys.readouterr()
    return out, [e.label for e in load_jsonl(out).events if e.type == "turn"]


@pytest.fixture(scope="session")
def pg_server():
    """The URL of a PostgreSQL server with pgvector: ``VXMEM_TEST_PG`` when set (an external
    server), otherwise one the pgserver wheel starts for this test session (one per xdist
    worker) and deletes at its end."""
    external = os.environ.get("VXMEM_TEST_PG")
    if external:
        yield external
        return
    import pgserver

    # Not under pytest's basetemp: as root, pgserver runs PostgreSQL as another user and opens
    # the folders above its data to it, and any pytest run that starts meanwhile closes
    # /tmp/pytest-of-root again (mode 0700), which kills the server mid-session.
    server = pgserver.get_server(tempfile.mkdtemp(prefix="vxmem-pg-"), cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server, dropped after the test: its URL."""
    url = new_pg_database(pg_server)
    yield url
    drop_pg_database(pg_server, url)


@pytest.fixture(scope="session")
def workbench_server(tmp_path_factory):
    """``streamlit run app.py`` as ``make app`` runs it (the project's config), shared by every
    browser test of this worker: (its URL, its log file). One server per worker, not one per
    module: each start costs some 5 s of CPU, and each page's first replay another few."""
    need_browser()
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with screenshot_module().serve(log) as url:
        yield url, log


@pytest.fixture(scope="session")
def app_url(workbench_server):
    """The URL of the shared workbench server."""
    return workbench_server[0]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, workbench_server):
    """A headless Chromium context with an empty profile, for one module's browser tests. Not kept
    for the session as the server is: Playwright's sync API holds an event loop on the thread
    while it is open, and every later ``asyncio.run()`` on that worker would then fail."""
    with screenshot_module().browser(tmp_path_factory.mktemp("profile")) as context:
        yield context


@pytest.fixture(scope="session", autouse=True)
def streamlit_components_scanned_once():
    """Every new AppTest looks for Streamlit components in the metadata of every installed
    distribution (streamlit.components.v2.manifest_scanner, about 0.5 s with this venv's few
    hundred packages, for none found), and the workbench tests make a new AppTest per test. What is
    installed does not change during a run: the scan's answer is kept for the session."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # no workbench extra: no AppTest either
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(manifest_scanner, "scan_component_manifests",
                   functools.cache(manifest_scanner.scan_component_manifests))
        yield


@pytest.fixture(scope="session", autouse=True)
def apptest_compiles_each_script_once():
    """Every AppTest keeps a script cache of its own, so each test compiled app.py and every page it
    opened again (Streamlit's "magic" rewrite of the syntax tree, then ``compile``): some 7% of the
    workbench tests' CPU. The bytecode is kept for the session, by path and by the file's bytes, so a
    script a test rewrites is compiled afresh."""
    try:
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    except ImportError:  # no workbench extra: no AppTest either
        yield
        return
    compile_one = ScriptCache.get_bytecode
    compiled: dict[tuple[str, bytes], object] = {}
    lock = threading.Lock()

    def get_bytecode(self, script_path: str):
        path = os.path.abspath(script_path)
        with open(path, "rb") as f:
            key = (path, f.read())
        with lock:
            code = compiled.get(key)
        if code is None:
            code = compile_one(self, script_path)
            with lock:
                compiled[key] = code
        return code

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ScriptCache, "get_bytecode", get_bytecode)
        yield


@pytest.fixture(scope="session", autouse=True)
def apptest_waits_for_its_run_without_polling():
    """AppTest.run() waits for the script's thread by waking every millisecond to scan the list of
    its events (streamlit.testing.v1.local_script_runner.require_widgets_deltas): a thousand
    wake-ups a second that take the GIL from the script it waits for, about a tenth of each run's
    CPU. The same wait, on the runner's own event signal: the same timeout and the same error."""
    try:
        from streamlit.runtime.scriptrunner import ScriptRunnerEvent
        from streamlit.testing.v1 import local_script_runner
    except ImportError:  # no workbench extra: no AppTest either
        yield
        return

    def wait_for_shutdown(runner, timeout: float = 3) -> None:
        done = threading.Event()

        def seen(sender, event, **kwargs):
            if event == ScriptRunnerEvent.SHUTDOWN:
                done.set()

        runner.on_event.connect(seen, weak=False)
        try:
            if runner.script_stopped() or done.wait(timeout) or runner.script_stopped():
                return
        finally:
            runner.on_event.disconnect(seen)
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local_script_runner, "require_widgets_deltas", wait_for_shutdown)
        yield


@pytest.fixture
def charts_from_channel_objects(monkeypatch):
    """The pages' charts are built from channel objects (``alt.X(...)``, ``alt.Tooltip(...)``), never
    from shorthand strings or plain dicts, which altair turns into channels by matching them against
    its whole schema: some 3 ms a channel on every rerun of a page. Any such conversion during the
    test fails it, naming the encoding."""
    from altair.utils import schemapi

    def refuse(cls, dct, *args, **kwargs):
        raise AssertionError(f"a chart channel built from {dct!r}: pass an altair channel object instead")

    monkeypatch.setattr(schemapi.SchemaBase, "from_dict", classmethod(refuse))
