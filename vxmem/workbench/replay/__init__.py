"""Replays: a conversation driven through a fresh memory on a simulated clock, and its record.

- :mod:`~vxmem.workbench.replay.run`: :func:`replay` and :func:`replay_many`, and the settings a
  replay takes (:data:`SETTINGS_KEYS`, :func:`check_settings`);
- :mod:`~vxmem.workbench.replay.record`: :class:`Replay`, the record of one replay, with its
  cached candidate pools and its ``.npz`` file;
- :mod:`~vxmem.workbench.replay.stage_scores`: what a replay keeps of a recall's later stages;
- :mod:`~vxmem.workbench.replay.probe_timeline`: the memories as they stood at a probe's moment.

``from vxmem.workbench.replay import replay, replay_many, Replay`` hands those names on, each
module imported when its name is first asked for.
"""

from ...core.lazy import handed_on

__all__ = ["replay", "replay_many", "check_settings", "SETTINGS_KEYS", "Replay"]
__getattr__ = handed_on(__name__, {"replay": "run", "replay_many": "run", "check_settings": "run",
                                   "SETTINGS_KEYS": "run", "Replay": "record"})
