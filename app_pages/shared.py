"""What the workbench pages share: one parameter state, the dataset picker, the cached replays.

**One parameter state.** ``st.session_state["settings"]`` holds the ranking point (half-life,
weights, limit, token budget), the search mode, the hybrid weight and the embedder. Every
page's controls read and write that one dict (a widget's ``on_change`` copies its value in),
so a value set on Tune is the value on Replay. It is mirrored in ``st.query_params``: the URL
of any page carries the settings that differ from the defaults (and the dataset, and the
saved Playground), and opening such a URL, on any page, starts from them.

**Replays** are heavy and kept per (dataset, embedder, mode, pool size) in a small
process-wide cache here rather than behind ``st.cache_resource``: a cached function replays
the elements it drew, and a replay draws its progress bar (``st.progress``, fed by the
same callback that feeds the CLI's tqdm bar). Frames computed from them sit behind
``st.cache_data``. Pages compute their frames through :mod:`vxmem.workbench.views`; what they offer
(slider ranges, labels, defaults) is in :mod:`app_pages.config`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, kept, long_runs, uploads
from vxmem.memory.stages import PRESETS
from vxmem.workbench import views
from vxmem.workbench.datasets import Conversation, DatasetError, load
from vxmem.workbench.replay.record import Replay

SETTINGS = "settings"
# The widgets that pick a conversation or a probe of the dataset: another dataset resets them.
DATASET_WIDGETS = ("replay_conv", "replay_probe", "tune_probe", "budget_probe", "tune_vary")
_QUERY_EXTRA = ("dataset", "pg")  # what the URL carries besides the settings


# ---------------------------------------------------------------------------- the parameter state


def settings() -> dict[str, Any]:
    """The one parameter state every page reads and writes."""
    return st.session_state[SETTINGS]


def check_session() -> None:
    """Before a run: drop what this session holds that cannot be used (a wrong type, a bad
    value) and re-check its settings, naming each problem; the page then starts afresh there."""
    state = st.session_state
    drop, problems = views.check_state(state)
    for key in drop:
        del state[key]
    if SETTINGS in state:
        raw = state[SETTINGS]
        if isinstance(raw, dict):
            values, bad = views.check_settings(raw, config.RANGES, list(config.EMBEDDERS.values()),
                                               base=config.DEFAULT_SETTINGS)
        else:
            values, bad = dict(config.DEFAULT_SETTINGS), [f"settings ({views.short(raw)}): not a mapping"]
        if bad:
            state[SETTINGS] = values
            problems += [p if p.startswith("settings") else f"settings, {p}" for p in bad]
    if problems:
        state["state_problems"] = problems


def init_settings() -> None:
    """On a session's first run, start from the URL's settings (bad values are named, not fatal)."""
    if SETTINGS in st.session_state:
        return
    query = st.query_params.to_dict()
    raw = {k: v for k, v in query.items() if k in views.SETTINGS_KEYS}
    values, problems = views.check_settings(raw, config.RANGES, list(config.EMBEDDERS.values()),
                                            base=config.DEFAULT_SETTINGS)
    problems += views.unknown_keys(query, (*views.SETTINGS_KEYS, *_QUERY_EXTRA))
    st.session_state[SETTINGS] = values
    dataset = query.get("dataset")
    if dataset:
        names = shipped()["name"].tolist()
        if dataset in names:
            st.session_state["dataset_kept"] = dataset
        else:
            problems.append(f"dataset {views.short(dataset)}: not a shipped dataset; known: {', '.join(names)}")
    if query.get("pg"):
        st.session_state["pg_restore"] = query["pg"]
    st.session_state["url_problems"] = problems


def page_failed(title: str, exc: Exception) -> None:
    """A page that could not be drawn says so in a sentence and offers a fresh session; the
    traceback goes to the server's log, not to the page."""
    logging.getLogger("vxmem.workbench").exception("the %s page failed", title)
    st.error(f"The {title} page could not be drawn: {views.plain(f'{type(exc).__name__}: {exc}', 300)}. "
             "A value this session holds may be unusable; a fresh session starts from the defaults.")
    st.button("Start a fresh session", on_click=reset_session, key="fresh_session")


