"""The README runs as written: its Python examples in a fresh interpreter, and its `vxmem` commands.

A Python block preceded by ``<!-- quickstart -->`` or ``<!-- example -->`` (in the README or in a
page of docs/) runs twice in a row,
in a fresh interpreter with the network refused, and must succeed both times with the same
output: a reader who runs it again gets what they got the first time. It runs on the suite's
hashing embedder and on the default model, the one a reader gets.

The bash block preceded by ``<!-- cli -->`` runs line by line, in order, in a temporary directory
holding a copy of the shipped ``datasets/``: the commands a reader types in a fresh clone.

The README and docs/ARCHITECTURE.md stay short (at most 350 and 150 lines: detail goes to a page
of docs/, linked), and every relative link of the README and of docs/ leads to a file that
exists, and to a heading that exists when it names one.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, run_python

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_LINES = {"README.md": 350, "docs/ARCHITECTURE.md": 150}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.S | re.M)

# Commands of the CLI block that are too long to run in the suite, each with its reason. What they
# exercise is covered elsewhere; the lines after them must not need their output.
SLOW = {
    "vxmem sweep datasets/long_thread.jsonl": "a 110,700-point grid: about 12 s with the hashing embedder; "
                                              "grids and ranges are covered by tests/test_sweep.py and test_cli.py",
    "vxmem compare datasets/knowledge_update.jsonl": "two model-backed systems writing 239 lines each: about "
                                                     "15 s; tests/test_compare.py runs the same systems through "
                                                     "the CLI on a small conversation",
}

NO_NETWORK = """\
import socket

def _refuse(*args, **kwargs):
    raise OSError("the README's examples must run offline")

socket.socket.connect = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse
"""


def marked_blocks(marker: str, text: str = README) -> list[str]:
    """The fenced blocks of ``text`` that follow ``<!-- marker -->`` (blank lines allowed between)."""
    pattern = re.compile(rf"<!--\s*{marker}\s*-->\s*\n```\w*\n(.*?)^```[ \t]*$", re.S | re.M)
    return pattern.findall(text)


def cli_lines() -> list[str]:
    return [line.strip() for block in marked_blocks("cli") for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def python_examples() -> list[tuple[str, str]]:
    blocks = [("quickstart", b) for b in marked_blocks("quickstart")]
    blocks += [(f"example{i}", b) for i, b in enumerate(marked_blocks("example"), 1)]
    for page in DOCS:  # an example moved to a page of docs/ still runs as written
        found = marked_blocks("example", page.read_text(encoding="utf-8"))
        blocks += [(f"{page.stem.lower()}-example{i}", b) for i, b in enumerate(found, 1)]
    return blocks


def test_the_readme_has_a_quickstart_and_cli_examples():
    assert len(marked_blocks("quickstart")) == 1
    assert any(line.startswith("vxmem ") for line in cli_lines())


def test_every_vxmem_command_in_the_readme_is_in_the_checked_block():
    shown = [line.strip() for lang, body in FENCE.findall(README) for line in body.splitlines()
             if line.strip().startswith("vxmem ")]
    assert shown
    assert set(shown) <= set(cli_lines()), "a `vxmem` line outside the <!-- cli --> block is never run"


def test_every_skipped_command_is_in_the_readme():
    assert all(any(line.startswith(prefix) for line in cli_lines()) for prefix in SLOW)


@pytest.mark.parametrize("embedder", ["hashing", None], ids=["hashing", "default-model"])
@pytest.mark.parametrize("name,code", python_examples(), ids=[name for name, _ in python_examples()])
def test_python_example_runs_twice_with_the_same_output(name, code, embedder, tmp_path, monkeypatch):
    if embedder is None:
        monkeypatch.delenv("VXMEM_EMBEDDER", raising=False)  # Vectrix() as a reader gets it
    else:
        monkeypatch.setenv("VXMEM_EMBEDDER", embedder)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # tempfile.mkdtemp() in an example lands here
    monkeypatch.chdir(tmp_path)
    runs = [run_python(NO_NETWORK + code, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout.strip()
    assert runs[0].stdout == runs[1].stdout


# Runs a group of the CLI block's `vxmem` lines in one interpreter, in order, each as the console
# script would (vxmem.cli.main on its arguments): one start instead of one per line, about a second each.
CLI_RUNNER = """\
import json, sys
from vxmem.cli import main

