"""The files a ``vxmem`` command writes, checked before any work: writable, not the file it reads,
no two the same."""

from __future__ import annotations

import os

from .workbench import CliError

__all__ = ["WRITES", "READS", "unwritable", "same_file", "check_files"]

# The options naming files each command writes, and the argument naming the file it reads.
WRITES = {"synth": ("output",), "import": ("output",), "replay": ("output", "save", "report"),
           "sweep": ("output", "per_probe"), "compare": ("output", "per_probe", "chart"), "audit": ("output",),
           "qa": ("json",), "export": ("output",), "restore": ("db",)}
READS = {"import": "chatlog", "replay": "dataset", "sweep": "dataset", "compare": "dataset", "audit": "dataset",
          "qa": "dataset", "export": "db", "restore": "export"}


def unwritable(path: str) -> str | None:
    """Why no file can be written at ``path`` (None: one can): it is a directory, its directory
    is missing or is a file, or this user may not write there."""
    if os.path.isdir(path):
        return "it is a directory"
    directory = os.path.dirname(path) or os.curdir
    if not os.path.isdir(directory):
        return f"{directory!r} is not a directory" if os.path.exists(directory) else f"no directory {directory!r}"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"the directory {directory!r} is not writable"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "the file is not writable"
    return None


def same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file (links followed), whether or not it exists yet."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there yet
        return os.path.realpath(a) == os.path.realpath(b)


def check_files(args) -> None:
    """Every file the command writes, checked before any work: a place it can be written, not
    the file the command reads, and no two the same; one bad name and nothing is written."""
    read = getattr(args, READS[args.command]) if args.command in READS else None
    seen: list[tuple[str, str]] = []
    for dest in WRITES.get(args.command, ()):
        path = getattr(args, dest)
        if path is None:
            continue
        option = {"output": "-o", "db": "--db"}.get(dest, "--" + dest.replace("_", "-"))
        what = f"cannot restore into {path}" if args.command == "restore" else f"{option} {path!r}"
        problem = unwritable(path)
        if problem is None and read is not None and same_file(path, read):
            problem = f"that is {read!r}, which this command reads: name another file"
        if problem is not None:
            raise CliError(f"{what}: {problem}")
        for other, other_path in seen:
            if same_file(path, other_path):
                raise CliError(f"{other} and {option} name the same file {path!r}")
        seen.append((option, path))
