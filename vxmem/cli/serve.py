"""``vxmem serve`` and ``vxmem mcp``: open the database, check the flags, run a server.

``vxmem serve`` binds 127.0.0.1 unless told otherwise, and refuses to bind any other address
unless the database has keys (``vxmem keys``) or it has a token (``--token`` or
``VXMEM_TOKEN``); it serves MCP at ``/mcp`` beside the REST API, logs one line per request on
stderr and, given a summarizer's model and endpoint, consolidates. It binds its port before it opens the
database: a port taken or a host unknown is one line and exit code 2, with nothing created,
and the line that says where it serves comes once it listens there. ``vxmem mcp`` speaks MCP
over stdin and stdout, so it writes nothing else to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import ipaddress
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

from ..core.errors import DatabaseLockedError, VectrixError
from ..models.embed import EMBEDDERS
from ..serve.keyring import has_keys
from ..serve.scope import DEFAULT_USER, check_user_name
from ..store.postgres import is_postgres_url, shown_url
from ..vectrix import Vectrix
from .config import adapter, apply_server, memory_settings, read_config

TOKEN_ENV = "VXMEM_TOKEN"
KEEP_ALIVE = 30  # seconds an idle HTTP connection stays open


class ServeError(Exception):
    """A flag or a database a server cannot start with; the command prints it as one line."""


def add_embedder_flag(parser: argparse.ArgumentParser, *first: str, default: str | None = None,
                      text: str = "default: VXMEM_EMBEDDER, else bge-small") -> None:
    """``--embedder``, offering the embedders a database is made with (those of
    :data:`~vxmem.models.embed.EMBEDDERS`, after ``first``): ``serve``, ``mcp`` and ``restore``
    offer the one list."""
    parser.add_argument("--embedder", choices=(*first, *EMBEDDERS), default=default,
                        help=f"{text}; a database keeps the embedder it was made with")


def add_server_flags(parser: argparse.ArgumentParser, user_help: str, configured: bool = False) -> None:
    """The flags ``vxmem serve`` and ``vxmem mcp`` share (``user_help``: what ``--user`` does).
    ``configured``: a flag left out is left out of the namespace too, for ``--config`` to fill
    (:func:`vxmem.cli.config.apply_server`)."""
    unset: Any = argparse.SUPPRESS if configured else None
    parser.add_argument("--db", required=True, metavar="PATH",
                        help="the database file (created if missing), or a postgresql:// URL")
    parser.add_argument("--user", default=unset if configured else DEFAULT_USER,
                        help=f"{user_help} (default {DEFAULT_USER!r})")
    parser.add_argument("--session", default=unset, help="the session of requests that name none (default: "
                                                         "writes go to 'default', reads span the user's sessions)")
    add_embedder_flag(parser, default=unset)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_for(args: argparse.Namespace) -> str | None:
    """The token the server requires, from ``--token`` or the environment; refuses a bind off
    the loopback without one."""
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    if token is not None and not token.strip():
        raise ServeError(f"the token is empty; pass --token or set {TOKEN_ENV} to a secret")
    if token is None and not is_loopback(args.host) and not has_keys(args.db):
        raise ServeError(f"binding {args.host} exposes the memory beyond this machine: make a key (vxmem keys "
                         f"add), or pass --token or set {TOKEN_ENV} (requests then need 'Authorization: Bearer "
                         "<key>')")
    return token


def port_number(text: str) -> int:
    """``--port``: a TCP port, 0 to 65535 (0: one the system picks)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number (0 to 65535), got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (0 to 65535), got {port}")
    return port


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port`` (IPv6 if the host has a colon, as uvicorn binds);
    a :class:`ServeError` that says why if it cannot be had (the port taken, the host unknown)."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(2048)
    except OSError as exc:  # socket.gaierror (an unknown host) is one
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def url_of(host: str, sock: socket.socket) -> str:
    """Where ``sock`` serves, with the port it really has (``--port 0``: the system's pick)."""
    port = sock.getsockname()[1]
    address = host.strip("[]")
    return f"http://[{address}]:{port}" if ":" in address else f"http://{host}:{port}"


def shown(db: str) -> str:
    """A ``--db`` as messages name it (a ``postgresql://`` URL without its password)."""
    return shown_url(db) if is_postgres_url(db) else db


