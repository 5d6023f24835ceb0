"""Every comparison the report draws and how it is judged (pure): aggregated vs disaggregated
side by side (compare), the one-setting ablation check (ablation), the pairs of stacks on each
figure with their differences and intervals (comparisons), judged as one family (verdicts), the
plan's four hypotheses with the figures that bear on them (hypotheses), and a run against its
simulation (simulated_vs_measured) and against AIConfigurator's prediction
(predicted_vs_measured).

Comparisons imports records and tables; render and the pipeline at reports/ top level import
it, records and tables never do.
"""
