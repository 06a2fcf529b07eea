"""The house plan holds: layers import only downwards, and the face shows the spec."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from vxmem import ConversationMemory, Vectrix
from vxmem.store import Collection

from helpers import ROOT, run_python

# docs/ARCHITECTURE.md's layer map, bottom up: a package (or a top-level module) and the layer it is.
LAYERS = [
    ("core", {"core"}),
    ("models", {"models"}),
    ("ranking", {"ranking"}),
    ("store", {"store"}),
    ("memory", {"memory", "llm"}),  # llm: the chat-completions judge and summarizer (the llm extra)
    ("face", {"vectrix", "aio", "client"}),  # aio: AsyncVectrix, the verbs awaitable; client: the verbs over HTTP
    ("workbench", {"workbench"}),
    ("presentation", {"cli", "__main__", "integrations", "serve"}),  # cli: the `vxmem` command, every verb of it;
    # integrations: LangChain (the langchain extra); serve: the REST API and the MCP server (the server extra)
]


def _layer(module: str) -> int:
    room = module.split(".")[1] if "." in module else module
    for rank, (_, rooms) in enumerate(LAYERS):
        if room in rooms:
            return rank
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS (and to docs/ARCHITECTURE.md)")


def _vxmem_imports(path: Path, module: str) -> set[str]:
    """The vxmem modules ``path`` imports, absolute (``vxmem.store.mirror.mirror``)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("vxmem"):
                out.add(target)
                # ``from . import scoring`` imports the module vxmem.ranking.scoring
                out.update(f"{target}.{a.name}" for a in node.names
                           if (ROOT / f"{target}.{a.name}".replace(".", "/")).with_suffix(".py").exists())
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("vxmem"))
    return out


def _modules():
    """Every module of the package but its face, vxmem/__init__.py, which hands every layer's names on."""
    for path in sorted((ROOT / "vxmem").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module != "vxmem":
            yield path, module


@pytest.mark.parametrize("path, module", list(_modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_layer_imports_only_layers_below_it(path, module):
    own = _layer(module)
    for target in _vxmem_imports(path, module):
        if target == "vxmem" or target.startswith(module + "."):
            continue
        assert _layer(target) <= own, f"{module} ({LAYERS[own][0]}) imports {target} ({LAYERS[_layer(target)][0]})"


# The memory reaches the store through the seam alone (docs/ARCHITECTURE.md, "The seam"), so
# a second store (PostgreSQL) can stand behind it: its Protocols and the plain values it hands on.
SEAM_MODULES = {"vxmem.store.seam"}


@pytest.mark.parametrize("path, module", [(p, m) for p, m in _modules() if m.startswith("vxmem.memory")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_the_memory_imports_nothing_of_the_store_but_the_seam(path, module):
    store = {t for t in _vxmem_imports(path, module) if t == "vxmem.store" or t.startswith("vxmem.store.")}
    assert store <= SEAM_MODULES, f"{module} imports {sorted(store - SEAM_MODULES)}: reach the store through the seam"


def test_the_seam_rule_sees_a_reach_past_it(tmp_path):
    path = tmp_path / "reach.py"
    path.write_text("from ..store.mirror.mirror import Mirror\nfrom ..store import seam\nimport vxmem.store.engine\n")
    got = _vxmem_imports(path, "vxmem.memory.reach")
    assert {"vxmem.store.mirror.mirror", "vxmem.store", "vxmem.store.seam", "vxmem.store.engine"} <= got


def test_importing_the_collection_loads_no_memory():
    out = run_python("""
        import sys
        import vxmem.store
        print(sorted(m for m in sys.modules if m.startswith("vxmem")))
    """)
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout)
    assert "vxmem.store.collection" in loaded
    assert not {"vxmem.memory", "vxmem.vectrix", "vxmem.memory.recall", "vxmem.workbench"} & set(loaded)


@pytest.mark.parametrize("package", ["vxmem.workbench.replay", "vxmem.workbench.sweep", "vxmem.workbench.analysis"])
def test_a_workbench_package_hands_on_its_modules_public_names(package):
    # the documented paths: from vxmem.workbench.replay import replay, from vxmem.workbench.sweep import sweep, ...
    pkg = importlib.import_module(package)
    assert pkg.__all__
    for name in pkg.__all__:
        value = getattr(pkg, name)
        if callable(value):
            assert value.__module__.startswith(package + "."), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        assert pkg.nope is None  # never reached: the name is not handed on


def test_importing_one_module_of_a_workbench_package_loads_no_other():
    out = run_python("""
        import sys
        import vxmem.workbench.sweep.policies
        import vxmem.workbench.analysis.metrics
        print(sorted(m for m in sys.modules if m.startswith("vxmem.workbench")))
    """)
    assert out.returncode == 0, out.stderr
    assert eval(out.stdout) == ["vxmem.workbench", "vxmem.workbench.analysis", "vxmem.workbench.analysis.metrics",
                                "vxmem.workbench.sweep", "vxmem.workbench.sweep.policies"]


@pytest.mark.parametrize("name", ["remember", "remember_many", "warm", "recall", "feedback", "context", "forget",
                                  "consolidate", "expire", "turns", "history"])
def test_every_delegate_has_the_memory_methods_signature_and_docstring(name):
    delegate, method = getattr(Vectrix, name), getattr(ConversationMemory, name)
    assert inspect.signature(delegate) == inspect.signature(method)
    assert delegate.__doc__ == method.__doc__ and method.__doc__


def test_help_on_recall_shows_the_spec_parameters():
    params = inspect.signature(Vectrix().recall).parameters
    assert list(params)[:10] == ["query", "session", "limit", "token_budget", "score_gap", "kinds",
                                 "include_superseded", "mode", "now", "exclude_ids"]
    assert params["limit"].default == 10 and params["kinds"].default == ("turn", "fact", "pinned")


def test_a_plain_collection_frames_only_what_it_knows():
    with Collection() as db:
        db.add(["alpha beta"], metadata=[{"_vx_kind": "turn", "_vx_ts": 0.0}])
        assert list(db.search("alpha").to_frame().columns) == ["rank", "id", "text", "score"]


def test_a_memory_collection_frames_the_memory_columns_on_search_and_recall():
    db = Vectrix()
    db.remember("hello there", session="s", timestamp=0)
    searched = db.search("hello").to_frame()
    assert {"kind", "session", "role", "turn", "ts"} <= set(searched.columns)
    recalled = db.recall("hello", session="s", now=10).to_frame()
    assert {"relevance", "relevance_norm", "recency", "feedback", "score", "age_days", "mode", "kind"} <= set(
        recalled.columns)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_two_modules_import_each_other_even_through_others():
    modules = dict((m, p) for p, m in _modules())
    graph = {m: {t for t in _vxmem_imports(p, m) if t in modules and t != m} for m, p in modules.items()}
    # a package's __init__ handing on its modules' names is not a cycle with them
    graph = {m: {t for t in ts if not (m.startswith(t + ".") and modules[t].name == "__init__.py")}
             for m, ts in graph.items()}
    assert _cycles(graph) == []


def test_the_top_level_holds_the_face_and_few_modules_beside_the_packages():
    top = sorted(p.name for p in (ROOT / "vxmem").glob("*.py"))
    packages = sorted(p.name for p in (ROOT / "vxmem").iterdir() if (p / "__init__.py").exists())
    assert len(top) <= 8, top
    assert packages == ["cli", "core", "integrations", "memory", "models", "ranking", "serve", "store", "workbench"]
    assert len(LAYERS) == 8  # every import runs down this map: at most 8 layers deep