def open_db(args: argparse.Namespace, settings: dict[str, Any] | None = None) -> Vectrix:
    """The database the flags name (with ``settings``, ``Vectrix``'s: a ``--config`` file's
    ``[memory]``), its models loaded so the first request is not the slow one."""
    check_user_name(args.user)
    if args.session is not None and not args.session.strip():
        raise ServeError("--session must not be empty")
    try:
        db = Vectrix(args.db, embedder=args.embedder, **(settings or {}))
    except DatabaseLockedError:  # the library's message names a Python argument, not what to do here
        raise ServeError(f"{args.db} is open for writing in another process (a vxmem serve or vxmem mcp?): one "
                         "process serves a database; vxmem serve serves REST and MCP (at /mcp) to any number of "
                         "clients at once") from None
    except (VectrixError, OSError) as exc:
        raise ServeError(f"cannot open {shown(args.db)}: {' '.join(str(exc).split())}") from None
    except (TypeError, ValueError) as exc:  # a setting of the file that Vectrix does not take
        raise ServeError(f"--config [memory]: {' '.join(str(exc).split())}") from None
    db.warm()
    return db


def needs(module: str, load: bool = True) -> Any:
    """``module``, imported; a :class:`ServeError` that names the extra to install if it is missing.
    ``load=False`` only checks that it is installed (``vxmem serve`` loads the MCP SDK with the
    first request to /mcp, not at its start)."""
    try:
        for name in (module, "fastapi", "pydantic"):
            if load or name != module:
                importlib.import_module(name)
            elif importlib.util.find_spec(name) is None:
                raise ModuleNotFoundError(name=name)
    except ImportError as exc:
        raise ServeError(f"the servers need the 'server' extra ({exc.name} is missing): "
                         "pip install 'vxmem[server]'") from None
    return importlib.import_module(module) if load else None


class Stopped(Exception):
    """SIGTERM asked ``vxmem serve`` to stop (raised once uvicorn's graceful shutdown is done)."""


def _stop(signum: int, frame: Any) -> None:
    raise Stopped


@contextlib.contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM ends the block as an exception, not the process: uvicorn catches the signal,
    shuts down, then raises it again, and the default action would kill the process before
    the database is closed (no caches saved, the WAL left behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        yield
    except Stopped:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_serve(args: argparse.Namespace) -> int:
    """``vxmem serve``: the REST API under uvicorn until Ctrl-C (or SIGTERM), on a socket bound
    before the database is opened; either way the database is closed before it exits."""
    config = read_config(args.config)
    apply_server(args, config)
    with stopped_by_sigterm():
        return _serve(args, config)
    return 0


def _serve(args: argparse.Namespace, config: dict[str, dict[str, Any]]) -> int:
    token = token_for(args)
    uvicorn = needs("uvicorn")
    needs("mcp", load=False)
    needs("prometheus_client")
    summarizer = summarizer_of(args) or adapter(config["summarizer"], "summarizer")
    settings = memory_settings(config)
    from ..aio import AsyncVectrix
    from ..serve.keyring import KeyRing
    from ..serve.rest import create_app
    from ..serve.service import MemoryService

    if args.max_body < 1:
        raise ServeError("--max-body must be a positive number of bytes")
    with listen(args.host, args.port) as sock:  # before the database: a port taken creates nothing
        db = open_db(args, settings)
        adb = AsyncVectrix.of(db)
        # After the memory's open, which brought the file's schema up to date. The keys live in a
        # database file: a PostgreSQL store has none yet (--token guards it).
        keys = None if is_postgres_url(args.db) else KeyRing(args.db)
        try:
            show_access_log(args.access_log)
            app = create_app(MemoryService(adb, args.user, args.session, summarizer), token=token, keys=keys,
                             max_body=args.max_body, cors_origins=args.cors_origin or (), mcp_host=args.host)
            # An idle connection outlives the clients' own keep-alive (httpx: 5 s): were both 5 s, a
            # client could send on a connection the server is closing, and read no answer.
            config = uvicorn.Config(app, host=args.host, port=sock.getsockname()[1], log_level="warning",
                                    access_log=False, server_header=False, lifespan="on",
                                    timeout_keep_alive=KEEP_ALIVE)
            print(f"vxmem serve: {shown(args.db)} on {url_of(args.host, sock)} (docs at /docs, MCP at /mcp; "
                  "Ctrl-C stops it)", file=sys.stderr, flush=True)
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            if keys is not None:
                keys.close()
            adb.close()
            db.close()
    return 0


def summarizer_of(args: argparse.Namespace) -> Any:
    """The summarizer ``POST /v1/consolidate`` uses: the chat-completions endpoint the flags
    name (its key from ``OPENAI_API_KEY``, if it needs one), or None."""
    if (args.summarizer_model is None) != (args.llm_url is None):
        raise ServeError("--summarizer-model and --llm-url go together: the model, and the chat-completions "
                         "endpoint that serves it")
    if args.summarizer_model is None:
        return None
    try:
        from ..llm import OpenAICompatibleSummarizer

        return OpenAICompatibleSummarizer(args.summarizer_model, base_url=args.llm_url)
    except ImportError:
        raise ServeError("--summarizer-model needs the 'llm' extra: pip install 'vxmem[llm]'") from None


def show_access_log(on: bool) -> None:
    """One line per request on stderr (the ``vxmem.access`` logger), unless ``--no-access-log``."""
    import logging

    logger = logging.getLogger("vxmem.access")
    logger.propagate = False
    if on and not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO if on else logging.WARNING)


