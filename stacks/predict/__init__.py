"""Predictions before anything runs: NVIDIA AIConfigurator's measured per-GPU performance
database asked what each step of a stack's workloads will show (TTFT, ITL, throughput, $ per
1M output tokens), every figure labelled PREDICTED with the database it came from and every way
the prediction departs from the stack; and the timing tables the local mockers rehearse on.

AIConfigurator lives in its own environment (`make predictor`, .venv-predict) and is reached
only through aic_runner.py, run as a subprocess by predictor.py (the one thin shell here); every
other module is pure: shapes.py (a stack's steps as prediction queries), systems.py (which
database system a GPU is predicted on, and the departures), rows.py (answers into the table,
the SLA best point). This room may import stacks.catalog, stacks.config and stacks.sizing
(prices); the CLI, the plan view and workloads/ import it, never the other way.
"""