def reset_session() -> None:
    """Forget everything this session holds (the URL keeps its settings for the next run)."""
    for key in list(st.session_state.keys()):
        del st.session_state[key]


def show_problems() -> None:
    """What was ignored from the URL or dropped from this session, said in the sidebar (quoted as plain text)."""
    with st.sidebar:
        for problem in st.session_state.get("url_problems") or ():
            st.warning(f"Ignored from the URL: {views.plain(problem, 300)}")
        for problem in st.session_state.pop("state_problems", None) or ():
            st.warning(f"Reset in this session: {views.plain(problem, 300)}")


def publish_settings() -> None:
    """Write the state into the URL: the settings that differ from the defaults, the dataset
    and the saved Playground."""
    want = views.settings_to_query(settings(), config.DEFAULT_SETTINGS)
    kept = st.session_state.get("dataset_kept")
    if kept and kept not in (config.DEFAULT_DATASET, config.UPLOAD, config.ON_DISK, config.IMPORTED):
        want["dataset"] = kept
    if st.session_state.get("pg_saved"):
        want["pg"] = st.session_state["pg_saved"]
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)


def apply_settings(values: dict[str, Any]) -> None:
    """Make ``values`` the current settings (a callback: Sweep's best point, an import, a reset)."""
    settings().update({k: v for k, v in values.items() if k in views.SETTINGS_KEYS})
    for k in views.SETTINGS_KEYS:  # widgets drawn next run take the new values
        st.session_state.pop(_key(k), None)


def _key(name: str) -> str:
    return f"set_{name}"


def _bind(name: str) -> str:
    """The widget key of setting ``name``, primed with the state's value."""
    key = _key(name)
    st.session_state[key] = settings()[name]
    return key


def _changed(name: str) -> None:
    settings()[name] = st.session_state[_key(name)]


def param_sliders(names=config.RANKING_PARAMS, columns: int = 1) -> dict[str, Any]:
    """One slider per shared ranking parameter; returns the current values."""
    cols = st.columns(columns) if columns > 1 else [st.container()]
    for j, name in enumerate(names):
        label, lo, hi, _, step = config.PARAMS[name]
        with cols[j % len(cols)]:
            st.slider(label, lo, hi, step=step, key=_bind(name), on_change=_changed, args=(name,),
                      help=f"`{name}`, shared by every page")
    return {k: settings()[k] for k in config.RANKING_PARAMS}


def point() -> dict[str, Any]:
    """The shared ranking point (slider values; with the hybrid weight in hybrid mode)."""
    return views.point_of(settings())


def settings_sidebar() -> None:
    """The sidebar's search controls (mode, hybrid weight, embedder) and settings export / import."""
    s = settings()
    with st.sidebar:
        st.subheader("Search")
        st.selectbox("Search mode", config.MODES, key=_bind("mode"), on_change=_changed, args=("mode",),
                     help="Which memories enter the candidate pool: dense (cosine), lexical (BM25) or hybrid.")
        if s["mode"] == "hybrid":
            label, lo, hi, _, step = config.HYBRID
            st.slider(label, lo, hi, step=step, key=_bind("hybrid_weight"), on_change=_changed,
                      args=("hybrid_weight",))
        labels = {v: k for k, v in config.EMBEDDERS.items()}
        st.selectbox("Embedder", list(labels), key=_bind("embedder"), on_change=_changed, args=("embedder",),
                     format_func=lambda v: labels[v], help="A new embedder or mode replays the dataset once.")
        if s["embedder"] == "default":
            st.selectbox("Recall preset", config.PRESETS, key=_bind("preset"), on_change=_changed, args=("preset",),
                         help="`preset`: fast (the first stage alone), default (late interaction over the first "
                              "stage's 120 best) or accurate (the default, then a cross-encoder reordering its top "
                              "limit). A change replays the dataset once.")
        st.selectbox("Ages count from", config.RECENCY_FROM, key=_bind("recency_from"), on_change=_changed,
                     args=("recency_from",), format_func=lambda v: config.RECENCY_LABELS[v],
                     help="`recency_from`: when a memory was stored, or when a recall last returned it "
                          "(LangChain's time-weighted retriever). A change replays the dataset once.")
        with st.expander("Settings: export, import"):
            st.download_button("Settings as JSON", views.settings_json(s), file_name="vxmem_settings.json",
                               mime="application/json", key="settings_download", width="stretch")
            st.code(views.settings_snippet(s), language="python")
            up = st.file_uploader("Import settings (JSON)", type=["json"], key="settings_upload")
            if up is not None:
                try:
                    values, problems = views.settings_from_json(up.getvalue(), config.RANGES,
                                                                list(config.EMBEDDERS.values()))
                except ValueError as exc:
                    st.error(views.plain(exc, 300))
                else:
                    for problem in problems:
                        st.warning(f"Not imported: {views.plain(problem, 300)}")
                    st.button("Use these settings", on_click=apply_settings, args=(values,), key="settings_apply")
            st.button("Reset to the defaults", on_click=apply_settings, args=(dict(config.DEFAULT_SETTINGS),),
                      key="settings_reset")


