"""Ranking as pure numpy: decay, feedback, normalisation, fusion, the blend, budgets and the candidate pool.

``recall()`` and the workbench's sweep rank through the same functions here.
"""
