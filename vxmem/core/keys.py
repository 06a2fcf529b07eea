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
K_USER = "_vx_user"  # the user a memory belongs to, across their sessions (absent: no one's in particular)
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
K_CONSOLIDATED_INTO = "_vx_consolidated_into"  # on a turn a consolidate(delete=False) summarised: its facts
K_FEEDBACK_FOLDED = "_vx_feedback_folded"  # old feedback events folded into one decayed sum

KIND_TURN = "turn"
KIND_FACT = "fact"
KIND_PINNED = "pinned"
KINDS = (KIND_TURN, KIND_FACT, KIND_PINNED)
# forget()'s default kinds, one object: with ids, only kinds the caller passed narrow them.
FORGET_KINDS = (KIND_TURN,)

# A kind as a small integer: the collection's kind column, a replay's saved pools.
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
NO_KIND = -1  # the kind column of a plain document (or of a memory too damaged to be one)

OUTCOMES = ("useful", "dead_end", "corrected")

TURN_LIMIT = 2**62  # turn numbers stay below this: SQLite integers and float columns hold them exactly
TS_RANGE = (-62135596800.0, 253402300799.0)  # epoch seconds of years 1 to 9999: a time that is a date

# What each reserved key holds, checked wherever a caller may write one (``add()``,
# ``update_metadata()``; the memory writes them itself). ``vxmem.store.arguments.check_reserved``
# reads these names:
#   "kind"      one of KINDS                      "str"        a str
#   "str|None"  a str or None                     "list[str]"  a list of str
#   "turn"      an int (not a bool) in [0, TURN_LIMIT)
#   "time"      a finite number in TS_RANGE       "number"     a finite number (not a bool)
#   "feedback"  a list of [outcome, time] pairs   "folded"     {"sum", "ts", "half_life_days", "events"}
#   "dict"      a JSON object
RESERVED_TYPES = {
    K_KIND: "kind",
    K_SESSION: "str|None",
    K_USER: "str",
    K_ROLE: "str",
    K_TURN: "turn",
    K_TS: "time",
    K_FEEDBACK: "feedback",
    K_FEEDBACK_FOLDED: "folded",
    K_SUPERSEDED_BY: "str|None",
    K_SUPERSEDES: "list[str]",
    K_SUPERSEDED_AT: "number",
    K_SCORING: "dict",
    K_EXPIRES: "number",
    K_CONSOLIDATED_FROM: "list[str]",
    K_CONSOLIDATED_INTO: "list[str]",
}