for argv in json.loads(sys.argv[1]):
    print("$ vxmem " + " ".join(argv), flush=True)
    code = main(argv)
    sys.stdout.flush()
    if code != 0:
        sys.exit(f"exit {code}: vxmem {' '.join(argv)}")
"""


def cli_steps(lines: list[str]) -> list[tuple[str, object]]:
    """``lines`` in order as steps: ("vxmem", [argv, ...]) for a run of plain `vxmem` commands,
    ("bash", line) for a line with shell syntax. ``vxmem --version`` goes through bash and the
    installed console script, so the entry point itself is run too."""
    steps: list[tuple[str, object]] = []
    for line in lines:
        words = shlex.split(line, comments=True)
        plain = words[0] == "vxmem" and words[1:] != ["--version"] and not set(line) & set("|&;<>$`")
        if not plain:
            steps.append(("bash", line))
        elif steps and steps[-1][0] == "vxmem":
            steps[-1][1].append(words[1:])
        else:
            steps.append(("vxmem", [words[1:]]))
    return steps


def test_cli_steps_keep_the_order_and_send_shell_syntax_to_bash():
    steps = cli_steps(["vxmem a b  # note", "printf 'x' > f", "vxmem c \"d e\"", "vxmem d", "vxmem --version"])
    assert steps == [("vxmem", [["a", "b"]]), ("bash", "printf 'x' > f"), ("vxmem", [["c", "d e"], ["d"]]),
                     ("bash", "vxmem --version")]


@pytest.mark.slow
def test_the_cli_examples_run_in_a_fresh_clone(tmp_path):
    shutil.copytree(ROOT / "datasets", tmp_path / "datasets")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "vxmem").exists(), f"no vxmem command beside {sys.executable}"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    lines = [line for line in cli_lines() if not any(line.startswith(prefix) for prefix in SLOW)]
    steps = cli_steps(lines)
    assert ("bash", "vxmem --version") in steps
    for kind, what in steps:
        cmd = ["bash", "-ec", what] if kind == "bash" else [sys.executable, "-c", CLI_RUNNER, json.dumps(what)]
        run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"{what}\n{run.stdout}\n{run.stderr}"
    assert sum(1 if kind == "bash" else len(what) for kind, what in steps) == len(lines)
    for name in ("drift.jsonl", "probes.csv", "drift.npz", "points.csv", "chat.jsonl"):
        assert (tmp_path / name).stat().st_size > 0, name


@pytest.mark.parametrize("name", sorted(MAX_LINES))
def test_the_readme_and_the_architecture_stay_short(name):
    lines = len((ROOT / name).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES[name], f"{name} has {lines} lines, over {MAX_LINES[name]}: move detail to docs/"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """``text`` without its fenced blocks and inline code, where a link is not a link."""
    text = re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _prose_keep_code(page: Path) -> str:
    """``page`` without its fenced blocks (a ``# comment`` in one is no heading); inline code kept."""
    return re.sub(r"^```.*?^```[ \t]*$", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page``: lower case, punctuation dropped, spaces to -."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", _prose_keep_code(page), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(_prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto: ... are not checked


def test_the_readme_links_to_pages_of_docs():
    assert any(target.startswith("docs/") for target in _relative_links(ROOT / "README.md"))


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_somewhere(page):
    broken = []
    for target in _relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"broken links in {page.relative_to(ROOT)}: {broken}"


def test_the_serving_page_shows_the_readmes_server_examples():
    import json

    serving = (ROOT / "docs" / "SERVING.md").read_text(encoding="utf-8")

    def block(page: str, marker: str, lang: str) -> str:
        return re.search(rf"<!--\s*{marker}\s*-->\s*\n```{lang}\n(.*?)^```", page, re.S | re.M).group(1)

    assert block(serving, "serve", "bash") == block(README, "serve", "bash")
    assert json.loads(block(serving, "mcp-config", "json")) == json.loads(block(README, "mcp-config", "json"))
