"""What both sides of the project must agree on, derived from the typed config: the Kubernetes
names, labels and ports the infrastructure creates and the runner finds (k8s_names), where a
frontend writes its request trace (frontend_trace), what makes two workers the same
(worker_identity), the env a serving container starts with (pod_env) and which stacks are
one setting apart (one_setting: the report's ablation check and the plan's resolvable
differences draw the same pairs).

Imports config and catalog only; components/ and workloads/ both read it, so neither has to
import the other.
"""
