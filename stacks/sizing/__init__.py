"""How much a stack needs and costs, as arithmetic (pure): GPU memory per worker, its weights,
KV cache per token and KV capacity (memory), and the hourly cost and wall time of a stack and its
workloads (estimate).

Imports catalog and config only. Pre-flight's rules (a worker that does not fit its GPUs, a
stack over budget, a model load past its start-up budget) and the campaign plan both read it.
"""
