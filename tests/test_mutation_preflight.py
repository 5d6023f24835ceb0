"""Pre-flight's core checks called in-process on shipped stacks with one change each
(stacks.preflight.run, stacks.preflight.serving_checks, stacks.preflight.worker_checks), pinned to
the exact problems a user reads (field, what is wrong, the fix) and to what a valid sibling passes:
a check that fires on everything, or on nothing, or says the wrong thing, fails here. (`make
mutate`: group `preflight`.)"""

from __future__ import annotations

from preflight_probe import TYPES, problems_of, serving_problems, stack_with
from stack_variants import F

from stacks.catalog.eks_versions import CATALOGUE_DATE
from stacks.config.errors import Problem
from stacks.config.loader import load_stack
from stacks.preflight.run import (
    effective_cluster,
    run_preflight,
)
from stacks.preflight.serving_checks import check_serving

# --- attachment ----------------------------------------------------------------------------

def test_a_variant_runs_on_its_bases_cluster():
    variant, base = load_stack("disagg-l40s-decode"), load_stack("base-a100")
    cluster = effective_cluster(variant, base)
    assert [g.name for g in cluster.node_groups] == ["p4d", "g6e", "cpu"]
    assert effective_cluster(base, None) is base.cluster
    extra = stack_with("agg-a100", cluster__nodeGroups=[{"name": "x", "instanceType":
                                                     "g6e.12xlarge", "count": 1}],
                   cluster__allowMultinode=True)
    joined = effective_cluster(extra, base)
    assert [g.name for g in joined.node_groups] == ["p4d", "g6e", "cpu", "x"]
    assert joined.allow_multinode is True and base.cluster.allow_multinode is False
    assert effective_cluster(stack_with("agg-a100"), base).allow_multinode is False


def test_attaching_to_what_is_no_base():
    where = F + "cluster.attachTo"
    local = stack_with("local-agg", cluster={"attachTo": "base-a100"})
    assert run_preflight(local, load_stack("base-a100"), on=CATALOGUE_DATE).problems[:1] == [
        Problem(where, "a local stack runs on the local engine, not on a cluster",
                "remove cluster.attachTo or set target: aws")]
    variant = stack_with("agg-a100")
    assert run_preflight(variant, load_stack("agg-a100"), on=CATALOGUE_DATE).problems == [
        Problem(where, "'agg-a100' is itself attached to 'base-a100'",
                "attach to a base stack that owns its cluster")]
    assert run_preflight(variant, load_stack("local-agg"), on=CATALOGUE_DATE).problems == [
        Problem(where, "'local-agg' is a local stack and owns no cluster",
                "attach to an aws base stack")]
    serving = run_preflight(variant, load_stack("agg-a100-standalone"), on=CATALOGUE_DATE)
    assert serving.problems[0] == Problem(
        where, "'agg-a100-standalone' serves a model itself and would compete for its GPUs",
        "attach to a base stack (one without serving)")
    unloaded = run_preflight(variant, None, on=CATALOGUE_DATE)
    assert unloaded.problems == [Problem(where, "base stack 'base-a100' was not given",
                                         "load it with check_stack")]
    assert unloaded.memory == [] and unloaded.notes == []


def test_a_variant_states_only_its_own_cluster_fields():
    assert problems_of("agg-a100", cluster__attachTo="base-a100",
                     cluster__region="us-west-2") == [
        Problem(F + "cluster.region", "set on a variant of 'base-a100', whose cluster it is",
                "remove it (change the base)")]
    assert problems_of("agg-a100", storage={"modelCacheGib": 300},
                     monitoring={"retention": "7d"}) == [
        Problem(F + "storage", "set on a variant of 'base-a100', which owns the storage",
                "remove it (change the base)"),
        Problem(F + "monitoring", "set on a variant of 'base-a100', which owns the "
                "monitoring", "remove it (change the base)")]
    assert problems_of("agg-a100", cluster__allowMultinode=True) == []


# --- cluster ---------------------------------------------------------------------------------

