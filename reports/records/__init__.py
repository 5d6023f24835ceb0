"""Reading run records (pure functions + thin file readers): a run folder into frames. AIPerf's
exports parsed (exports), the run record and its tidy requests, steps and server frames (runs),
one definition per figure of a step (measures), the server's own counters (server), where each
step's requests went (routing), which steps count and why not (flags), and what the stack a run
measured was: GPUs, topology, hourly cost, the words for what its timings stand on (stackinfo).

Records imports nothing of reports/ but itself (workloads/ and stacks/ only); every other room of
reports/ (tables, comparisons, render) and the pipeline at reports/ top level read it.
"""
