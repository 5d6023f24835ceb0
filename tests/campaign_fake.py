"""A fake Pulumi Automation workspace over the fake cluster (tests/aws_target_fake.py).

It stands where `pulumi.automation` stands for workloads/campaign/automation.py: stacks by
name, each with its config (set_config / remove_config), `up`, `destroy` and `outputs`. What
`up` does is what the real program would do to the cluster, in the fake's terms:
- the base: its GPU groups get the nodes `dynamo-bench:nodeGroupSizes` asks for (named
  `<group>-<i>`), its CPU groups always run; a node let go leaves at once, except on a dynamic
  Auto Mode NodePool lowered but not parked, where the empty node leaves after the pool's grace
  (and is reused if the pool is raised before);
- a variant: its real DynamoGraphDeployment (components/graph.py, under the graph name of its
  `dynamo-bench:campaign`) is applied like the Dynamo operator would: a new graph gets new pods;
  an existing graph is refused (AlreadyExists, as pulumi-kubernetes >= 4.29 does) unless the
  variant adopts it, and then only components whose spec changed get new pods;
- destroy deletes the variant's graph and pods, unless it was deployed to hand them over
  (retainOnDelete: Pulumi forgets them, the cluster keeps them).
Every call is logged in `calls` for the tests to read the campaign's order of actions.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from stacks.config.campaign_config import parse_campaign, parse_node_group_sizes
from stacks.config.loader import load_stack
from stacks.config.schema import ComputeMode, Provisioning, TransferBackend
from stacks.config.stack_file import CAMPAIGN_KEY, NODE_GROUP_SIZES_KEY, PROJECT
from stacks.preflight.auto_mode import EMPTY_NODE_GRACE_S, provisioning
from stacks.preflight.run import effective_cluster
from tests.aws_target_deploy import KUBECONFIG, NAMESPACE, PROMETHEUS, produce_exports
from tests.aws_target_fake import Component, FakeCluster
from tests.aws_target_fake_serving import engine_log, serving_of
from workloads.campaign.automation import PulumiStacks

ZONE = "us-east-1a"


@dataclass
class Output:
    value: Any
    secret: bool = False


@dataclass
class UpResult:
    outputs: dict


@dataclass
class FakeStack:
    ws: FakeWorkspace
    name: str
    config: dict[str, str] = field(default_factory=dict)
    deployed: dict | None = None      # outputs while up
    retained: bool = False

    def set_config(self, key: str, value: Any, *, path: bool = False) -> None:
        self.ws.calls.append((self.name, "set_config", key, value.value))
        self.config[key] = value.value

    def remove_config(self, key: str, *, path: bool = False) -> None:
        self.ws.calls.append((self.name, "remove_config", key, None))
        self.config.pop(key, None)

    def get(self, key: str) -> str | None:
        return self.config.get(f"{PROJECT}:{key}")

    def up(self, **_: Any) -> UpResult:
        with self.ws.cluster.lock:   # side-by-side slots deploy from their own threads
            return self._up()

    def _up(self) -> UpResult:
        if self.ws.fail_up == self.name:
            raise RuntimeError(f"error: update failed for {self.name} (test)")
        stack = load_stack(self.name)
        outputs = self.ws.up_base(self) if stack.is_base else self.ws.up_variant(self, stack)
        self.deployed = outputs
        self.ws.calls.append((self.name, "up", None, json.dumps(outputs.get("sizes")
                                                                 or outputs.get("graphName"))))
        return UpResult({k: Output(v, k == "kubeconfig") for k, v in outputs.items()})

    def destroy(self, **_: Any) -> None:
        with self.ws.cluster.lock:
            self._destroy()

    def _destroy(self) -> None:
        self.ws.calls.append((self.name, "destroy", None, "retained" if self.retained else ""))
        if self.deployed and "graphName" in self.deployed and not self.retained:
            self.ws.delete_graph(self.deployed["graphName"])
        self.deployed, self.retained = None, False

    def outputs(self) -> dict:
        return {k: Output(v) for k, v in (self.deployed or {}).items()}


class FakeWorkspace(PulumiStacks):
    def __init__(self, cluster: FakeCluster):
        super().__init__("file:///fake-backend")
        self.cluster = cluster
        self.stacks: dict[str, FakeStack] = {}
        self.calls: list[tuple] = []
        self.fail_up: str | None = None

    def select(self, name: str) -> FakeStack:
        return self.stacks.setdefault(name, FakeStack(self, name))

    def ops(self, *kinds: str) -> list[tuple]:
        return [c for c in self.calls if c[1] in kinds]

    # --- the base --------------------------------------------------------------------------
    def up_base(self, fs: FakeStack) -> dict:
        base = load_stack(fs.name)
        sizes = parse_node_group_sizes(fs.get(NODE_GROUP_SIZES_KEY))[0] or {}
        nodes, expiry = self.cluster.nodes, self.cluster.node_expiry
        self.cluster.expire_nodes()
        for g in base.cluster.node_groups:
            want = sizes.get(g.name, g.count)
            graceful = base.cluster.compute_mode == ComputeMode.AUTO and want > 0 \
                and provisioning(g) == Provisioning.DYNAMIC
            for i in range(g.count):
                name = f"{g.name}-{i}"
                if i < want:
                    expiry.pop(name, None)          # an empty node still there is reused
                    if name not in nodes:
                        self.cluster.add_node(name, g.name, ZONE, g.instance_type)
                elif name in nodes:
                    busy = [p["metadata"]["name"] for p in self.cluster.pods.values()
                            if p["spec"].get("nodeName") == name and "comp" in p["_fake"]]
                    assert not busy, f"scaled {name} away under running pods {busy}"
                    if graceful:
                        expiry.setdefault(name, self.cluster.clock.t + EMPTY_NODE_GRACE_S)
                    else:
                        del nodes[name]
                        expiry.pop(name, None)
        return {"clusterName": fs.name, "kubeconfig": KUBECONFIG,
                "dynamoNamespace": NAMESPACE, "sizes": sizes}

    # --- variants --------------------------------------------------------------------------
    def up_variant(self, fs: FakeStack, stack) -> dict:
        from components.graph import build_graph_deployment, deployment_name

        campaign = parse_campaign(fs.get(CAMPAIGN_KEY))[0]
        graph = campaign.graph_name if campaign else deployment_name(stack)
        base = load_stack(stack.cluster.attach_to)
        efa = stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC
        dgd = build_graph_deployment(stack, namespace=NAMESPACE, efa=efa,
                                     cluster=effective_cluster(stack, base), name=graph)
        serving = self.cluster.serving.graph(graph)
        flags = serving_of(stack)
        serving.model, serving.disaggregated = flags.model, flags.disaggregated
        serving.router_kv, serving.offload = flags.router_kv, flags.offload
        if (NAMESPACE, graph) in self.cluster.dgds:
            # an update of the stack's own graph (it is in the stack's state: a re-`up` that
            # only drops handOver), or an adoption; anything else is someone else's object
            own = (fs.deployed or {}).get("graphName") == graph
            if not (own or (campaign and campaign.adopt)):
                raise RuntimeError(f"creating DynamoGraphDeployment {NAMESPACE}/{graph}: "
                                   "AlreadyExists (upsertExistingObjects is off)")
            self._update_graph(dgd)
        else:
            comps = self._components(stack, dgd)
            self.cluster.add_graph(dgd, comps)
            for pod in self.cluster.pods.values():   # just applied: its pods start now
                if pod["_fake"].get("comp") in comps:
                    pod["_fake"]["created"] = self.cluster.clock.t
                    pod["metadata"]["creationTimestamp"] = self.cluster.clock.iso()
        fs.retained = bool(campaign and campaign.hand_over)
        self.cluster.job_run = produce_exports
        return {"clusterName": stack.cluster.attach_to, "kubeconfig": KUBECONFIG,
                "dynamoNamespace": NAMESPACE, "graphName": graph,
                "frontendService": f"{graph}-frontend",
                "prometheusService": "prometheus-kube-prometheus-prometheus",
                "prometheusUrl": PROMETHEUS, "region": "us-east-1"}

    def _components(self, stack, dgd: dict) -> list[Component]:
        comps = []
        quant = {"bf16": None, "fp8": "fp8", "nvfp4": "modelopt_fp4"}[stack.model.precision.value]
        efa = stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC
        groups = {c["name"]: c["podTemplate"]["spec"].get("nodeSelector", {}).get(
            "dynamo-bench.io/node-group") for c in dgd["spec"]["components"]}
        for c in dgd["spec"]["components"]:
            worker = c["type"] != "frontend"
            log = "INFO vllm starting\n" + (engine_log(
                stack.model.id, revision=stack.model.revision, quantization=quant)
                if worker else "") + (f"Backend {'LIBFABRIC' if efa else 'UCX'} was "
                                      "instantiated\n" if c["type"] in ("prefill", "decode")
                                      else "")
            comps.append(Component(c["name"], c["type"], c["replicas"],
                                   f"{groups[c['name']]}-0" if worker else "cpu-a",
                                   load_s=240.0 if worker else 5.0, log=log))
        return comps

    def _update_graph(self, dgd: dict) -> None:
        """The operator on a changed graph: a component whose spec changed gets new pods
        (workers are rolled only when a worker spec changes), the others keep theirs."""
        key = (NAMESPACE, dgd["metadata"]["name"])
        old = {c["name"]: c for c in self.cluster.dgds[key]["spec"]["components"]}
        self.cluster.dgds[key] = {**copy.deepcopy(dgd), "metadata": {
            **dgd["metadata"], "generation": self.cluster.dgds[key]["metadata"]["generation"] + 1,
            "uid": self.cluster.dgds[key]["metadata"]["uid"]}}
        for comp in self.cluster.components[key]:
            new = next(c for c in dgd["spec"]["components"] if c["name"] == comp.name)
            if new == old[comp.name]:
                continue
            comp.spec = new
            for (ns, name), pod in list(self.cluster.pods.items()):
                if pod["_fake"].get("comp") is comp:
                    del self.cluster.pods[(ns, name)]
                    self.cluster.deleted.append(("Pod", ns, name))
                    self.cluster.serving.release(name)
                    self.cluster._operator_pod(ns, key[1], comp, ready_now=False)

    def delete_graph(self, graph: str) -> None:
        key = (NAMESPACE, graph)
        comps = self.cluster.components.pop(key, [])
        self.cluster.dgds.pop(key, None)
        for (ns, name), pod in list(self.cluster.pods.items()):
            if pod["_fake"].get("comp") in comps:
                del self.cluster.pods[(ns, name)]
                self.cluster.serving.release(name)


def fake_cluster(tmp) -> FakeCluster:
    """A cluster whose base has just been created: CPU nodes only, in the base's zone and
    another one."""
    cluster = FakeCluster(tmp)
    cluster.add_node("cpu-a", "cpu", ZONE, "m7i.4xlarge")
    cluster.add_node("cpu-b", "cpu", "us-east-1b", "m7i.4xlarge")
    return cluster
