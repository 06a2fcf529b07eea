"""Chroma as a compared system (optional: only when ``chromadb`` is installed).

An in-memory ``chromadb.EphemeralClient`` collection with cosine HNSW, embedded with vxmem's
own embedder (the same vectors vxmem searches, so the comparison is of what each system does
with them): nearest neighbours by cosine, filtered to the probe's session, nothing else.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...models.embed import check_embedder
from . import Query, Turn, embedder_arg

INSTALL = "the chroma system needs chromadb, which is not installed: pip install chromadb"
_names = itertools.count()


def check_available() -> None:
    """``ValueError`` with the install line when chromadb is missing."""
    import importlib.util

    if importlib.util.find_spec("chromadb") is None:
        raise ValueError(INSTALL)


class ChromaSystem:
    """Chroma's add and query, over vectors of vxmem's embedder (``embedder``: its name, None for the default)."""

    def __init__(self, embedder: str | None = None) -> None:
        import chromadb

        self.embed = check_embedder(embedder_arg(embedder))
        self.client = chromadb.EphemeralClient()
        self.coll = self.client.create_collection(f"compare{next(_names)}", embedding_function=None,
                                                  metadata={"hnsw:space": "cosine"})

    def warm(self) -> None:
        self.embed(["warm up"])

    def add(self, turn: Turn) -> None:
        vec = np.asarray(self.embed([turn.text]), dtype=np.float32)
        self.coll.add(ids=[turn.label], documents=[turn.text], embeddings=vec.tolist(),
                      metadatas=[{"session": turn.session or "", "time": float(turn.time)}])

    def forget(self, labels: Sequence[str], time: float) -> None:
        self.coll.delete(ids=list(labels))

    def recall(self, query: Query) -> list[str]:
        n = self.coll.count()
        if n == 0:
            return []
        vec = np.asarray(self.embed([query.text]), dtype=np.float32).tolist()
        where: Any = {"session": query.session} if query.session is not None else None
        res = self.coll.query(query_embeddings=vec, n_results=min(query.k, n), where=where)
        return list(res["ids"][0])

    def close(self) -> None:
        self.client.delete_collection(self.coll.name)
