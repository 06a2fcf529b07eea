"""The workbench: conversations replayed through the memory on a simulated clock, and what is learnt from them.

- :mod:`~vxmem.workbench.datasets`: conversations (LoCoMo, LongMemEval, chat logs), and
  :mod:`~vxmem.workbench.synth` the synthetic ones (:mod:`~vxmem.workbench.scenarios`,
  written on a :mod:`~vxmem.workbench.scenario_timeline`);
- :mod:`~vxmem.workbench.replay` and :mod:`~vxmem.workbench.record`: replays and their cached pools;
- :mod:`~vxmem.workbench.sweep`, :mod:`~vxmem.workbench.grid`, :mod:`~vxmem.workbench.sweep_engine`,
  :mod:`~vxmem.workbench.policies`, :mod:`~vxmem.workbench.metrics`: parameter grids ranked the way
  ``recall()`` ranks, and the metrics of each point;
- :mod:`~vxmem.workbench.why` (with :mod:`~vxmem.workbench.probe_timeline`), :mod:`~vxmem.workbench.analysis`
  and :mod:`~vxmem.workbench.holdout`: why a memory was or was not recalled, A/B comparisons, holdouts;
- :mod:`~vxmem.workbench.views`: the DataFrames the dashboard and the notebooks draw;
  :mod:`~vxmem.cli.workbench`: what the ``vxmem`` command does.
"""
