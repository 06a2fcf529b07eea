"""What the ``vxmem`` command does: synthesise, import, write probes, replay and sweep, and the tables it prints.

:mod:`vxmem.cli` reads the command line and hands the parsed arguments to :func:`run_synth`,
:func:`run_import`, :func:`run_probes`, :func:`run_replay` or :func:`run_sweep` (``compare`` and ``audit``:
:mod:`vxmem.cli.comparing`). A problem with what the user
asked for is a :class:`CliError`: one line on stderr, exit code 2.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from typing import Any

from ..core.errors import one_line
from ..workbench.datasets.formats import CHAT_FORMATS
from ..workbench.datasets.model import Conversation
from ..workbench.replay.record import Replay
from ..workbench.replay.run import SETTINGS_KEYS
from ..workbench.sweep.policies import POLICIES
from .tables import gather_ties, terminal_progress

DEFAULT_POLICY = "blend"
EMBEDDERS = ("default", "hashing", "semantic")  # default: what Vectrix() uses (bge-small + its rerank)
TABLE_EXTENSIONS = (".csv", ".parquet")
# LoCoMo's question categories, by number and by name (a loader may give either).
LOCOMO_CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
# Left out unless --categories names them: LoCoMo's adversarial questions have no answer in the
# conversation, so retrieval metrics cannot score them.
EXCLUDED_BY_DEFAULT = ("adversarial",)


class CliError(Exception):
    """A problem with what the user asked for: reported in one line, exit code 2."""


def check_table_path(path: str | None, flag: str = "-o") -> None:
    """Refuse a results file name the writer cannot write, before any work is done."""
    ext = None if path is None else os.path.splitext(path)[1].lower()
    if ext is not None and ext not in TABLE_EXTENSIONS:
        raise CliError(f"{flag} {path!r}: use a .csv or .parquet file name")
    if ext == ".parquet" and not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
        raise CliError(f"{flag} {path!r}: writing Parquet needs pyarrow: pip install pyarrow")


def write_table(frame, path: str) -> None:
    ext = os.path.splitext(path)[1].lower()
    check_table_path(path)
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


def table_text(frame, max_rows: int = 30) -> str:
    import pandas as pd

    frame = frame.dropna(axis=1, how="all")  # a metric the data cannot score (no budget, no sessions)
    with pd.option_context("display.width", 160, "display.max_columns", 30, "display.max_colwidth", 40):
        return frame.head(max_rows).to_string(index=False, float_format=lambda v: f"{v:.3f}")


def embedder_named(name: str):
    """What ``--embedder NAME`` hands the library: None (its default), a name, or an embedder."""
    if name == "default":
        return None  # the library's default (VXMEM_EMBEDDER, else bge-small)
    if name == "hashing":
        return "hashing"
    try:
        from ..models.embed import SemanticEmbedder

        return SemanticEmbedder()
    except ImportError as exc:
        raise CliError(str(exc).splitlines()[0]) from None


def load_conversations(path: str, fmt: str | None) -> list[Conversation]:
    """The conversations of the dataset at ``path`` (``fmt``: guessed when None)."""
    from ..workbench.datasets.formats import guess_format, load

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    fmt = fmt or guess_format(path)
    # Every LoCoMo question becomes a probe (adversarial ones too): --categories chooses what is scored.
    convs = load(path, format=fmt, categories="all" if fmt == "locomo" else None)
    if not any(c.probes for c in convs) and any(c.meta.get("source") in CHAT_FORMATS for c in convs):
        raise CliError(f"{path}: a chat log has no probes to score; `vxmem import` it and write probes with "
                       "`vxmem probes add` or in the dashboard's Import page")
    return convs


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


# ---------------------------------------------------------------------------- synth and import


def run_synth(args, sizes: dict[str, int]) -> int:
    """``vxmem synth``: the scenario at ``args.seed`` and ``sizes``, to standard output or a ``.jsonl`` file."""
    from ..workbench.datasets.jsonl import dumps_jsonl, save_jsonl
    from ..workbench.synth import generate

    conv = generate(args.scenario, seed=args.seed, **sizes)
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
    print(table_text(counts))
    print(f"wrote {args.output}")
    return 0


def run_import(args) -> int:
    """``vxmem import``: a chat log as a vxmem JSONL dataset."""
    from ..workbench.datasets.chatlogs import load_chatlog

    if args.output and not args.output.endswith(".jsonl"):
        raise CliError(f"output {args.output!r}: a dataset is written as .jsonl")
    if not os.path.exists(args.chatlog):
        raise CliError(f"{args.chatlog}: no such file")
    judge = _import_judge(args)  # a bad judge is named before the file is read
    conv = load_chatlog(args.chatlog, args.format, name=args.name)
    if judge is not None:
        conv = _with_corrections(conv, judge, args.embedder)
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
    print(f"wrote {args.output} (no probes yet: write them with `vxmem probes add` or in the dashboard's "
          "Import page)")
    return 0


def _import_judge(args) -> Any:
    """The judge ``vxmem import`` runs: an endpoint's model, or a named or importable one; None: none."""
    if bool(args.judge_base_url) != bool(args.judge_model):
        raise CliError("--judge-base-url and --judge-model go together")
    if args.judge_base_url:
        if args.judge:
            raise CliError("--judge and --judge-base-url: name one judge")
        from ..llm import OpenAICompatibleJudge

        return OpenAICompatibleJudge(args.judge_model, base_url=args.judge_base_url)
    if not args.judge:
        return None
    from ..workbench.analysis.audit import judge_named

    try:
        return judge_named(args.judge)[1]
    except ValueError as exc:
        raise CliError(f"--judge: {exc}") from None