# ---------------------------------------------------------------------------- datasets and replays


@st.cache_data(show_spinner=False)
def shipped() -> pd.DataFrame:
    return views.shipped_datasets(config.DATASETS)


@st.cache_data(show_spinner=False, max_entries=16)
def load_shipped(path: str, fmt: str | None) -> list[Conversation]:
    return load(path, format=fmt)


class _Cache:
    """A small thread-safe LRU of heavy results, shared by every session of the process."""

    def __init__(self, size: int):
        self.size, self.items, self.lock = size, OrderedDict[Any, Any](), threading.Lock()

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = build()
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value


_REPLAYS = _Cache(24)


BAR_STEPS = 20  # a bar moves in steps of 5%: each move is a message to the browser, which redraws


def with_progress(text: str, work: Callable[[Callable[[int, int, str], None]], Any]) -> Any:
    """Run ``work(progress)`` under an ``st.progress`` bar that ``progress(done, total, desc)`` moves,
    at most :data:`BAR_STEPS` times per piece of work (work reports up to a hundred times: at that
    rate the browser spent a third of its CPU on the Compare page redrawing bars)."""
    bar = st.progress(0.0, text=text)
    shown: dict[str, int] = {}

    def progress(done: int, total: int, desc: str) -> None:
        step = BAR_STEPS * done // max(total, 1)
        if shown.get(desc) == step and done < total:
            return
        shown[desc] = step
        bar.progress(min(1.0, done / max(total, 1)), text=f"{text} {desc}: {done:,} of {total:,}")

    try:
        return work(progress)
    finally:
        bar.empty()


def cached(key: Any, text: str, work: Callable[[Callable[[int, int, str], None]], Any]) -> Any:
    """``work(progress)`` once per ``key`` in the process, with a progress bar the first time."""
    return _REPLAYS.get(key, lambda: with_progress(text, work))


def replays_for(key: str, conversations: tuple[Conversation, ...], s: dict[str, Any] | None = None,
                rs: dict[str, Any] | None = None, timed: bool = False) -> list[Replay]:
    """The replays of a dataset (``key``: its path, or the upload's hash) for the settings'
    embedder and search mode; the other settings re-rank their cached pools. ``rs``: what
    they record with (default: :func:`vxmem.workbench.views.replay_settings` of the settings).
    ``timed``: without the replay cache, so each recall's ``recall_ms`` is a live one's."""
    s = dict(s or settings())
    rs = views.replay_settings(s) if rs is None else rs
    cache_key = ("replays", key, s["embedder"], tuple(sorted(rs.items())), timed)
    what = f"{s['embedder']}, {s['mode']}" + (f", preset {rs['preset']}" if "preset" in rs else "")
    long_runs.confirm(cache_key, conversations, rs, s["embedder"], done=cache_key in _REPLAYS.items)
    return cached(cache_key, f"Replaying through a fresh memory ({what})...",
                  lambda progress: views.replay_all(conversations, rs, views.embedder_for(s["embedder"]),
                                                    progress=progress, cache=False if timed else None))


