"""Memory systems the workbench compares, each behind one small adapter.

A system is a class built with no arguments, once per conversation. The harness
(:mod:`vxmem.workbench.systems.compare`) hands it the conversation in time order and asks it the
probes; it needs two methods, and may have a few more:

- ``add(turn: Turn) -> None``: remember a turn or a fact (text, time, session, role, kind).
- ``recall(query: Query) -> Sequence[str]``: the labels of the turns it would recall for
  ``query.text`` asked at ``query.time`` in ``query.session`` (None: across sessions), best
  first, at most ``query.k``. An item may be a tuple of labels (a memory made from several turns).
- optional ``begin(info: dict) -> None``: called first, with the conversation's name and the
  judge and summarizer its header names; ``warm() -> None``: load models before the clock runs.
- optional ``correct(target: str, turn: Turn)``: a correction of the memory labelled ``target``
  (without it, the correction is an ordinary ``add``); ``feedback(label, outcome, time)``;
  ``forget(labels, time)``; ``expire(time)``; ``other(event)`` for anything else (forget by
  selection, consolidate); ``close()``.

:func:`system_factory` turns a name into a class: ``vxmem`` (the default preset),
``vxmem:fast``, ``vxmem:accurate``, with ``@EMBEDDER`` for the embedder (``vxmem:fast@hashing``);
``bm25``; ``vectrixdb``; ``chroma`` (``chroma@hashing``); or ``package.module:Class`` for a
user's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ...memory.stages import DEFAULT_PRESET, PRESETS
from ...models.embed import EMBEDDERS as MODEL_EMBEDDERS
from ..plugins import load_object

BUILTIN = ("vxmem", *(f"vxmem:{p}" for p in PRESETS if p != DEFAULT_PRESET), "bm25", "vectrixdb", "chroma")
EMBEDDER_CHOICES = ("default", *MODEL_EMBEDDERS)

__all__ = ["Turn", "Query", "MemorySystem", "BUILTIN", "EMBEDDER_CHOICES", "SystemSpec", "system_factory",
           "parse_systems"]


@dataclass(frozen=True)
class Turn:
    """One thing said, as a system is told it: ``kind`` is ``"turn"``, ``"fact"`` or ``"pinned"``."""

    label: str
    text: str
    time: float
    session: str | None = None
    role: str = "user"
    kind: str = "turn"
    ttl_days: float | None = None


@dataclass(frozen=True)
class Query:
    """A probe as a system is asked it: ``k`` results at most."""

    label: str | None
    text: str
    time: float
    session: str | None
    k: int


@runtime_checkable
class MemorySystem(Protocol):
    """What the harness needs of a system (the optional methods are in the module's docstring)."""

    def add(self, turn: Turn) -> None: ...

    def recall(self, query: Query) -> Sequence[Any]: ...


@dataclass(frozen=True)
class SystemSpec:
    """A system as named on the command line: its ``name`` (the table's row) and the class to build."""

    name: str
    factory: Callable[[], Any]


def _embedder_part(spec: str) -> tuple[str, str | None]:
    base, _, emb = spec.partition("@")
    if "@" in spec and emb not in EMBEDDER_CHOICES:
        raise ValueError(f"system {spec!r}: unknown embedder {emb!r}; known: {', '.join(EMBEDDER_CHOICES)}")
    return base, (emb or None)


def _plugin(spec: str) -> Callable[[], Any]:
    """``package.module:Class``, imported now so that a typo is an error before any work."""
    attr = spec.partition(":")[2]
    obj = load_object(spec, "system")
    if not callable(obj):
        raise ValueError(f"system {spec!r}: {attr!r} is not a class or a factory")
    return obj


def system_factory(spec: str) -> SystemSpec:
    """The system ``spec`` names, checked (its library importable, its plugin found) before
    any work; ``ValueError`` says what is known."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("a system is a non-empty name, e.g. vxmem, vxmem:fast, bm25 or package.module:Class")
    spec = spec.strip()
    base, emb = _embedder_part(spec)
    if base == "vxmem" or base.startswith("vxmem:"):
        preset = base.partition(":")[2] or DEFAULT_PRESET
        if preset not in PRESETS:
            raise ValueError(f"system {spec!r}: unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        from .vxmem_system import VxmemSystem

        return SystemSpec(spec, lambda: VxmemSystem(preset=preset, embedder=emb))
    if base in ("bm25", "vectrixdb", "chroma"):
        if emb is not None and base != "chroma":
            raise ValueError(f"system {spec!r}: only vxmem and chroma take an @embedder")
        return SystemSpec(spec, _peer(base, emb))
    if ":" in spec:
        return SystemSpec(spec, _plugin(spec))
    raise ValueError(f"unknown system {spec!r}; known: {', '.join(BUILTIN)} (vxmem and chroma take @EMBEDDER: "
                     f"{', '.join(EMBEDDER_CHOICES)}), or package.module:Class")


def _peer(base: str, emb: str | None) -> Callable[[], Any]:
    """The class of a peer system, its library checked now."""
    if base == "bm25":
        from .bm25 import Bm25System, check_available

        check_available()
        return Bm25System
    if base == "vectrixdb":
        from .vectrixdb_system import VectrixdbSystem
        from .vectrixdb_system import check_available as check_vdb

        check_vdb()
        return VectrixdbSystem
    from .chroma import ChromaSystem
    from .chroma import check_available as check_chroma

    check_chroma()
    return lambda: ChromaSystem(embedder=emb)


def parse_systems(specs: Sequence[str]) -> list[SystemSpec]:
    """Every spec checked, in order; a name given twice is refused (the table has one row each)."""
    if isinstance(specs, str):
        specs = [specs]
    out = [system_factory(s) for s in specs]
    if not out:
        raise ValueError("name at least one system, e.g. --system vxmem --system bm25")
    names = [s.name for s in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"system {dup!r} is named twice")
    return out


def embedder_arg(name: str | None) -> Any:
    """What ``Vectrix(embedder=...)`` takes for an ``@EMBEDDER`` name (None: its default)."""
    return None if name is None or name == "default" else name