def test_cluster_instance_types_and_groups():
    assert problems_of("agg-a100-standalone", cluster__nodeGroups__0__instanceType="p9.big",
                     serving=None) == [
        Problem(F + "cluster.nodeGroups[0].instanceType", "unknown instance type 'p9.big'",
                f"use one of {TYPES}")]
    assert problems_of("agg-a100-standalone", cost__priceOverrides={"p9.big": 3.0}) == [
        Problem(F + "cost.priceOverrides.p9.big", "unknown instance type 'p9.big' (its price "
                "would never be used)", f"use one of {TYPES}")]
    assert problems_of("agg-a100-standalone",
                     cost__priceOverrides={"p4d.24xlarge": 3.0}) == []
    clash = [{"name": "g6e", "instanceType": "g6e.12xlarge", "count": 1,
              "availabilityZone": "us-east-1a"}]
    assert problems_of("agg-a100", cluster__nodeGroups=clash) == [
        Problem(F + "cluster.nodeGroups[0].name", "node group 'g6e' already exists in base "
                "'base-a100'", "give the extra group another name")]


def test_a_base_group_of_unknown_type_is_the_variants_problem_too():
    base = stack_with("base-a100", name="b", cluster__nodeGroups__1__instanceType="g9.odd")
    variant = stack_with("agg-a100", cluster__attachTo="b")
    problems = run_preflight(variant, base, on=CATALOGUE_DATE).problems
    assert Problem(F + "cluster.attachTo", "base 'b' node group 'g6e' has unknown instance "
                   "type 'g9.odd'", "fix the base (python -m stacks check b)") in problems


def test_a_nodegroup_cluster_needs_a_cpu_group():
    only_gpus = [{"name": "p4d", "instanceType": "p4d.24xlarge", "count": 2,
                  "availabilityZone": "us-east-1a", "diskGib": 500}]
    cpu_gone = [*only_gpus, {"name": "cpu", "instanceType": "m7i.4xlarge", "count": 0}]
    for groups in (only_gpus, cpu_gone):
        assert problems_of("agg-a100-standalone", cluster__nodeGroups=groups) == [
            Problem(F + "cluster.nodeGroups", "no CPU node group for system pods, monitoring "
                    "and the load generator", "add a group such as m7i.4xlarge x 2")]
    # a local stack creates no cluster, and an unknown type is reported once, as unknown
    assert problems_of("local-agg") == []
    odd = [*only_gpus, {"name": "cpu", "instanceType": "m9.huge", "count": 2}]
    assert [p.field for p in problems_of("agg-a100-standalone", cluster__nodeGroups=odd)] == [
        F + "cluster.nodeGroups[1].instanceType", F + "cluster.nodeGroups"]


# --- serving as a whole ------------------------------------------------------------------------

def test_serving_nothing():
    assert problems_of("local-agg", serving=None) == [
        Problem(F + "serving", "this stack serves nothing", "add serving")]
    assert problems_of("agg-a100", serving=None)[-1] == Problem(
        F + "serving", "this stack serves nothing", "add serving")
    assert problems_of("base-a100") == []


def test_topology_rules():
    w = F + "serving.workers"
    agg_worker = {"role": "worker", "replicas": 1, "tensorParallelSize": 4, "nodeGroup": "p4d",
                  "maxModelLen": 32768}
    assert serving_problems("disagg-a100", serving__workers=[agg_worker]) == [
        Problem(w, "disaggregated needs a prefill worker", "add a worker with role: prefill"),
        Problem(w, "disaggregated needs a decode worker", "add a worker with role: decode"),
        Problem(w, "disaggregated has aggregated (role: worker) workers",
                "use roles prefill and decode")]
    assert serving_problems("disagg-a100", serving__transfer="none") == [
        Problem(F + "serving.transfer", "disaggregated needs a KV transfer backend",
                "set transfer: nixl-ucx or nixl-libfabric")]
    assert serving_problems("disagg-a100") == []
    assert serving_problems("local-agg", serving__workers__0__role="prefill") == [
        Problem(w, "aggregated has prefill/decode workers",
                "use role: worker, or topology: disaggregated")]
    assert serving_problems("local-agg", serving__workers__0__role="decode")[0].message == \
        "aggregated has prefill/decode workers"
    assert serving_problems("local-agg", serving__transfer="nixl-ucx") == [
        Problem(F + "serving.transfer", "aggregated moves no KV between workers",
                "set transfer: none")]
    assert serving_problems("local-agg", serving__router="kv", serving__prefixCaching=False) == [
        Problem(F + "serving.prefixCaching", "the KV router needs prefix caching (and the "
                "workers' KV events) to route on cache hits",
                "set prefixCaching: true or router: round-robin")]
    assert serving_problems("local-agg", serving__router="kv") == []
    assert serving_problems("local-agg", serving__prefixCaching=False) == []