def preset_replays() -> tuple[str, dict[str, list[Replay]]]:
    """The picked dataset replayed with each recall preset, cheapest first (at the settings'
    embedder, mode and ages; see :func:`vxmem.workbench.views.preset_settings`), without the
    replay cache: each recall pays for its models, so its time is a live one's. With a key
    for ``st.cache_data`` frames of them. Call it after :func:`dataset`, which checks the pick."""
    result, s = st.session_state["dataset"], settings()
    out: dict[str, list[Replay]] = {}
    keys = [result["key"], s["embedder"]]
    for preset in PRESETS:
        rs = views.preset_settings(s, preset)
        out[preset] = replays_for(result["key"], tuple(result["conversations"]), s, rs, timed=True)
        keys.append(json.dumps(rs, sort_keys=True))
    return "|".join(keys), out


def dataset_sidebar(show: bool = True) -> None:
    """The sidebar's dataset picker; the result lands in ``st.session_state["dataset"]``."""
    if not show:
        return
    names = shipped()["name"].tolist()
    imported = st.session_state.get("imported")
    with st.sidebar:
        st.subheader("Dataset")
        options = names + ([config.IMPORTED] if imported is not None else []) + [config.UPLOAD, config.ON_DISK]
        # Kept outside the widget: Streamlit drops a widget's state on a page that does not draw it.
        last = st.session_state.get("dataset_kept", config.DEFAULT_DATASET)
        choice = st.selectbox("Shipped scenario, fixture or upload", options,
                              index=options.index(last) if last in options else 0, key="dataset_choice")
        st.session_state["dataset_kept"] = choice
        result: dict[str, Any] = {"key": None, "label": choice, "conversations": None, "error": None}
        if choice == config.UPLOAD:
            uploads.dataset_upload(result)
        elif choice == config.ON_DISK:
            uploads.dataset_on_disk(result)
        elif choice == config.IMPORTED:
            conv = imported["conversation"]
            if conv.probes:
                result.update(conversations=[conv], key=f"imported:{imported['key']}", label=conv.name)
            else:
                result["error"] = "The imported chat has no probe yet: write one on the Import page."
        else:
            row = shipped().set_index("name").loc[choice]
            try:
                result["conversations"] = load_shipped(row["path"], row["format"])
                result["key"] = f"shipped:{row['path']}"
            except DatasetError as exc:  # a shipped file edited by hand
                result["error"] = f"Cannot load {choice}: {views.plain(exc, 400)}"
        if st.session_state.get("dataset_seen") != result["key"]:  # another dataset: its pickers start afresh
            kept.forget(*DATASET_WIDGETS)
            st.session_state["dataset_seen"] = result["key"]
        if result["conversations"]:
            n = len(result["conversations"])
            probes = sum(len(c.probes) for c in result["conversations"])
            st.caption(f"{n} conversation{'s' * (n != 1)}, {probes} probes")
    st.session_state["dataset"] = result


def picked() -> dict[str, Any]:
    """The picked dataset (``dataset_sidebar``'s result); none, or a bad one, stops the page."""
    result = st.session_state.get("dataset")
    error = "No dataset picked." if result is None else result["error"]
    if error:
        st.error(error)
        st.stop()
    return result


def wide_settings(s: dict[str, Any], widest: int | None = None) -> dict[str, Any]:
    """What the settings ``s`` replay with (:func:`vxmem.workbench.views.replay_settings`), with
    pools for ``widest`` too: the largest limit a page will rank at. Pools wider than the settings'
    own are recorded for the largest limit of all, so every page that needs them shares one replay."""
    rs = views.replay_settings(s)
    if widest is not None and int(widest) > int(rs["pool_limit"]):
        rs["pool_limit"] = max(int(widest), views.MAX_LIMIT)
    return rs


