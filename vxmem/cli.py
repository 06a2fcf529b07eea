"""The ``vxmem`` command: synthesise, import, replay and sweep from the shell.

    vxmem synth preference_drift --seed 0 -o drift.jsonl
    vxmem import chats.jsonl --format openai -o mychats.jsonl
    vxmem replay drift.jsonl --half-life 3 --limit 5 -o probes.csv
    vxmem sweep drift.jsonl --half-life 1,3,7,30 --recency-weight 0:1:0.1 -o results.csv
    vxmem sweep locomo10.json --categories multi-hop,4 --mode hybrid

Each prints a readable table and writes CSV or Parquet (by the file's extension). Bad
arguments and bad files get one line on stderr and exit code 2, before any long work
starts. ``python -m vxmem`` is the same command.

Formats, search modes, settings and sweepable parameters are the library's own
(:data:`vxmem.workbench.datasets.FORMATS`, :data:`vxmem.store.SEARCH_MODES`,
:data:`vxmem.workbench.replay.SETTINGS_KEYS`, each policy's parameters and
:data:`vxmem.workbench.sweep.SWEEP_KEYS`), so a flag exists exactly where the library has the name.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .ranking.scoring import BLEND_DEFAULTS, RECENCY_FROM
from .store.checks import SEARCH_MODES
from .workbench.datasets.formats import CHAT_FORMATS, FORMATS
from .workbench.datasets.model import Conversation, DatasetError
from .workbench.policies import POLICIES
from .workbench.record import Replay
from .workbench.replay import SETTINGS_KEYS
from .workbench.sweep import SWEEP_KEYS

EXIT_USAGE = 2
DEFAULT_POLICY = "blend"
EMBEDDERS = ("default", "hashing", "semantic")  # default: what Vectrix() uses (bge-small + its rerank)
TABLE_EXTENSIONS = (".csv", ".parquet")
# LoCoMo's question categories, by number and by name (a loader may give either).
LOCOMO_CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
# Left out unless --categories names them: LoCoMo's adversarial questions have no answer in the
# conversation, so retrieval metrics cannot score them.
EXCLUDED_BY_DEFAULT = ("adversarial",)

# The memory settings `vxmem replay` takes as flags: (setting, type, help), in help order.
_SETTING_FLAGS: tuple[tuple[str, type, str], ...] = (
    *((k, float, f"{k} (default {v:g})") for k, v in BLEND_DEFAULTS.items()),
    ("limit", int, "results per probe (default 10)"),
    ("token_budget", int, "tokens per recall (default: none)"),
    ("mode", str, "relevance (default hybrid)"),
    ("hybrid_weight", float, "dense share in hybrid mode (default 0.5)"),
    ("pool_limit", int, "largest limit a later sweep may use"),
    ("recency_from", str, "what ages count from: created (default) or accessed (last recalled)"),
)
# Every parameter a sweep takes: the default policy's, the policy-free ones, then the other policies'.
_GRID_KEYS = tuple(dict.fromkeys([*POLICIES[DEFAULT_POLICY].params, *SWEEP_KEYS,
                                  *(k for p in POLICIES.values() for k in p.params)]))


class CliError(Exception):
    """A problem with what the user asked for: reported in one line, exit code 2."""


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


def _check_table_path(path: str | None, flag: str = "-o") -> None:
    """Refuse a results file name the writer cannot write, before any work is done."""
    if path is not None and os.path.splitext(path)[1].lower() not in TABLE_EXTENSIONS:
        raise CliError(f"{flag} {path!r}: use a .csv or .parquet file name")


def _write(frame, path: str) -> None:
    ext = os.path.splitext(path)[1].lower()
    _check_table_path(path)
    try:
        if ext == ".csv":
            frame.to_csv(path, index=False)
        else:
            out = frame.copy()
            for c in out.columns:  # lists and dicts do not go into Parquet columns as such
                if out[c].dtype == object and out[c].map(lambda v: isinstance(v, (list, dict))).any():
                    out[c] = out[c].map(lambda v: None if v is None else str(v))
            out.to_parquet(path, index=False)
    except ImportError:
        raise CliError("writing Parquet needs pyarrow: pip install pyarrow") from None
    except OSError as exc:
        raise CliError(f"cannot write {path!r}: {exc.strerror or exc}") from None


def _table(frame, max_rows: int = 30) -> str:
    import pandas as pd

    frame = frame.dropna(axis=1, how="all")  # a metric the data cannot score (no budget, no sessions)
    with pd.option_context("display.width", 160, "display.max_columns", 30, "display.max_colwidth", 40):
        return frame.head(max_rows).to_string(index=False, float_format=lambda v: f"{v:.3f}")


def _embedder(name: str):
    if name == "default":
        return None  # the library's default (VXMEM_EMBEDDER, else bge-small)
    if name == "hashing":
        return "hashing"
    try:
        from .models.embed import SemanticEmbedder

        return SemanticEmbedder()
    except ImportError as exc:
        raise CliError(str(exc).splitlines()[0]) from None


def _load(path: str, fmt: str | None) -> list[Conversation]:
    from .workbench.datasets.formats import guess_format, load

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    fmt = fmt or guess_format(path)
    # Every LoCoMo question becomes a probe (adversarial ones too): --categories chooses what is scored.
    convs = load(path, format=fmt, categories="all" if fmt == "locomo" else None)
    if not any(c.probes for c in convs) and any(c.meta.get("source") in CHAT_FORMATS for c in convs):
        raise CliError(f"{path}: a chat log has no probes to score; `vxmem import` it and write probes in the "
                       "dashboard's Import page")
    return convs


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vxmem")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


# ---------------------------------------------------------------------------- categories


def _category_names(token: str) -> set[str]:
    """A category as a user names it, with its LoCoMo alias: "4" and "single-hop" are one."""
    t = token.strip().lower()
    names = {t}
    if t in LOCOMO_CATEGORIES:
        names.add(LOCOMO_CATEGORIES[t])
    names.update(num for num, name in LOCOMO_CATEGORIES.items() if name == t)
    return names


def _probe_category(replay: Replay, probe: dict[str, Any]) -> str | None:
    cat = probe.get("category")
    if cat is None:
        return None
    cat = str(cat).lower()
    source = (replay.meta.get("conversation_meta") or {}).get("source")
    return LOCOMO_CATEGORIES.get(cat, cat) if source == "locomo" else cat


def _select_categories(reps: list[Replay], spec: str | None) -> tuple[list[Replay], str | None]:
    """The replays with only the probes of the categories ``spec`` names (names or LoCoMo
    numbers, comma-separated; ``all``: every probe); by default every category but
    :data:`EXCLUDED_BY_DEFAULT`. Returns the replays and a note on what was left out."""
    present = sorted({c for r in reps for p in r.probes if (c := _probe_category(r, p)) is not None})
    if spec is not None and spec.strip().lower() == "all":
        return reps, None
    if spec is None:
        def keep(cat: str | None) -> bool:
            return cat not in EXCLUDED_BY_DEFAULT
    else:
        tokens = [t for t in spec.split(",") if t.strip()]
        if not tokens:
            raise CliError("--categories: name at least one category (or all)")
        wanted: set[str] = set()
        for t in tokens:
            names = _category_names(t)
            if not names & set(present):
                raise CliError(f"--categories: no probe has category {t.strip()!r}; categories here: "
                               + (", ".join(present) or "(none)"))
            wanted |= names

        def keep(cat: str | None) -> bool:
            return cat in wanted
    out, dropped = [], 0
    for r in reps:
        mask = [keep(_probe_category(r, p)) for p in r.probes]
        dropped += mask.count(False)
        out.append(r if all(mask) else r.select(mask))
    if not dropped:
        return out, None
    what = "probes of other categories" if spec else ", ".join(EXCLUDED_BY_DEFAULT) + " probes"
    return out, f"left out {dropped} {what} (--categories all keeps every probe)"


# ---------------------------------------------------------------------------- the parser


def _parser() -> _Parser:
    from .workbench.synth import SCENARIOS

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
    w.add_argument("--top", type=int, default=20, help="rows of the table (default 20)")
    w.add_argument("-o", "--output", help="per-point results, .csv or .parquet")
    w.add_argument("--per-probe", help="per-point-and-probe results, .csv or .parquet")
    return top


_CATEGORIES_HELP = ("probe categories to score, comma-separated names or LoCoMo numbers (multi-hop,4); "
                    "default: all but adversarial; 'all': every probe")


def _add_replay_settings(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("memory settings")
    for key, kind, text in _SETTING_FLAGS:
        if key == "mode":
            g.add_argument(_flag(key), choices=SEARCH_MODES, help=text)
        elif key == "recency_from":
            g.add_argument(_flag(key), choices=RECENCY_FROM, dest=key, help=text)
        else:
            g.add_argument(_flag(key), type=kind, dest=key, help=text)


def _add_grid(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("grid (comma lists or start:stop:step ranges)")
    plain = {*POLICIES[DEFAULT_POLICY].params, *SWEEP_KEYS}
    for key in _GRID_KEYS:
        text: str | None = None
        if key == "token_budget":
            text = "ints or none"
        elif key not in plain:  # a parameter of another policy: say whose
            text = ", ".join(pol.name for pol in POLICIES.values() if key in pol.params) + " policy"
        g.add_argument(_flag(key), dest=key, help=text)


# ---------------------------------------------------------------------------- synth


def _synth(args, extra: list[str]) -> int:
    from .workbench.datasets.jsonl import dumps_jsonl, save_jsonl
    from .workbench.synth import generate

    conv = generate(args.scenario, seed=args.seed, **_sizes(args.scenario, extra))
    if not args.output:
        sys.stdout.write(dumps_jsonl(conv))
        return 0
    if not args.output.endswith(".jsonl"):
        raise CliError(f"output {args.output!r}: a conversation is written as .jsonl")
    try:
        save_jsonl(conv, args.output)
    except OSError as exc:
        raise CliError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    counts = conv.to_frame().groupby("type").size().rename("events").reset_index()
    print(f"{conv.name}: {conv.description}")
    print(_table(counts))
    print(f"wrote {args.output}")
    return 0


def _sizes(scenario: str, extra: list[str]) -> dict[str, int]:
    """The ``--SIZE N`` options after a scenario, checked against its size knobs."""
    from .workbench.synth import SCENARIOS

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


# ---------------------------------------------------------------------------- import


def _import(args) -> int:
    from .workbench.datasets.chatlogs import load_chatlog

    if args.output and not args.output.endswith(".jsonl"):
        raise CliError(f"output {args.output!r}: a dataset is written as .jsonl")
    if not os.path.exists(args.chatlog):
        raise CliError(f"{args.chatlog}: no such file")
    conv = load_chatlog(args.chatlog, args.format, name=args.name)
    if not args.output:
        sys.stdout.write(conv.to_jsonl())
        return 0
    try:
        conv.save(args.output)
    except OSError as exc:
        raise CliError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    stats = conv.meta.get("stats", {})
    skipped = ", ".join(f"{v} {k}" for k, v in (stats.get("skipped") or {}).items())
    print(f"{conv.name}: {conv.description}" + (f"; left out {skipped}" if skipped else ""))
    print(f"wrote {args.output} (no probes yet: write them in the dashboard's Import page)")
    return 0


# ---------------------------------------------------------------------------- replay


def _replays(args, settings: dict[str, Any]) -> list[Replay]:
    from .workbench.replay import replay_many

    convs = _load(args.dataset, args.format)
    emb = _embedder(args.embedder)
    return replay_many(convs, settings, emb, n_jobs=args.n_jobs, policy=getattr(args, "policy", DEFAULT_POLICY))


def _replay(args) -> int:
    _check_table_path(args.output)
    if args.save is not None and not args.save.lower().endswith(".npz"):
        raise CliError(f"--save {args.save!r}: a replay is saved as .npz")
    settings = {k: getattr(args, k) for k in SETTINGS_KEYS if getattr(args, k, None) is not None}
    reps = _replays(args, settings)
    saved = reps
    reps, note = _select_categories(reps, args.categories)
    if note:
        print(note)
    probes = _probe_rows(reps)
    if probes.empty:
        print("no probes in this dataset")
    else:
        _print_replay_summary(reps, probes)
    if args.output:
        _write(probes.drop(columns=["meta"], errors="ignore"), args.output)
        print(f"wrote {args.output}")
    if args.save:
        if len(saved) != 1:
            raise CliError("--save keeps one replay; this dataset has several conversations")
        try:
            saved[0].save(args.save)  # every probe: a later sweep chooses its own categories
        except OSError as exc:
            raise CliError(f"cannot write {args.save!r}: {exc.strerror or exc}") from None
        print(f"saved {args.save}")
    return 0


def _probe_rows(reps: list[Replay]):
    """Every probe of every replay, one row each, with its conversation's name first."""
    import pandas as pd

    frames = []
    for r in reps:
        f = r.to_frames()["probes"]
        f.insert(0, "conversation", r.name)
        frames.append(f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _print_replay_summary(reps: list[Replay], probes) -> None:
    """Metrics by category, overall, and the tokens consolidation saved."""
    import pandas as pd

    from .workbench import metrics as M

    print(f"{len(reps)} conversation(s), {len(probes)} probes, policy {reps[0].meta['policy']}")
    print(_table(M.aggregate(probes, category=True), 50))
    overall = M.aggregate(probes)
    print("overall: " + ", ".join(f"{c}={overall[c].iloc[0]:.3f}" for c in overall.columns
                                  if c != "probes" and pd.notna(overall[c].iloc[0])))
    cons = pd.concat([pd.DataFrame(r.events) for r in reps], ignore_index=True)
    cons = cons[cons["type"] == "consolidate"]
    if len(cons):
        saved = int(M.tokens_saved(cons["tokens_before"].sum(), cons["tokens_after"].sum()))
        print(f"tokens saved by consolidation: {saved}")


# ---------------------------------------------------------------------------- sweep


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


def _sweep(args) -> int:
    from .workbench.sweep import sweep

    _check_table_path(args.output)
    _check_table_path(args.per_probe, "--per-probe")
    grid = _grid(args)
    if args.dataset.endswith(".npz"):
        if not os.path.exists(args.dataset):
            raise CliError(f"{args.dataset}: no such file")
        reps = [Replay.load(args.dataset)]
    else:
        settings: dict[str, Any] = {"pool_limit": max(grid.get("limit", [10]))}
        if args.mode:
            settings["mode"] = args.mode
        reps = _replays(args, settings)
    reps, note = _select_categories(reps, args.categories)
    if note:
        print(note)
    res = sweep(reps, grid, policy=args.policy, progress=None, recency_from=args.recency_from)
    points = res.per_point
    if args.sort not in points.columns:
        raise CliError(f"--sort {args.sort!r}: not a metric here; choose from "
                       + ", ".join(c for c in points.columns if c not in ("policy", "point", "probes", *res.params)))
    n_probes = int(points["probes"].iloc[0]) if len(points) else 0
    print(f"{len(points)} points x {n_probes} probes, policy {res.policy}, sorted by {args.sort}")
    print(_table(points.sort_values(args.sort, ascending=False, kind="stable"), args.top))
    if args.output:
        _write(points, args.output)
        print(f"wrote {args.output}")
    if args.per_probe:
        _write(res.per_probe, args.per_probe)
        print(f"wrote {args.per_probe}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vxmem`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = _parser()
        if argv and argv[0] == "synth":
            args, extra = parser.parse_known_args(argv)
            return _synth(args, extra)
        args = parser.parse_args(argv)
        return {"import": _import, "replay": _replay, "sweep": _sweep}[args.command](args)
    except SystemExit as exc:  # --version and --help print, then exit
        return int(exc.code or 0)
    except (CliError, DatasetError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"vxmem: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # pragma: no cover
        print("vxmem: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
