"""What the dashboard takes from outside, checked before it is used: uploaded bytes, values
from the URL and the session, and text that came from a file or a URL and is shown on a page.

A page shows what is wrong in one sentence and carries on; nothing here writes anything or
imports Streamlit. Markdown is the one place a page interprets text, so every string a user
supplied goes through :func:`plain` before it is shown in Markdown: links, images and HTML in
it are shown as the characters they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..analysis.metrics import SMALL_SAMPLE
from ..datasets.model import Conversation, DatasetError, Event

MAX_UPLOAD_BYTES = 50 * 1024 * 1024  # bigger files belong to the CLI, which streams nothing to a browser
MAX_SHOWN_CHARS = 120  # what a message quotes of a value it refuses
# The first bytes of the archives (unpack them first) and other binary files people upload by mistake.
_ARCHIVES = ((b"PK\x03\x04", "a zip archive"), (b"PK\x05\x06", "an empty zip archive"), (b"\x1f\x8b", "a gzip file"),
             (b"BZh", "a bzip2 file"), (b"\xfd7zXZ\x00", "an xz file"), (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive"),
             (b"Rar!", "a RAR archive"), (b"\x28\xb5\x2f\xfd", "a zstd file"))
_BINARIES = ((b"%PDF", "a PDF"), (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
             (b"SQLite format 3\x00", "a SQLite database"), (b"PAR1", "a Parquet file"),
             (b"\x93NUMPY", "a NumPy array"))
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>!|~$#:&])")  # inline Markdown, HTML, links, images, maths, directives
_LINE_START = re.compile(r"^(\s*(?:\d+)?)([-+=>.)])")  # a list, quote or heading underline where a line begins


def plain(text: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text`` made safe to show in Markdown (every character that means something there
    escaped, newlines flattened) and cut to ``limit`` characters."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    if len(s) > limit:
        s = s[:limit] + f"... ({len(s):,} characters)"
    s = _MARKDOWN.sub(r"\\\1", s)
    return _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), s)


def short(value: Any, limit: int = 40) -> str:
    """A value as a message quotes it: its ``repr``, cut to ``limit`` characters."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit] + f"... ({len(r):,} characters)"


EVERY_SESSION = "no session (recalls from every session)"


def session_text(session: Any) -> str:
    """A probe's or a memory's session as a reader sees it: its name, or for none (None, NaN, empty)
    what that means, never "None"."""
    if session is None or (isinstance(session, float) and math.isnan(session)) or session == "":
        return EVERY_SESSION
    return f"session {session}"


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n:,} bytes"


PAGE_FORMAT_HINT = "pick it in the Format box"  # how a page says "pass format=" (see naming_the_format)


def check_upload(filename: str, data: Any, max_bytes: int | None = None) -> str:
    """The text of an uploaded file, or one :class:`DatasetError` that says what it is instead:
    too big (over ``max_bytes``, default :data:`MAX_UPLOAD_BYTES`), empty, an archive or
    another binary file, or not UTF-8."""
    max_bytes = MAX_UPLOAD_BYTES if max_bytes is None else max_bytes
    if not isinstance(data, (bytes, bytearray)):
        raise DatasetError(f"{filename}: expected the bytes of a file, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise DatasetError(f"{filename}: {_size(len(data))}, over the workbench's {_size(max_bytes)}; "
                           "use the vxmem CLI for files this big")
    if not data.strip():
        raise DatasetError(f"{filename}: the file is empty")
    for magic, what in _ARCHIVES:
        if data.startswith(magic):
            raise DatasetError(f"{filename}: this is {what}, not a text file; unpack it and upload the file inside")
    for magic, what in _BINARIES:
        if data.startswith(magic):
            raise DatasetError(f"{filename}: this is {what}, not a text file")
    if b"\x00" in data[:65536]:
        raise DatasetError(f"{filename}: a binary file (it holds NUL bytes), not a text file")
    try:
        return bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{filename}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def sample_note(probes: int, small: int | None = None) -> str | None:
    """What to say about a mean over ``probes`` probes: nothing from ``small`` probes up
    (default :data:`~vxmem.workbench.analysis.metrics.SMALL_SAMPLE`), else how little it can be trusted."""
    small = SMALL_SAMPLE if small is None else small
    if probes >= small:
        return None
    if probes == 0:
        return "No probe can be scored here: there is no mean to trust."
    return (f"Only {probes} probe{'s' * (probes != 1)} (fewer than {small}): these means are far from certain; "
            "read the 95% intervals, not the digits.")


