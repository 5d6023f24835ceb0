"""The plan's tables, computed from the records' frames (pure: frames in, frames out): the
concurrency sweep, multi-turn, sequence, prefix-cache and fidelity tables (tables,
tables_requests), goodput under an SLO (goodput), tok/s/GPU at the SLA beside the published
figures (sla, published), dollars per million output tokens (cost_efficiency), the replayed
traces (trace_report) and the 95 % interval of each figure the tables print (intervals).

Tables imports records and, for the cost of a period, accounting (cost_efficiency prices it
with node_hours); comparisons, render and the pipeline at reports/ top level import it, records
never does.
"""