def _with_corrections(conv: Conversation, judge: Any, embedder: str) -> Conversation:
    """``conv`` with the corrections ``judge`` finds replayed as corrections, each one printed on stderr."""
    from ..llm import LLMError
    from ..workbench.datasets.corrections import find_corrections, mark_correction

    try:
        pairs = find_corrections(conv, judge, embedder_named(embedder))
    except LLMError as exc:
        raise CliError(f"the judge failed: {exc}") from None
    text = {e.label: e.text for e in conv.events if e.label}
    for old, new in pairs:
        conv = mark_correction(conv, old, new)
        print(f"correction: {new} ({one_line(str(text[new]), 60)}) corrects {old} ({one_line(str(text[old]), 60)})",
              file=sys.stderr)
    print(f"{len(pairs)} correction(s) found", file=sys.stderr)
    return conv


# ---------------------------------------------------------------------------- probes


def run_probes(args) -> int:
    """``vxmem probes list|add|delete DATASET``: a vxmem JSONL dataset's probes, listed or
    changed in place. Every check runs before the file is touched; it is rewritten whole
    (beside itself, then moved into place), so a failed call leaves it as it was."""
    from ..workbench.datasets.formats import guess_format
    from ..workbench.datasets.jsonl import load_jsonl, save_jsonl
    from ..workbench.datasets.model import DatasetError, format_time
    from ..workbench.datasets.probes import add_probe, remove_probe

    if not os.path.exists(args.dataset):
        raise CliError(f"{args.dataset}: no such file")
    try:
        fmt = guess_format(args.dataset)
    except DatasetError:  # not text, or no format vxmem knows
        fmt = "unknown"
    if fmt != "jsonl":
        raise CliError(f"{args.dataset} is {'an' if fmt == 'unknown' else 'a'} {fmt} file: probes are written "
                       "into vxmem JSONL datasets (`vxmem import` a chat log first)")
    import pandas as pd

    conv = load_jsonl(args.dataset)
    if args.action == "list":
        # A probe without a session recalls from every one; without a category it has none: never "None".
        rows = [{"label": e.label, "time": format_time(e.time), "session": e.session or "(every)",
                 "category": e.category or "",
                 "query": e.query, "relevant": ",".join(e.relevant), "stale": ",".join(e.stale)}
                for e in conv.events if e.type == "probe"]
        print(pd.DataFrame(rows).to_string(index=False) if rows else "no probes in this dataset")
        return 0
    if args.action == "add":
        try:
            changed = add_probe(conv, args.query, list(args.expect or ()), args.session, args.time, answer=args.answer,
                                stale_labels=list(args.stale or ()), category=args.category, label=args.label)
        except (TypeError, ValueError) as exc:
            raise CliError(_as_options(str(exc))) from None
        added = {e.label for e in changed.probes} - {e.label for e in conv.probes}  # not the last: it sits at its time
        done = f"added probe {added.pop()!r}"
    else:
        try:
            changed = remove_probe(conv, args.label)
        except KeyError as exc:
            raise CliError(str(exc.args[0])) from None
        done = f"deleted probe {args.label!r}"
    try:
        save_jsonl(changed, args.dataset)
    except OSError as exc:
        raise CliError(f"cannot write {args.dataset!r}: {exc.strerror or exc}") from None
    print(f"{done}: {args.dataset} has {len(changed.probes)} probes")
    return 0


