"""The reserved metadata keys, kinds and outcomes: one definition, imported everywhere.

A memory is an ordinary document whose metadata holds keys starting with ``_vx_``, so a
memory collection is still a plain collection. The collection mirrors a few of these keys
as numpy columns (filters hit them constantly), the memory writes them, the workbench reads
them; all of them take the names from here. This module imports nothing.
"""

from __future__ import annotations

RESERVED_PREFIX = "_vx_"

K_KIND = "_vx_kind"
K_SESSION = "_vx_session"
K_ROLE = "_vx_role"
K_TURN = "_vx_turn"
K_TS = "_vx_ts"
K_FEEDBACK = "_vx_feedback"
K_SUPERSEDED_BY = "_vx_superseded_by"
K_SUPERSEDES = "_vx_supersedes"
K_SUPERSEDED_AT = "_vx_superseded_at"
K_SCORING = "_vx_scoring"
K_EXPIRES = "_vx_expires"
K_CONSOLIDATED_FROM = "_vx_consolidated_from"

KIND_TURN = "turn"
KIND_FACT = "fact"
KIND_PINNED = "pinned"
KINDS = (KIND_TURN, KIND_FACT, KIND_PINNED)

# A kind as a small integer: the collection's kind column, a replay's saved pools.
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
NO_KIND = -1  # the kind column of a plain document (or of a memory too damaged to be one)

OUTCOMES = ("useful", "dead_end", "corrected")
