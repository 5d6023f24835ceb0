"""Choose before you pay: every configuration a base's node groups can hold, screened by the real
pre-flight, simulated on the plan's workloads and ranked (`python -m stacks explore <base>`).

space.py enumerates the candidates (pure): per GPU node group the precisions its GPU supports,
the TP values pre-flight's memory fit accepts, aggregated replicas, disaggregated prefill x TP
plus decode x TP splits (a decode tier on another GPU type among them), KV router or
round-robin, host offload; each candidate a typed StackConfig attached to the base, built as
the shipped variant files are. screen.py runs stacks.preflight.run.run_preflight on each and
keeps what it refuses with the rule's field and message. judge.py holds a simulated step
against an SLO (rows.py's SLOS); bracket.py finds an operating point by bracketing the
concurrency; bounds.py reads the mockers' timing tables for the cheap upper bounds that let
the search skip candidates that cannot reach the top (pure, numpy); search.py runs the search
and ranks by $ per 1M output tokens, on a `Simulator` it is handed: it runs no simulation
itself (the CLI builds one from workloads/sim/, which no room imports). run.py is the one
entry; results.py holds the rows, the Pareto frontier and the ranks; questions.py the plan's
four questions; report.py the terminal table, explore.md, explore.csv and the plot; write.py
the --write stack files; cache.py the results kept by what decides them (.cache/explore);
command.py what the CLI command does with them.

May import stacks.catalog, stacks.config, stacks.conventions, stacks.sizing,
stacks.engine_argv, stacks.preflight and stacks.predict (the SLOs, prices, the timing tables);
only the CLI imports this room.
"""
