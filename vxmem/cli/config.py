"""``vxmem serve --config vxmem.toml``: a served memory's settings in one file.

Four tables, each optional::

    [server]                 # the flags' values: host, port, user, session, embedder, token,
    port = 8765              # max_body, cors_origin (a list), access_log
    [memory]                 # Vectrix's settings: the blend (half_life_days, recency_weight, ...),
    preset = "accurate"      # preset, recency_from, min_relevance, durability, ...
    durability = "full"
    [memory.ttl_days]        # days a memory of each kind lives (absent: for ever)
    turn = 30
    [judge]                  # the chat-completions judge of contradicted facts
    model = "qwen2.5:7b"     # with url, and any of the adapter's options (timeout, retries, on_error, ...)
    url = "http://localhost:11434/v1"
    [summarizer]             # what POST /v1/consolidate summarises with: model, url, options
    model = "qwen2.5:7b"
    url = "http://localhost:11434/v1"

A flag given on the command line wins over the file; the file over the defaults. An unknown
table or server key is refused by name, and the memory's settings are checked by ``Vectrix``
itself, so a misspelt setting never passes silently. Endpoint keys come from
``OPENAI_API_KEY``, never from the file.
"""

from __future__ import annotations

import argparse
import tomllib
from typing import Any

from ..serve.scope import DEFAULT_USER

# Each setting of [server], its type and its value when neither a flag nor the file gives one.
SERVER: dict[str, tuple[type | tuple[type, ...], Any]] = {
    "host": (str, "127.0.0.1"), "port": (int, 8765), "user": (str, DEFAULT_USER), "session": (str, None),
    "embedder": (str, None), "token": (str, None), "max_body": (int, 1_000_000), "cors_origin": (list, None),
    "access_log": (bool, True), "summarizer_model": (str, None), "llm_url": (str, None)}
TABLES = ("server", "memory", "judge", "summarizer")


def read_config(path: str | None) -> dict[str, dict[str, Any]]:
    """The file's tables, checked (none: every table empty)."""
    if path is None:
        return {t: {} for t in TABLES}
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ValueError(f"--config {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"--config {path}: not TOML ({exc})") from None
    unknown = [k for k in data if k not in TABLES or not isinstance(data[k], dict)]
    if unknown:
        raise ValueError(f"--config {path}: unknown table or not a table: {unknown[0]!r} (tables: {', '.join(TABLES)})")
    out = {t: dict(data.get(t, {})) for t in TABLES}
    for key, value in out["server"].items():
        if key not in SERVER or key in ("summarizer_model", "llm_url"):
            raise ValueError(f"--config {path}: unknown [server] setting {key!r}")
        kind = SERVER[key][0]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"--config {path}: [server] {key} must be a {getattr(kind, '__name__', kind)}")
    return out


def apply_server(args: argparse.Namespace, config: dict[str, dict[str, Any]]) -> None:
    """Give ``args`` every server setting its flags left out: the file's, else the default."""
    for name, (_, default) in SERVER.items():
        if not hasattr(args, name):
            setattr(args, name, config["server"].get(name, default))


def adapter(table: dict[str, Any], kind: str) -> Any:
    """The chat-completions judge or summarizer a ``[judge]`` or ``[summarizer]`` table names."""
    if not table:
        return None
    options = dict(table)
    model, url = options.pop("model", None), options.pop("url", None)
    if not isinstance(model, str) or not isinstance(url, str):
        raise ValueError(f"--config [{kind}] needs model and url: the model, and its chat-completions endpoint")
    if "api_key" in options:
        raise ValueError(f"--config [{kind}]: the key comes from OPENAI_API_KEY, not from the file")
    try:
        from .. import llm
    except ImportError:
        raise ValueError(f"--config [{kind}] needs the 'llm' extra: pip install 'vxmem[llm]'") from None
    cls = llm.OpenAICompatibleJudge if kind == "judge" else llm.OpenAICompatibleSummarizer
    try:
        return cls(model, base_url=url, **options)
    except TypeError as exc:
        raise ValueError(f"--config [{kind}]: {exc}") from None


def memory_settings(config: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``Vectrix``'s keyword arguments: the ``[memory]`` table, and the judge of ``[judge]``."""
    settings = dict(config["memory"])
    judge = adapter(config["judge"], "judge")
    if judge is not None:
        settings["judge"] = judge
    return settings

