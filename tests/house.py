"""The house rules, read from the code: small rooms, short functions, privacy at module level.

- no module of ``vxmem/`` over :data:`MAX_FILE_LINES` lines;
- no function of ``vxmem/`` over :data:`MAX_FUNCTION_LINES` lines (signature, docstring and body);
- no folder of ``vxmem/`` holding more than :data:`MAX_FOLDER_MODULES` modules (its own ``*.py``
  files, ``__init__.py`` counted; a folder of more is split by role into sub-packages);
- no reach into another module's private names, in ``vxmem/``, ``tests/``, ``app_pages/`` and
  ``benchmarks/``: ``x._name`` where ``x`` is not ``self`` or ``cls`` and ``_name`` is not
  defined in the same file, and ``from module import _name``;
- no file under ``tests/data/`` that git ignores: a fixture the suite opens must reach a clean
  checkout.

``python tests/house.py`` prints every breach and exits 1 if there is one (``make lint`` runs
it); ``tests/test_house.py`` asserts there are none.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_FOLDER_MODULES = 15
PRIVACY_ROOTS = ("vxmem", "tests", "app_pages", "benchmarks")
# Public names that start with an underscore by convention: os._exit, and namedtuple's API.
PUBLIC_UNDERSCORED = {"_exit", "_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def python_files(*roots: str) -> Iterator[Path]:
    for root in roots:
        yield from sorted((ROOT / root).rglob("*.py"))


def _defined_here(tree: ast.AST) -> set[str]:
    """Every name the file itself defines: functions, classes, assigned names and attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)  # namedtuple/dataclass fields made by keyword, argparse dests
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_"):
            names.add(node.value)  # __slots__ entries, getattr names, argparse dest="_x"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("--_"):
            names.add(node.value[2:].replace("-", "_"))  # an argparse option "--_child" is args._child
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def private_reaches(path: Path) -> list[str]:
    """``file:line: name`` for every reach into another module's private names in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _defined_here(tree)
    out = []
    rel = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out += [f"{rel}:{node.lineno}: from {node.module} import {a.name}"
                    for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                out.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return out


def long_functions(path: Path) -> list[str]:
    """``file:line: name (n lines)`` for every function over :data:`MAX_FUNCTION_LINES`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(ROOT)
    return [f"{rel}:{n.lineno}: {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno is not None and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]


def long_files(path: Path) -> list[str]:
    n = len(path.read_text().splitlines())
    return [f"{path.relative_to(ROOT)}: {n} lines"] if n > MAX_FILE_LINES else []


def crowded_folders(root: str = "vxmem") -> list[str]:
    """``folder/: n modules`` for every folder under ``root`` with more than :data:`MAX_FOLDER_MODULES`."""
    folders = [ROOT / root, *sorted(p for p in (ROOT / root).rglob("*") if p.is_dir() and p.name != "__pycache__")]
    counts = {folder: len(list(folder.glob("*.py"))) for folder in folders}
    return [f"{folder.relative_to(ROOT)}/: {n} modules" for folder, n in counts.items() if n > MAX_FOLDER_MODULES]


def ignored_fixtures(folder: str = "tests/data") -> list[str]:
    """Files under ``folder`` that git ignores, so a clean checkout would not have them.

    Empty where git or the repository is missing (an unpacked release has nothing to check).
    """
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*") if p.is_file())
    if not files:
        return []
    try:
        done = subprocess.run(["git", "check-ignore", *files], cwd=ROOT,
                              capture_output=True, text=True, check=False)
    except OSError:
        return []
    return done.stdout.split() if done.returncode == 0 else []


def breaches() -> dict[str, list[str]]:
    """Every breach of the house rules, by rule."""
    return {
        f"files over {MAX_FILE_LINES} lines": [b for p in python_files("vxmem") for b in long_files(p)],
        f"functions over {MAX_FUNCTION_LINES} lines": [b for p in python_files("vxmem") for b in long_functions(p)],
        f"folders of more than {MAX_FOLDER_MODULES} modules": crowded_folders(),
        "reaches into another module's private names": [b for p in python_files(*PRIVACY_ROOTS)
                                                        for b in private_reaches(p)],
        "test fixtures git ignores": ignored_fixtures(),
    }


def main() -> int:
    found = {rule: items for rule, items in breaches().items() if items}
    for rule, items in found.items():
        print(f"{rule}:")
        for item in items:
            print(f"  {item}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
