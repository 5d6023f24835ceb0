"""Dynamo on the cluster: the namespace with the load generator's ServiceAccount and RBAC, the
`dynamo-platform` Helm chart (the operator and its CRDs; etcd and NATS off), and the stack's
DynamoGraphDeployment with the recipe ConfigMaps it reads (built by components/graph.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import graph
from components.charts import ChartRef, install
from components.k8s import create_object, create_objects
from components.loadgen_specs import loadgen_rbac
from components.platform_values import CHART, platform_chart_version, platform_values
from stacks.config.schema import ClusterConfig, StackConfig
from stacks.conventions.k8s_names import dynamo_namespace  # noqa: F401 - re-exported

# NGC's Helm repository of the ai-dynamo team: the chart lives at
# <repo>/charts/dynamo-platform-<version>.tgz (Dynamo's Kubernetes installation guide).
NGC_DYNAMO_REPO = "https://helm.ngc.nvidia.com/nvidia/ai-dynamo"
PLATFORM_RELEASE = "dynamo-platform"


def frontend_service(stack: StackConfig, name: str | None = None) -> str:
    """The Service the operator creates for the graph's frontend: <graph>-<component>."""
    return f"{name or graph.deployment_name(stack)}-{graph.FRONTEND_COMPONENT}"


class DynamoNamespace(pulumi.ComponentResource):
    """The Dynamo namespace and the load generator's ServiceAccount, Role and RoleBinding."""

    namespace: pulumi.Resource
    objects: list[pulumi.Resource]

    def __init__(self, name: str, namespace: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:DynamoNamespace", name, None, opts)
        objs = loadgen_rbac(namespace)
        ns_obj = next(o for o in objs if o["kind"] == "Namespace")
        self.namespace = create_object(ns_obj, pulumi.ResourceOptions(parent=self))
        rest = [o for o in objs if o is not ns_obj]
        self.objects = [self.namespace, *create_objects(
            rest, pulumi.ResourceOptions(parent=self, depends_on=[self.namespace]))]
        self.register_outputs({"namespace": namespace})


@dataclass(frozen=True)
class PlatformArgs:
    stack: StackConfig
    namespace: str
    prometheus_endpoint: str | None
    depends_on: list[pulumi.Resource]


class DynamoPlatform(pulumi.ComponentResource):
    chart: pulumi.Resource

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:DynamoPlatform", name, None, opts)
        version = platform_chart_version(args.stack)
        # The chart applies its CRDs and the webhook certificate through hooks: a Release
        # (components/charts.py).
        self.chart = install(
            f"{name}-chart", ChartRef(CHART, version, NGC_DYNAMO_REPO),
            release=PLATFORM_RELEASE, namespace=args.namespace,
            values=platform_values(args.stack, prometheus_endpoint=args.prometheus_endpoint),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        self.register_outputs({"chartVersion": version})


@dataclass(frozen=True)
class GraphArgs:
    stack: StackConfig
    namespace: str
    cluster: ClusterConfig        # the effective cluster (a variant: base groups + its own)
    efa: bool                     # the worker nodes have EFA devices and the device plugin
    depends_on: list[pulumi.Resource]
    # A campaign's deploy (stacks/config/campaign_config.py): the graph's name when two variants
    # share workers, and whether the next variant keeps them (the objects outlive this stack's
    # destroy, and the next variant's `up` takes them over).
    graph_name: str | None = None
    retain: bool = False


class DynamoGraph(pulumi.ComponentResource):
    """The stack's DynamoGraphDeployment and the ConfigMaps its workers read (the speculative
    config); the operator turns the graph into pods and Services."""

    name: str
    frontend_service: str

    def __init__(self, name: str, args: GraphArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:DynamoGraph", name, None, opts)
        # Built first: a StackError about the graph is raised before anything is registered.
        dgd = graph.build_graph_deployment(args.stack, namespace=args.namespace, efa=args.efa,
                                           cluster=args.cluster, name=args.graph_name)
        configmaps = graph.recipe_configmaps(args.stack, args.namespace, args.graph_name)
        # Handed over: `pulumi destroy` forgets the objects instead of deleting them, and the
        # next variant's `up` updates them (its provider upserts): the operator then replaces
        # only what changed, the frontend (workers are rolled only when a worker spec changes:
        # ai-dynamo/dynamo docs/pages/kubernetes/rolling-update.md).
        keep = pulumi.ResourceOptions(retain_on_delete=True) if args.retain else None
        # A pod whose env references a missing ConfigMap key never starts
        # (CreateContainerConfigError): the ConfigMaps exist before the graph.
        before = create_objects(configmaps, pulumi.ResourceOptions.merge(pulumi.ResourceOptions(
            parent=self, depends_on=args.depends_on), keep))
        create_object(dgd, pulumi.ResourceOptions.merge(pulumi.ResourceOptions(
            parent=self, depends_on=[*args.depends_on, *before]), keep))
        self.name = dgd["metadata"]["name"]
        self.frontend_service = frontend_service(args.stack, args.graph_name)
        self.register_outputs({"graph": self.name, "frontendService": self.frontend_service,
                               "configMaps": [c["metadata"]["name"] for c in configmaps]})
