"""``vxmem keys``: make, list and revoke the API keys a served database asks for.

Each verb works while ``vxmem serve`` has the database open: the server looks every
request's key up in the file. ``add`` prints the new key on its last line, and only then: the
file keeps its hash alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from typing import Any

from ..serve.keyring import KeyRing
from .serve import ServeError


def add_keys_command(sub: Any) -> None:
    """The ``keys`` verb of the ``vxmem`` command and its ``add``, ``list`` and ``revoke``."""
    k = sub.add_parser("keys", help="make, list and revoke the API keys of a served database",
                       description="Once a database has a key, `vxmem serve` asks every request under /v1/ and "
                                   "/mcp for one ('Authorization: Bearer <key>'), and each key reaches its "
                                   "user's memories alone. Works while the server runs.")
    verbs = k.add_subparsers(dest="keys_verb", required=True, metavar="{add,list,revoke}")
    a = verbs.add_parser("add", help="make a key and print it (last line); it is shown once")
    a.add_argument("--db", required=True, metavar="PATH", help="the database file (created if missing)")
    a.add_argument("--user", required=True, help="the user the key acts for")
    a.add_argument("--admin", action="store_true",
                   help="an admin key: acts for any user a request names (default: --user)")
    ls = verbs.add_parser("list", help="the keys: id, user, admin, made, revoked")
    ls.add_argument("--db", required=True, metavar="PATH", help="the database file")
    r = verbs.add_parser("revoke", help="revoke a key by its id (from `vxmem keys list`)")
    r.add_argument("--db", required=True, metavar="PATH", help="the database file")
    r.add_argument("id", help="the key's id")


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_keys(args: argparse.Namespace) -> int:
    """``vxmem keys add|list|revoke``."""
    if args.keys_verb != "add" and not os.path.isfile(args.db):
        raise ServeError(f"no database at {args.db}")
    ring = KeyRing(args.db)
    try:
        if args.keys_verb == "add":
            record, token = ring.add(args.user, admin=args.admin)
            role = "admin key (any user)" if record.admin else f"key of user {record.user!r}"
            print(f"made {role}, id {record.id}; it is shown once, keep it now:", file=sys.stderr)
            print(token, flush=True)
        elif args.keys_verb == "list":
            print("id\tuser\tadmin\tcreated\trevoked")
            for rec in ring.listed():
                print(f"{rec.id}\t{rec.user}\t{'yes' if rec.admin else 'no'}\t{_when(rec.created)}\t"
                      f"{_when(rec.revoked)}")
        elif not ring.revoke(args.id):
            raise ServeError(f"no live key with id {args.id!r} (see vxmem keys list --db {args.db})")
        else:
            print(f"revoked key {args.id}", file=sys.stderr)
    finally:
        ring.close()
    return 0