# add_probe's argument names, as `vxmem probes add` spells them.
_PROBE_OPTIONS = {"relevant_labels": "--expect", "stale_labels": "--stale"}


def _as_options(message: str) -> str:
    """An error of :func:`~vxmem.workbench.datasets.probes.add_probe` in the command's words: its options,
    not its arguments."""
    message = re.sub(r"\b(relevant_labels|stale_labels)\b", lambda m: _PROBE_OPTIONS[m.group(1)], message)
    return "--" + message if message.startswith(("time ", "query ")) else message


# ---------------------------------------------------------------------------- replay


def _replays(args, settings: dict[str, Any], one: str | None = None) -> list[Replay]:
    """The dataset of ``args`` replayed at ``settings``; ``one`` names the option that keeps a
    single replay, refused before any work when the dataset holds several conversations."""
    from ..workbench.replay.estimate import estimate, is_long
    from ..workbench.replay.run import check_settings, replay_many

    convs = load_conversations(args.dataset, args.format)
    if one is not None and len(convs) != 1:
        raise CliError(f"{one} keeps one replay; {args.dataset} holds {len(convs)} conversations")
    check_settings(settings)  # a bad setting is named now, not after the first replay
    emb = embedder_named(args.embedder)
    if is_long(convs):  # say how long before it starts
        print(f"{len(convs)} conversation(s): {estimate(convs, settings, emb)}", flush=True)
    return replay_many(convs, settings, emb, n_jobs=args.n_jobs, policy=getattr(args, "policy", DEFAULT_POLICY),
                       progress=terminal_progress() or False)  # a bar on a terminal; nothing in a pipe


def run_replay(args) -> int:
    """``vxmem replay``: every probe's metrics, printed and written; the replay saved with ``--save``."""
    check_table_path(args.output)
    if args.save is not None and not args.save.lower().endswith(".npz"):
        raise CliError(f"--save {args.save!r}: a replay is saved as .npz")
    if args.report is not None and not args.report.lower().endswith((".html", ".json")):
        raise CliError(f"--report {args.report!r}: a report is written as .html or .json")
    settings = {k: getattr(args, k) for k in SETTINGS_KEYS if getattr(args, k, None) is not None}
    reps = _replays(args, settings, one="--save" if args.save else None)
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
        write_table(probes.drop(columns=["meta"], errors="ignore"), args.output)
        print(f"wrote {args.output}")
    if args.save:
        try:
            saved[0].save(args.save)  # every probe: a later sweep chooses its own categories
        except OSError as exc:
            raise CliError(f"cannot write {args.save!r}: {exc.strerror or exc}") from None
        print(f"saved {args.save}")
    if args.report:
        write_report(reps, args.dataset, args.report)
        print(f"wrote {args.report}")
    return 0


