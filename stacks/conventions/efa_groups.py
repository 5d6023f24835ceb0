"""Which node groups get EFA interfaces (and the EFA device plugin with them): shared by the
program (components/node_specs.py, components/nodegroups.py) and pre-flight (the partition
check in stacks/preflight/aws_checks.py), so both judge the same groups."""

from __future__ import annotations

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import NodeGroup, StackConfig, TransferBackend


def uses_efa(group: NodeGroup, stack: StackConfig) -> bool:
    """Whether a group's nodes get EFA interfaces (and a cluster placement group, one AZ).

    A serving stack enables EFA only for NIXL over LIBFABRIC on groups that host its workers.
    A base stack serves nothing itself, so it enables EFA on every EFA-capable GPU group: its
    variants may choose LIBFABRIC and cannot add interfaces to running nodes.
    """
    inst = INSTANCE_TYPES[group.instance_type]
    if inst.gpu is None or inst.efa_interfaces == 0:
        return False
    if stack.serving is None:
        return True
    hosts_workers = any(w.node_group == group.name for w in stack.serving.workers)
    return hosts_workers and stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC
