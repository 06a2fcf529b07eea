"""Shared fixtures and the hypothesis profile. Helpers that tests import live in helpers.py."""

import os
import tempfile

# Bookkeeping tests run on the model-free hashing embedder: Vectrix() with no embedder uses it here
# (and in every child interpreter a test starts). The default model's own tests ask for it by name,
# and `VXMEM_EMBEDDER=bge-small pytest` runs the whole suite on it. The embedding cache of replays
# goes to a directory of this run, never to ~/.cache.
os.environ.setdefault("VXMEM_EMBEDDER", "hashing")
os.environ.setdefault("VXMEM_CACHE_DIR", tempfile.mkdtemp(prefix="vxmem-test-cache-"))

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from vxmem.models.embed import get_embedder

from helpers import CHAT_CSV, WordHashEmbedder  # noqa: E402

# CI never fails by chance: the same examples every run, no example database between runs.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.load_profile("ci")


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