def test_kv_events_rules():
    events = F + "serving.kvEvents"
    assert serving_problems("local-agg", serving__router="kv", serving__kvEvents=False) == [
        Problem(events, "the KV router scores workers from their KV events; without them it "
                "routes blind", "remove kvEvents: false or use router: round-robin")]
    # round-robin ignores KV events: turning them off is fine
    assert serving_problems("local-agg", serving__router="round-robin",
                            serving__kvEvents=False) == []
    assert serving_problems("local-agg", serving__router="round-robin", serving__kvEvents=True,
                    serving__prefixCaching=False) == [
        Problem(events, "KV events exist only with prefix caching",
                "set prefixCaching: true or remove kvEvents")]
    assert serving_problems("local-agg", serving__router="round-robin",
                            serving__kvEvents=True) == []


def test_image_tags_follow_the_pinned_dynamo_version():
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
    assert serving_problems("local-agg", serving__image=f"{image}:1.5.0") == [
        Problem(F + "serving.image", "image tag 1.5.0 is not the pinned dynamoVersion 1.6.1",
                "use the image of that version, or change dynamoVersion")]
    assert serving_problems("local-agg", serving__frontend={"image": f"{image}:1.5.0-extra"}) == [
        Problem(F + "serving.frontend.image", "image tag 1.5.0-extra is not the pinned "
                "dynamoVersion 1.6.1", "use the image of that version, or change dynamoVersion")]
    for ok in (f"{image}:1.6.1-custom", f"{image}:nightly", f"{image}@sha256:{'a' * 64}",
               "registry:5000/vllm-runtime:1.6.1"):
        assert serving_problems("local-agg", serving__image=ok) == [], ok
    # the registry's port is no tag
    port = serving_problems("local-agg", serving__image="registry:5000/vllm-runtime:1.5.0")
    assert port[0].message == "image tag 1.5.0 is not the pinned dynamoVersion 1.6.1"


def test_disk_offload_needs_kvbm():
    disk = {"kind": "disk", "cpuGb": 40, "diskGb": 100}
    assert serving_problems("local-agg", serving__kvOffload=disk) == [
        Problem(F + "serving.kvOffload.kind", "disk offload needs KVBM, and dynamoVersion 1.6.1 "
                "uses vLLM's native offloading, which has no disk tier in Dynamo yet",
                "use kind: cpu, or a dynamoVersion (and image) below 1.6")]
    assert serving_problems("local-agg", serving__kvOffload={"kind": "cpu", "cpuGb": 40}) == []


def test_efa_workers_share_one_zone():
    base = load_stack("base-a100")
    two_zones = base.cluster.model_copy(update={"node_groups": [
        base.cluster.node_groups[0],
        base.cluster.node_groups[1].model_copy(update={"availability_zone": "us-east-1b"}),
        base.cluster.node_groups[2]]})
    stack = load_stack("disagg-l40s-decode")
    libfabric = stack.serving.model_copy(update={"transfer": "nixl-libfabric"})
    out: list[Problem] = []
    check_serving(libfabric, two_zones, out)
    assert out == [Problem(F + "serving.transfer", "nixl-libfabric workers sit in node groups "
                           "pinned to different zones (us-east-1a, us-east-1b); EFA traffic "
                           "stays in one AZ", "pin those groups to one zone, or use nixl-ucx")]
    for cluster, serving in ((base.cluster, libfabric), (two_zones, stack.serving)):
        out = []
        check_serving(serving, cluster, out)
        assert out == []
    unpinned = two_zones.model_copy(update={"node_groups": [
        two_zones.node_groups[0].model_copy(update={"availability_zone": None}),
        *two_zones.node_groups[1:]]})
    out = []
    check_serving(libfabric, unpinned, out)
    assert out == []
