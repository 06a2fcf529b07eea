"""Shared fixtures and the hypothesis profile. Helpers that tests import live in helpers.py."""

import pytest
from hypothesis import settings

from vxmem.embed import default_embedder

from helpers import WordHashEmbedder

# CI never fails by chance: the same examples every run, no example database between runs.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def hashing_embedder():
    """The default embedder: the process-wide shared instance."""
    return default_embedder()


@pytest.fixture(scope="session")
def word_embedder():
    return WordHashEmbedder()