def write_report(reps: list[Replay], dataset: str, path: str) -> None:
    """The report of ``reps`` (all their probes) written to ``path``, .html or .json."""
    import json

    from ..workbench.analysis.report import dataset_sha256, report_bundle, report_html

    with open(dataset, "rb") as f:
        digest = dataset_sha256(f.read())
    bundle = report_bundle(reps, os.path.basename(dataset), digest)
    text = report_html(bundle) if path.lower().endswith(".html") else json.dumps(bundle, indent=1, sort_keys=True)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise CliError(f"cannot write {path!r}: {exc.strerror or exc}") from None


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

    from ..workbench.analysis import metrics as M
    from ..workbench.sweep.holdout import bootstrap_ci

    print(f"{len(reps)} conversation(s), {len(probes)} probes, policy {reps[0].meta['policy']}")
    print(table_text(M.aggregate(probes, category=True), 50))
    if len(reps) > 1:
        k = int(reps[0].settings.get("limit") or 10)
        print(f"recall@{k} by category and conversation, mean [95% bootstrap interval]:")
        print(table_text(M.by_category_and_conversation(probes, "recall", bootstrap_ci), 50))
    overall = M.aggregate(probes)
    parts = []
    for c in overall.columns:
        col = "rr" if c == "mrr" else c  # the mean reciprocal rank of the probes' reciprocal ranks
        if c == "probes" or pd.isna(overall[c].iloc[0]) or col not in probes:
            continue
        mean, lo, hi = bootstrap_ci(probes[col].to_numpy(dtype=float))
        parts.append(f"{c}={mean:.3f} [{lo:.3f}, {hi:.3f}]")
    print(f"overall, {len(probes)} probes, mean [95% bootstrap interval]: " + ", ".join(parts))
    if len(probes) < M.SMALL_SAMPLE:
        print(f"caveat: {len(probes)} probes, fewer than {M.SMALL_SAMPLE}: these means are far from certain; "
              "read the intervals, not the digits")
    cons = pd.concat([pd.DataFrame(r.events) for r in reps], ignore_index=True)
    cons = cons[cons["type"] == "consolidate"]
    if len(cons):
        saved = int(M.tokens_saved(cons["tokens_before"].sum(), cons["tokens_after"].sum()))
        print(f"tokens saved by consolidation: {saved}")


# ---------------------------------------------------------------------------- sweep


def run_sweep(args, grid: dict[str, list]) -> int:
    """``vxmem sweep``: ``grid`` over the dataset (or saved replay) of ``args``, its best points
    printed, every point (and probe, with ``--per-probe``) written. The CLI has checked the
    results files' names."""
    from ..workbench.sweep.constraints import satisfied, unmet
    from ..workbench.sweep.run import sweep

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
    res = sweep(reps, grid, policy=args.policy, progress=terminal_progress() or False, recency_from=args.recency_from)
    points = res.per_point
    if args.sort not in points.columns:
        raise CliError(f"--sort {args.sort!r}: not a metric here; choose from "
                       + ", ".join(c for c in points.columns if c not in ("policy", "point", "probes", *res.params)))
    n_probes = int(points["probes"].iloc[0]) if len(points) else 0
    kept = points[satisfied(points, args.subject_to)]  # --subject-to, parsed and checked before any work
    if kept.empty:
        raise CliError(unmet(points, args.subject_to))
    if args.subject_to:
        print(f"{len(kept)} of {len(points)} points keep " + " and ".join(map(str, args.subject_to)))
    shown = gather_ties(kept, args.sort, res.params, {"limit": 10, **POLICIES[res.policy].defaults})
    print(f"{len(points)} points x {n_probes} probes, policy {res.policy}, sorted by {args.sort}; {len(shown)} "
          "distinct results (points that tie on every metric: one row, the nearest the defaults, `tied` of them)")
    print(table_text(shown, args.top))
    if args.output:
        write_table(points, args.output)
        print(f"wrote {args.output}")
    if args.per_probe:
        write_table(res.per_probe, args.per_probe)
        print(f"wrote {args.per_probe}")
    return 0
