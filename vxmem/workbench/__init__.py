"""The workbench: conversations replayed through the memory on a simulated clock, and what is learnt from them.

- :mod:`~vxmem.workbench.datasets`: conversations (synthetic, LoCoMo, LongMemEval, chat logs);
- :mod:`~vxmem.workbench.replay` and :mod:`~vxmem.workbench.record`: replays and their cached pools;
- :mod:`~vxmem.workbench.sweep`, :mod:`~vxmem.workbench.policies`, :mod:`~vxmem.workbench.metrics`:
  parameter grids ranked the way ``recall()`` ranks, and the metrics of each point;
- :mod:`~vxmem.workbench.why` and :mod:`~vxmem.workbench.analysis`: why a memory was or was not
  recalled, A/B comparisons, holdouts;
- :mod:`~vxmem.workbench.views`: the DataFrames the dashboard and the notebooks draw.
"""
