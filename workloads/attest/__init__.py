"""Run-time attestation: is the deployment what the stack says, before any load is sent?

probe.py sends the attestation's requests and reads the metrics around them (I/O shared by both
targets), parse.py reads the evidence (Prometheus text, worker logs, the in-pod GPU probe) and
checks.py judges it (pure). The runner and both targets import it; it imports only stacks/, the
smoke test and the target interface.
"""