def dataset(widest: int | None = None) -> tuple[str, list[Conversation], list[Replay]]:
    """The picked dataset: (cache key, conversations, replays); a bad one stops the page.
    ``widest``: the largest limit the page will rank at (default: the settings' limit)."""
    result = picked()
    convs = result["conversations"]
    rs = wide_settings(settings(), widest)
    reps = replays_for(result["key"], tuple(convs), rs=rs)
    return cache_key(result["key"], rs=rs), convs, reps


def cache_key(key: str, s: dict[str, Any] | None = None, rs: dict[str, Any] | None = None) -> str:
    """A key for ``st.cache_data`` frames of a dataset's replays: the dataset, embedder and mode
    (``rs``: what they were replayed with; default: what the settings replay with)."""
    s = s or settings()
    rs = views.replay_settings(s) if rs is None else rs
    return (f"{key}|{s['embedder']}|{rs['mode']}|{rs['pool_limit']}|{rs.get('recency_from', 'created')}"
            f"|{rs.get('preset', 'default')}")


def probe_picker(replays: list[Replay], key: str, label: str = "Probe") -> tuple[int, int]:
    """A select box over every probe of ``replays``; returns (replay index, probe index)."""
    table = views.probe_table(replays)
    options = list(range(len(table)))
    multi = len(replays) > 1

    def fmt(i):
        row = table.iloc[i]
        where = f"{row['conversation']} / " if multi else ""
        return f"{where}{row['label']}: {row['query']}"

    i = st.selectbox(label, options, format_func=fmt, key=key)
    row = table.iloc[i]
    return int(row["replay"]), int(row["probe"])


# ---------------------------------------------------------------------------- what several pages draw


# Column widths in pixels: a table's shown columns add up to less than the main block of the wide layout in a
# 1360 px window (about 900 px), so none is cut off at the page's edge.
_NUM = {"format": "%.3f", "width": 70}
TEXT_WIDTH = 230
RESULT_COLUMNS = {
    "rank": st.column_config.NumberColumn(width=45), "label": st.column_config.TextColumn(width=55),
    "text": st.column_config.TextColumn(width=TEXT_WIDTH), "kind": st.column_config.TextColumn(width=60),
    "session": st.column_config.TextColumn(width=80), "tokens": st.column_config.NumberColumn(width=60),
    "relevant": st.column_config.CheckboxColumn(width=65), "stale": st.column_config.CheckboxColumn(width=50),
    "score": st.column_config.NumberColumn(**_NUM),
    "relevance": st.column_config.NumberColumn("relevance (raw)", format="%.3f", width=95,
                                               help="The search mode's own score: cosine, BM25 or fused"),
    "relevance_norm": st.column_config.NumberColumn("relevance_norm", format="%.3f", width=100,
                                                    help="Min-max rescaled across the candidate pool"),
    "recency": st.column_config.NumberColumn(**_NUM), "feedback": st.column_config.NumberColumn(**_NUM),
    "score_deficit": st.column_config.NumberColumn(**_NUM),
}
# What a ranking shows, so that it fits the page: the memory, its marks and the score parts (kind, session
# and tokens are in the why table's detail and the memories' list).
RANKING_ORDER = ("rank", "label", "text", "relevant", "stale", "score", "relevance", "relevance_norm", "recency",
                 "feedback")
WHY_ORDER = ("reason", "rank", "label", "text", "detail", "relevant", "stale")


def ranking_table(frame: pd.DataFrame, key: str | None = None, order=RANKING_ORDER,
                  text_width: int = TEXT_WIDTH) -> None:
    """A ranking with its score parts (raw relevance beside the normalised one); ``order``: the
    columns shown, ``text_width`` the memory's text column in pixels."""
    st.dataframe(frame, hide_index=True, width="stretch", key=key, column_order=[c for c in order if c in frame],
                 column_config={**RESULT_COLUMNS, "text": st.column_config.TextColumn(width=text_width)})


