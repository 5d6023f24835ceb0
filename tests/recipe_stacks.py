"""The B200 recipe stacks and one-change variants of them (test helper)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stacks.catalog.instances import INSTANCE_TYPES, Fabric, InstanceType
from stacks.config.loader import (
    PROJECT,
    Problem,
    load_stack,
    parse_config,
    read_stack_file,
    stack_file,
)
from stacks.config.schema import StackConfig
from stacks.preflight.run import run_preflight

F = f"{PROJECT}:"
BASE = "base-b200"
MODELS = ("axk2", "kexaone", "solar2", "motif3")
KINDS = ("agg", "disagg", "baseline")
RECIPES = [f"{kind}-b200-{model}" for model in MODELS for kind in KINDS]
DELETE = object()

# A B200 node on an InfiniBand fabric: no AWS type has one, the recipes' home clusters do. Tests
# put it in the catalogue (`use_infiniband`) to show the recipes' UCX-over-InfiniBand settings
# still build and pass where the fabric has them.
IB_B200 = "ib-b200.48xlarge"
IB_PLUGIN = {"resourceName": "rdma/shared_ib", "perNode": 64, "nodeGroups": ["b200"]}
IB_BASE_EDITS = {"cluster.nodeGroups.0.instanceType": IB_B200, "cluster.rdma": IB_PLUGIN}
# Each disaggregated recipe's own transfer settings (what its stack comment says to restore),
# without the EFA userspace donor, which serves NIXL LIBFABRIC only.
NO_DONOR = {"serving.efaUserspaceImage": DELETE}
IB_RECIPE_EDITS = {
    "disagg-b200-axk2": {"serving.transfer": "nixl-ucx", "serving.rdma": {
        "resourceName": "rdma/shared_ib", "perWorker": 1, "nixlThreads": 8},
        "serving.env.UCX_TLS": "rc_x,rc,cuda_copy,cuda_ipc", **NO_DONOR},
    "disagg-b200-kexaone": {"serving.transfer": "nixl-ucx", "serving.rdma": {
        "resourceName": "rdma/shared_ib", "perWorker": 4, "nixlThreads": 8}, **NO_DONOR},
    "disagg-b200-solar2": {"serving.transfer": "nixl-ucx", "serving.rdma": {
        "resourceName": "rdma/shared_ib", "nixlThreads": 8}, **NO_DONOR},
    "disagg-b200-motif3": {"serving.transfer": "nixl-ucx", "serving.rdma": {
        "resourceName": "rdma/shared_ib", "perWorker": 1}, **NO_DONOR},
}


def infiniband_twin() -> InstanceType:
    return INSTANCE_TYPES["p6-b200.48xlarge"].model_copy(update={
        "name": IB_B200, "fabric": Fabric.INFINIBAND, "efa_interfaces": 0})


def use_infiniband(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the InfiniBand B200 twin into the catalogue for one test."""
    monkeypatch.setitem(INSTANCE_TYPES, IB_B200, infiniband_twin())


def _then(first: dict[str, Any], then: dict[str, Any] | None) -> dict[str, Any]:
    """Edits `first` followed by `then` (a DELETE in `then` cancels what `first` adds)."""
    then = then or {}
    kept = {k: v for k, v in first.items() if k not in then}
    return {**kept, **{k: v for k, v in then.items() if not (v is DELETE and k in first)}}


def ib_base_raw(edits: dict[str, Any] | None = None) -> dict[str, Any]:
    return edited_raw(BASE, _then(IB_BASE_EDITS, edits))


def ib_recipe_raw(name: str, edits: dict[str, Any] | None = None) -> dict[str, Any]:
    return edited_raw(name, _then(IB_RECIPE_EDITS[name], edits))


def ib_base(edits: dict[str, Any] | None = None) -> StackConfig:
    """base-b200 on InfiniBand nodes with the RDMA plugin (needs `use_infiniband`)."""
    return parse_config(BASE, ib_base_raw(edits))


def ib_recipe(name: str, edits: dict[str, Any] | None = None) -> StackConfig:
    """A disaggregated recipe stack with the recipe's own UCX-over-InfiniBand settings."""
    return parse_config(name, ib_recipe_raw(name, edits))


def edited_raw(name: str, edits: dict[str, Any]) -> dict[str, Any]:
    """Shipped stack `name`'s raw config with dotted-path edits (`serving.workers.0.env`;
    DELETE removes)."""
    raw = copy.deepcopy(read_stack_file(stack_file(name)))
    for dotted, value in edits.items():
        keys: list[Any] = [int(k) if k.isdigit() else k for k in dotted.split(".")]
        node = raw
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        if value is DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = copy.deepcopy(value)
    return raw


def changed(name: str, edits: dict[str, Any]) -> StackConfig:
    """Shipped stack `name` with dotted-path edits, validated."""
    return parse_config(name, edited_raw(name, edits))


def problems(stack: StackConfig, base: StackConfig | None = None) -> list[Problem]:
    if base is None and stack.is_attached:
        base = load_stack(stack.cluster.attach_to)
    return run_preflight(stack, base).problems


def problem_fields(stack: StackConfig, base: StackConfig | None = None) -> set[str]:
    return {p.field.removeprefix(F) for p in problems(stack, base)}
