"""Predictions before anything runs: NVIDIA AIConfigurator's measured per-GPU performance
database asked what each step of a stack's workloads will show (TTFT, ITL, throughput, $ per
1M output tokens), every figure labelled PREDICTED with the database it came from and every way
the prediction departs from the stack; and the timing tables the local mockers rehearse on.

AIConfigurator lives in its own environment (`make predictor`, .venv-predict) and is reached
only through aic_runner.py, run as a subprocess by predictor.py and silicon_refresh.py (the thin
shells here); every other module is pure: shapes.py (a stack's steps as prediction queries, with
the workers' expert sharding and KV cache dtype), systems.py (which database system a GPU is
predicted on, and the departures), bandwidth.py (a GPU's steps stretched from the bandwidth its
kernels were measured at), suspect.py (database rows a prediction cannot stand on), silicon.py
and bands.py (AIConfigurator's own measured rows, and the error band every figure carries),
rows.py (answers into the table, the SLA best point). This room may import stacks.catalog,
stacks.config and stacks.sizing (prices); the CLI, the plan view and workloads/ import it, never
the other way.
"""