def score_bars(ranking: pd.DataFrame, s: dict[str, Any]) -> None:
    """The stacked bars of what relevance, recency and feedback contributed to each score."""
    parts = views.score_parts(ranking, s)
    if parts.empty:
        return
    # Every bar keeps its label (Vega drops ones it thinks overlap, at three bars as at twenty) and the
    # score axis a few round ticks, not one per 0.1 crowding a half-page chart.
    bars = alt.Chart(parts).mark_bar().encode(
        x=alt.X("contribution:Q", title="score contribution", axis=alt.Axis(tickCount=5, format=".1f")),
        y=alt.Y("label:N", sort=alt.SortField("rank"), title=None,
                axis=alt.Axis(labelOverlap=False, labelLimit=120)),
        color=alt.Color("part:N", sort=["relevance", "recency", "feedback"], title="part"),
        order=alt.Order("part_order:Q"),
        tooltip=tips("rank", "label", "text", "part", alt.Tooltip("contribution:Q", format=".3f")))
    bars = bars.transform_calculate(part_order="indexof(['relevance', 'recency', 'feedback'], datum.part)")
    chart(bars.properties(height=max(150, 40 + 28 * len(ranking))))  # three bars still fit the legend beside
    st.caption("score = relevance_norm + recency_weight x 0.5^(age / half_life) "
               "+ feedback_weight x clamp(feedback, +-2)")


def relevance_warning(best_raw: float | None, threshold: float | None, mode: str, rerank: str | None = None,
                      probability: float | None = None, ranking: pd.DataFrame | None = None) -> None:
    """Warn when the calibrated probability that anything relevant was found is low (without
    one, when the best candidate's raw relevance is), unless ``ranking`` returns a memory marked
    relevant; otherwise show it as a caption."""
    answered = None if ranking is None else views.first_relevant_rank(ranking)
    level, text = views.relevance_note(best_raw, threshold, mode, rerank, probability, answered)
    (st.warning if level == "warning" else st.caption)(text)


def why_table(why: pd.DataFrame, key: str) -> None:
    """The why (not) recalled table: one row per memory, with its reason and the parts."""
    st.dataframe(views.why_table(why), hide_index=True, width="stretch", key=key, column_order=WHY_ORDER,
                 column_config={**RESULT_COLUMNS, "text": st.column_config.TextColumn(width=250),
                                "detail": st.column_config.TextColumn(width=290),
                                "reason": st.column_config.TextColumn(
                                    width=95, help="vxmem.workbench.analysis.reasons.REASONS")})
    st.caption("The detail says how each memory scored against the one that pushed it out; the score parts are in "
               "the ranking above.")


def chart(c: alt.Chart) -> None:
    """Draw ``c`` the full width of the page."""
    st.altair_chart(c, width="stretch")


def tips(*fields: str | alt.Tooltip) -> list[alt.Tooltip]:
    """A chart's tooltip: each field name as an ``alt.Tooltip``, tooltips as they are. Altair
    turns a bare name into its channel by matching it against its whole schema, some 3 ms a name
    on every rerun; a channel object is taken as it is."""
    return [alt.Tooltip(f) if isinstance(f, str) else f for f in fields]


def sample_caveat(probes: int) -> None:
    """A visible caveat under a mean of fewer probes than the CLI trusts (metrics.SMALL_SAMPLE)."""
    note = views.sample_note(probes)
    if note:
        st.warning(note, icon=":material/info:")


def intervals_caption(ci: pd.DataFrame, what: str) -> None:
    """Each metric of ``ci`` (:func:`vxmem.workbench.views.metric_intervals`) as its mean, its
    bootstrap 95% interval and the probes behind it, in one caption; the caveat under it."""
    parts = [f"{config.METRIC_LABELS.get(r.metric, r.metric)} {views.interval_text(r.mean, r.lo, r.hi, r.probes)}"
             for r in ci.itertuples()]
    st.caption(f"{what}: " + "; ".join(parts) + ".")
    sample_caveat(int(ci["probes"].max()) if len(ci) else 0)


def flat_note(values, what: str) -> bool:
    """Say so (and return True) when ``values`` hold one value only: a chart of them would be empty."""
    if not views.is_flat(values):
        return False
    v = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    st.info(f"{what} is {v.iloc[0]:.3f} everywhere here: nothing to chart." if len(v) else f"{what}: nothing scored.")
    return True
