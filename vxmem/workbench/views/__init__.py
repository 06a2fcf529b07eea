"""The DataFrames the dashboard (``app.py``) and the notebooks share.

Every function calls the library (replay, sweep, metrics, the memory itself) and reshapes
what it returns into a tidy DataFrame a chart or a table can draw; no ranking happens here.
Nothing imports Streamlit. :mod:`~vxmem.workbench.views.settings` holds the datasets and the
one parameter state, :mod:`~vxmem.workbench.views.replays` the Tune, Sweep, A/B,
Replay and Budget frames, :mod:`~vxmem.workbench.views.playground` the Playground's,
:mod:`~vxmem.workbench.views.intervals` every mean's bootstrap interval, :mod:`~vxmem.workbench.views.costs`
the Compare page's presets and policies against their cost and each preset's quality per
millisecond, :mod:`~vxmem.workbench.views.charts` what a chart needs beyond a frame,
:mod:`~vxmem.workbench.views.inputs` the checks of what comes from outside (uploads, the URL,
the session, text shown as Markdown), :mod:`~vxmem.workbench.views.probe_edit` the Import
page's probes, :mod:`~vxmem.workbench.views.policies` what each ranking policy takes from the controls and
:mod:`~vxmem.workbench.views.picking` how a best point is chosen (not degenerate, tie-aware, held out).
"""

from ..sweep.constraints import Constraint, parse_constraint
from .charts import ab_points, is_flat, spot_labels, spot_sizes, time_format
from .configs import ALL_DATASETS, across_datasets, named_here
from .costs import (
    median_interval,
    median_recall_ms,
    presets_quality_cost,
    presets_table,
    recall_times,
    stage_coverage,
    stage_depth,
    untold_timings,
    write_times,
)
from .inputs import (
    MAX_UPLOAD_BYTES,
    check_state,
    check_upload,
    interval_text,
    plain,
    sample_note,
    session_text,
    short,
    unknown_keys,
)
from .intervals import metric_intervals, point_intervals, side_intervals, with_intervals
from .picking import SIZE_AXES, Pick, compare_policies, pick_best
from .playground import (
    dumps_events,
    first_relevant_rank,
    low_relevance_of,
    next_label,
    playground_conversation,
    playground_jsonl,
    playground_recall,
    playground_state,
    relevance_note,
    replay_match_probability,
    score_parts,
    to_csv,
)
from .policies import ignored_by, policy_description, policy_params
from .probe_edit import DATASET_FORMAT, conversation_from_bytes, delete_probe, probe_fields, probe_of, write_probe
from .replays import (
    POINT_METRICS,
    POLICY_GRIDS,
    REPORT_METRICS,
    ab_frames,
    best_row,
    budget_replay,
    context_budgets,
    explain,
    inert_at,
    memory_timeline,
    missed_at,
    missed_relevant,
    pareto_points,
    point_metrics,
    point_report,
    probe_metrics,
    probe_metrics_at,
    probe_results,
    probe_table,
    rank_movement,
    ranking_at,
    returned,
    stale_above_at,
    sweep_grid,
    sweep_holdout,
    why_table,
)
from .report import category_table, report_versus, run_report
from .settings import (
    DEFAULT_MODE,
    DEFAULT_POINT,
    DEFAULT_SETTINGS,
    EMBEDDER_NAMES,
    MAX_LIMIT,
    REPLAY_SETTINGS,
    SETTINGS_KEYS,
    chatlog_from_bytes,
    check_settings,
    conversation_summary,
    embedder_for,
    grid_point,
    load_bytes,
    param_values,
    point_of,
    preset_settings,
    probe_list,
    replay_all,
    replay_settings,
    settings_from_json,
    settings_json,
    settings_snippet,
    settings_to_query,
    shipped_datasets,
    turn_table,
)

__all__ = [
    "DATASET_FORMAT", "MAX_UPLOAD_BYTES", "ab_points", "median_recall_ms", "presets_quality_cost", "presets_table",
    "recall_times", "stage_coverage", "stage_depth", "write_times",
    "preset_settings", "spot_labels", "spot_sizes", "check_state", "check_upload", "conversation_from_bytes",
    "delete_probe", "interval_text", "is_flat", "metric_intervals", "plain", "point_intervals", "probe_fields",
    "time_format", "probe_of", "sample_note", "session_text", "short", "side_intervals", "unknown_keys",
    "with_intervals",
    "write_probe",
    "DEFAULT_MODE", "DEFAULT_POINT", "DEFAULT_SETTINGS", "EMBEDDER_NAMES", "MAX_LIMIT", "POINT_METRICS",
    "POLICY_GRIDS", "REPLAY_SETTINGS", "REPORT_METRICS", "SETTINGS_KEYS", "ab_frames", "best_row", "budget_replay",
    "chatlog_from_bytes", "check_settings", "compare_policies", "context_budgets", "conversation_summary",
    "dumps_events", "first_relevant_rank", "embedder_for", "explain", "grid_point", "inert_at", "load_bytes",
    "low_relevance_of",
    "memory_timeline", "missed_at", "missed_relevant", "next_label", "param_values", "pareto_points",
    "playground_conversation", "playground_jsonl", "playground_recall", "playground_state", "point_metrics",
    "point_of", "point_report", "probe_list", "probe_metrics", "probe_metrics_at", "probe_results", "probe_table",
    "rank_movement", "ranking_at", "relevance_note", "replay_match_probability", "replay_all", "replay_settings",
    "returned", "score_parts", "ignored_by", "policy_description", "policy_params", "Pick", "SIZE_AXES", "pick_best",
    "Constraint", "parse_constraint", "median_interval", "untold_timings",
    "run_report", "report_versus", "category_table", "ALL_DATASETS", "across_datasets", "named_here",
    "settings_from_json", "settings_json", "settings_snippet", "settings_to_query", "shipped_datasets",
    "stale_above_at", "sweep_grid", "sweep_holdout", "to_csv", "turn_table", "why_table",
]
