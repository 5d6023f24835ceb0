"""Results and cost, in rooms by concern: run folders read into frames (records/), the plan's
tables (tables/), every comparison with its verdict (comparisons/), report.md, index.html and
the plots (render/), and what a stack cost and left behind (accounting/). At the top: the
pipeline that wires the rooms (build), the CLI (__main__) and the report-building benchmark
(bench)."""
