"""What ``vxmem export`` and ``vxmem restore`` do: a database to a portable JSON Lines file and back.

:mod:`vxmem.cli` reads the command line; the format and the work are the store's
(:mod:`vxmem.store.portable.export`, :mod:`vxmem.store.portable.restore`, described in docs/EXPORT.md).
A refused file or target is one line on stderr and exit code 2, and nothing is written.
"""

from __future__ import annotations

import os
from typing import Any

from ..core.errors import VectrixError
from ..models.embed import embedder_name, get_embedder
from ..store.portable.export import export_file
from ..store.portable.reader import read_header
from ..store.portable.restore import restore_file
from ..store.postgres import is_postgres_url
from ..vectrix import Vectrix
from .serve import shown
from .workbench import CliError


def run_export(args: Any) -> int:
    """``vxmem export DB -o FILE.jsonl [--vectors]``: read-only, so the database may stay open elsewhere."""
    if not is_postgres_url(args.db) and not os.path.isfile(args.db):
        raise CliError(f"{args.db}: no such database")
    if not args.output.endswith(".jsonl"):
        raise CliError(f"-o {args.output!r}: an export is written as .jsonl")
    try:
        report = export_file(args.db, args.output, vectors=args.vectors, progress=None)
    except ConnectionError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    print(f"exported {shown(args.db)} to {args.output}: {report.summary()}")
    return 0


def _embedder_for(choice: str, recorded: str | None) -> Any:
    """What ``--embedder`` hands ``Vectrix``; ``auto``: the embedder the file's vectors are of,
    when vxmem ships it by name (the model-free hashing one), else vxmem's default."""
    if choice != "auto":
        return choice  # a name of vxmem.models.embed.EMBEDDERS, as `vxmem serve --embedder` takes it
    if recorded is not None and recorded == embedder_name(get_embedder("hashing")):
        return "hashing"
    return None


def run_restore(args: Any) -> int:
    """``vxmem restore FILE.jsonl --db NEW``: a new database holding the export, all or nothing."""
    if not os.path.isfile(args.export):
        raise CliError(f"{args.export}: no such file")
    header = read_header(args.export)  # a file that is no export, or a newer one, is refused here
    embedder = _embedder_for(args.embedder, header.get("embedder"))
    try:
        db, report = restore_file(args.export, args.db, lambda p: Vectrix(p, embedder=embedder), progress=None,
                                  notify=print)
    except VectrixError as exc:  # the target is open for writing elsewhere, or the disk is full
        raise CliError(str(exc)) from None
    except OSError as exc:  # its directory refuses the new file (permissions, a name too long): none is left
        raise CliError(f"cannot restore into {args.db}: {exc.strerror or exc}") from None
    db.close()
    c = report.counts
    print(f"restored {c['documents']} documents ({c['memories']} memories, {c['feedback_events']} feedback events, "
          f"{c['supersession_links']} supersession links, {c['consolidated_facts']} consolidated facts) "
          f"into {shown(args.db)}")
    return 0
