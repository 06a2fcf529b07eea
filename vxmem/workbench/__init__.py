"""The workbench: conversations replayed through the memory on a simulated clock, and what is learnt from them.

- :mod:`~vxmem.workbench.datasets`: conversations (LoCoMo, LongMemEval, chat logs), and
  :mod:`~vxmem.workbench.synth` the synthetic ones (``synth.generate``);
- :mod:`~vxmem.workbench.replay`: replays (``replay``, ``replay_many``) and their record, ``Replay``,
  with its cached pools;
- :mod:`~vxmem.workbench.sweep`: parameter grids ranked the way ``recall()`` ranks (``sweep``), the
  ranking policies, and tuning on held-out probes;
- :mod:`~vxmem.workbench.analysis`: the metrics of each point, why a memory was or was not
  recalled, A/B comparisons, the supersession audit;
- :mod:`~vxmem.workbench.systems`: other memory systems behind one adapter, compared alike
  (:mod:`~vxmem.workbench.systems.compare`); :mod:`~vxmem.workbench.plugins` loads the user's own;
- :mod:`~vxmem.workbench.qa`: answer-level evaluation, answers from the recalled memories graded
  by a pinned judge prompt over any chat-completions endpoint;
- :mod:`~vxmem.workbench.views`: the DataFrames the dashboard and the notebooks draw.

The ``vxmem`` command that drives them is :mod:`vxmem.cli`.
"""
