"""A campaign on AWS: every deployment through Pulumi's Automation API (automation.py).

- prepare / scale: the base stack's `dynamo-bench:nodeGroupSizes` (stacks/config/campaign_config.py)
  set to the sizes wanted, then `up` on the base: managed node groups change their desired
  size, an Auto Mode NodePool its limits (components/node_specs.py).
- deploy: the variant's `dynamo-bench:campaign` ({graphName, handOver, adopt}), then `up`. A
  variant that hands its workers over deploys with its serving objects retained on destroy;
  the next one adopts them (its provider upserts and forces its fields), so the operator
  replaces only the frontend.
- run: `python -m workloads run`'s runner in process, with the outputs `up` returned.
- teardown: `destroy` (a variant that ended up not handing over is first deployed again
  without `handOver`, so destroy deletes its objects), then the campaign key is removed.
- workers: the graph's worker pods (name -> uid), read through the Kubernetes API: kept
  workers keep their uids.
- nodes_up: the group's nodes the Kubernetes API lists (every node of a stack's group carries
  its dynamo-bench.io/node-group label, managed group or Auto Mode NodePool alike): a let-go
  node bills until it is gone from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from stacks.config.campaign_config import CampaignDeploy
from stacks.config.stack_file import CAMPAIGN_KEY, NODE_GROUP_SIZES_KEY
from stacks.config.workload_config import Scale
from stacks.conventions.k8s_names import NODE_GROUP_LABEL
from workloads.campaign.automation import PulumiStacks
from workloads.runner import RunOptions, RunResult, run
from workloads.targets.aws import k8s_cluster, k8s_graph
from workloads.targets.aws.k8s_client import items
from workloads.targets.aws.k8s_outputs import kubeconfig


class AwsPlatform:
    kind = "aws"

    def __init__(self, base: str, stacks: PulumiStacks, *, run_id: str, runs_dir: Path,
                 stacks_dir: Path, scale: Scale, show_progress: bool, console: Console):
        self.base, self.stacks, self.run_id = base, stacks, run_id
        self.runs_dir, self.stacks_dir, self.workload_scale = runs_dir, stacks_dir, scale
        self.show_progress, self.console = show_progress, console
        self.outputs: dict[str, dict] = {}
        self.base_outputs: dict = {}
        self.retaining: set[str] = set()

    def _kube(self, outputs: dict):
        from workloads.targets.aws import target as aws_target  # the tests' client boundary

        return aws_target.connect(kubeconfig(outputs))

    # --- the base ---------------------------------------------------------------------------
    def prepare(self, sizes: dict[str, int]) -> None:
        self.scale_to(sizes)

    def scale(self, sizes: dict[str, int]) -> None:
        self.scale_to(sizes)

    def scale_to(self, sizes: dict[str, int]) -> None:
        stack = self.stacks.select(self.base)
        self.stacks.set_key(stack, NODE_GROUP_SIZES_KEY, sizes)
        self.base_outputs = self.stacks.up(stack)

    def nodes_up(self, group: str) -> int | None:
        if not self.base_outputs:
            return None
        kube = self._kube(self.base_outputs)
        return len(items(kube.core.list_node(label_selector=f"{NODE_GROUP_LABEL}={group}")))

    # --- variants ---------------------------------------------------------------------------
    def _set_campaign(self, stack, slot: dict, hand_over: bool, adopt: bool) -> None:
        deploy = CampaignDeploy(graph_name=slot["graph"], hand_over=hand_over, adopt=adopt)
        self.stacks.set_key(stack, CAMPAIGN_KEY, deploy.model_dump(mode="json", by_alias=True))

    def is_deployed(self, slot: dict) -> bool:
        if slot["name"] not in self.outputs:
            outputs = self.stacks.select(slot["name"]).outputs()
            if outputs:
                self.outputs[slot["name"]] = {k: getattr(v, "value", v)
                                              for k, v in outputs.items()}
        return bool(self.outputs.get(slot["name"], {}).get("graphName"))

    def can_adopt(self, slot: dict) -> bool:
        # the handed-over graph stays in the cluster until adopted; were it gone, the upsert
        # would create it anew, and the workers' uids would show it
        return True

    def deploy(self, slot: dict, adopt: bool) -> dict:
        stack = self.stacks.select(slot["name"])
        hand_over = slot["hands_over_to"] is not None
        self._set_campaign(stack, slot, hand_over, adopt)
        self.outputs[slot["name"]] = self.stacks.up(stack)
        if hand_over:
            self.retaining.add(slot["name"])
        return {"graph": self.outputs[slot["name"]].get("graphName"), "adopt": adopt,
                "retain_on_destroy": hand_over}

    def workers(self, slot: dict) -> dict[str, str]:
        outputs = self.outputs.get(slot["name"])
        if not outputs:
            return {}
        kube = self._kube(outputs)
        ns, graph = outputs["dynamoNamespace"], outputs["graphName"]
        dgd = k8s_cluster.get_graph(kube, ns, graph)
        names = k8s_graph.worker_components(dgd)
        return {p["metadata"]["name"]: p["metadata"]["uid"]
                for p in k8s_cluster.graph_pods(kube, ns, graph)
                if k8s_graph.component_of(p) in names
                and not k8s_graph.pod_state(p).terminating}

    def run(self, slot: dict, epoch: int, info: dict, clock: Any) -> RunResult:
        return run(RunOptions(stack=slot["name"], scale=self.workload_scale, run_id=self.run_id,
                              runs_dir=self.runs_dir, stacks_dir=self.stacks_dir,
                              show_progress=self.show_progress, campaign=info,
                              prompt_epoch=epoch, only=slot.get("only"),
                              outputs=self.outputs[slot["name"]],
                              clock=clock), self.console)

    def teardown(self, slot: dict, hand_over: bool) -> dict:
        stack = self.stacks.select(slot["name"])
        if not hand_over and slot["name"] in self.retaining:
            # deployed to hand over, but not handing over after all: destroy must delete
            self._set_campaign(stack, slot, False, False)
            self.stacks.up(stack)
        self.stacks.destroy(stack)
        self.stacks.remove_key(stack, CAMPAIGN_KEY)
        self.retaining.discard(slot["name"])
        if not hand_over:   # a handed-over graph is still read by the next slot
            self.outputs.pop(slot["name"], None)
        return {"destroyed": True, "objects_retained_for": slot["hands_over_to"]
                if hand_over else None}

    def close(self) -> None:
        return None

    def destroy_base(self) -> None:
        stack = self.stacks.select(self.base)
        self.stacks.destroy(stack)
        self.stacks.remove_key(stack, NODE_GROUP_SIZES_KEY)