def run_mcp(args: argparse.Namespace) -> int:
    """``vxmem mcp``: the MCP server over stdio until its client closes it."""
    needs("mcp")
    from ..aio import AsyncVectrix
    from ..serve.mcp import build_server
    from ..serve.service import MemoryService

    db = open_db(args)
    adb = AsyncVectrix.of(db)
    try:
        build_server(MemoryService(adb, args.user, args.session)).run("stdio")
    finally:
        adb.close()
        db.close()
    return 0


def add_commands(sub: Any) -> None:
    """The ``serve`` and ``mcp`` verbs of the ``vxmem`` command."""
    s = sub.add_parser("serve", help="serve the memory over HTTP (REST, OpenAPI at /docs; MCP at /mcp)",
                       description="Serve the memory's verbs under /v1/ on FastAPI + uvicorn, and as MCP tools "
                                   "over streamable HTTP at /mcp. Binds 127.0.0.1; another address needs a key "
                                   f"(vxmem keys add) or --token (or {TOKEN_ENV}).")
    add_server_flags(s, "the user of requests that name none", configured=True)
    unset = argparse.SUPPRESS  # a flag left out takes the --config file's value, else its default
    s.add_argument("--config", metavar="TOML", help="a vxmem.toml of server, memory, judge and summarizer "
                                                    "settings; flags given win over it (see docs/SERVING.md)")
    s.add_argument("--host", default=unset, help="the address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=port_number, default=unset, help="0 to 65535 (default 8765; 0: any free one)")
    s.add_argument("--token", default=unset,
                   help=f"require 'Authorization: Bearer TOKEN' on every request (or set {TOKEN_ENV})")
    s.add_argument("--max-body", type=int, default=unset, dest="max_body",
                   help="largest request body in bytes; larger ones get 413 (default 1000000)")
    s.add_argument("--cors-origin", action="append", dest="cors_origin", metavar="ORIGIN", default=unset,
                   help="allow browser requests from this origin (repeat; default: CORS off)")
    s.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=unset, dest="access_log",
                   help="one line per request on stderr (default: on)")
    s.add_argument("--summarizer-model", dest="summarizer_model", metavar="MODEL", default=unset,
                   help="the model POST /v1/consolidate summarises with (with --llm-url; default: none, and "
                        "consolidate is refused)")
    s.add_argument("--llm-url", dest="llm_url", metavar="URL", default=unset,
                   help="the chat-completions endpoint of --summarizer-model, e.g. http://localhost:11434/v1 "
                        "(its key, if any, from OPENAI_API_KEY)")
    m = sub.add_parser("mcp", help="serve the memory to an MCP client over stdio",
                       description="An MCP server over stdin/stdout: tools remember, recall, context, feedback "
                                   "and forget, in one user's scope.")
    add_server_flags(m, "the one user whose memories every tool reads and writes (a tool names no user)")
