"""Every rule that refuses a stack before anything is created or any load is sent (pure).

`run.run_preflight` is the one entry both `python -m stacks check` and the Pulumi program run;
each `*_checks` module holds the rules of one part of the stack (AWS values, Kubernetes names,
serving, workers, workloads, deploy facts, checkpoints, recipes, traces, engine flags, Auto
Mode, the node driver), with the pod packing (pods) they check the nodes with. The arithmetic
they judge (GPU memory, cost, load time) is in stacks.sizing. A refusal is a `Problem` naming the
stack field and the fix.

Imports catalog, config, conventions, sizing and engine_argv (the command lines engine_parse
runs through the engine's parsers); the plan may import pre-flight, never the
reverse.
"""