def interval_text(mean: float, lo: float, hi: float, probes: int) -> str:
    """``"0.917 (95% CI 0.854-0.972, 36 probes)"``; ``n/a`` where nothing was scored."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return f"n/a ({probes} probes scored)"
    return f"{mean:.3f} (95% CI {lo:.3f}-{hi:.3f}, {probes} probe{'s' * (probes != 1)})"


def unknown_keys(query: Mapping[str, Any], known: tuple[str, ...]) -> list[str]:
    """The problems of a URL's parameters that no page knows: one line each, value quoted short."""
    return [f"unknown parameter {short(k)}" for k in query if k not in known]


def _bad_events(events: Any) -> str | None:
    if not isinstance(events, list) or not all(isinstance(e, Mapping) for e in events):
        return "not a list of events"
    try:  # what the playground makes of them (views.playground.playground_conversation)
        Conversation(name="playground", events=[Event.from_dict(dict(e)) for e in events])
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        return str(exc)
    return None


def _bad_kept(kept: Any) -> str | None:
    if not isinstance(kept, Mapping):
        return "not a mapping"
    types = {"query": str, "session": str, "relevant": list, "judge": bool}
    for k, t in types.items():
        if not isinstance(kept.get(k), t):
            return f"{k} is not a {t.__name__}"
    if any(not isinstance(x, str) for x in kept["relevant"]):
        return "relevant holds a value that is not a label"
    return None


def _bad_message(value: Any) -> str | None:
    ok = value is None or (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value))
    return None if ok else "not a (kind, text) pair"


_EPOCH_RANGE = (-62_135_596_800.0, 253_402_300_799.0)  # years 1 to 9999, what a timestamp can show
_STATE_CHECKS = {
    "dataset_kept": lambda v: None if isinstance(v, str) and len(v) <= 300 else "not a dataset name",
    "pg_events": _bad_events,
    "pg_now": lambda v: None if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    and _EPOCH_RANGE[0] <= v <= _EPOCH_RANGE[1] else "not a time in years 1-9999",
    "pg_kept": _bad_kept,
    "pg_saved": lambda v: None if isinstance(v, str) and v.isalnum() and len(v) <= 64 else "not a saved session's key",
    "pg_restore": lambda v: None if isinstance(v, str) else "not a saved session's key",
    "pg_message": _bad_message,
    "import_message": _bad_message,
    "import_error": _bad_message,  # (the file's hash, what is wrong with it)
    "imported": lambda v: None if isinstance(v, Mapping) and isinstance(v.get("conversation"), Conversation)
    and isinstance(v.get("key"), str) else "not an imported chat",
    "url_problems": lambda v: None if isinstance(v, list) and all(isinstance(x, str) for x in v) else "not a list",
    "widgets_kept": lambda v: None if isinstance(v, dict) and all(isinstance(k, str) for k in v)
    else "not a mapping of widget values",
    "upload_kept": lambda v: None if isinstance(v, Mapping) and isinstance(v.get("name"), str)
    and isinstance(v.get("data"), bytes) else "not an uploaded file",
}


def check_state(state: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The dashboard's own session values that cannot be used as they are (a wrong type, a
    time no calendar has, events that do not validate): ``(keys to drop, problems)``; a
    dropped key starts afresh. The settings are checked by ``check_settings``."""
    drop, problems = [], []
    for key, check in _STATE_CHECKS.items():
        if key not in state:
            continue
        try:
            why = check(state[key])
        except Exception as exc:  # a value odd enough to break its own check is unusable too
            why = f"{type(exc).__name__}"
        if why:
            drop.append(key)
            problems.append(f"{key} ({short(state[key])}): {why}")
    return drop, problems
