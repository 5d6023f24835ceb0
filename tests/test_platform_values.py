"""dynamo-platform values: only keys the chart has, etcd/NATS off, operator on CPU nodes."""

from __future__ import annotations

import pytest
import yaml
from k8s_validation import PLATFORM_VALUES
from reference import reference_file

from components.conventions import NODE_GROUP_LABEL
from components.platform_values import platform_chart_version, platform_values
from stacks.config.loader import load_stack, parse_config, read_stack_file, stack_file


@pytest.fixture(scope="module")
def chart_defaults():
    """The chart's own values.yaml (reference folder; skips without it)."""
    return yaml.safe_load(reference_file(PLATFORM_VALUES).read_text())


def _unknown_keys(values, defaults, path=""):
    """Paths in `values` the chart's values.yaml does not have. Below a key whose default is
    an empty map/list or null (affinity: {}, env: []) any content is the chart's to accept."""
    out = []
    for key, value in values.items():
        here = f"{path}.{key}"
        if not isinstance(defaults, dict) or key not in defaults:
            out.append(here)
        elif isinstance(value, dict) and isinstance(defaults[key], dict) and defaults[key]:
            out += _unknown_keys(value, defaults[key], here)
    return out


def _multinode_base():
    raw = read_stack_file(stack_file("base-a100"))
    raw["cluster"] = {**raw["cluster"], "allowMultinode": True}
    return parse_config("base-a100", raw)


@pytest.mark.parametrize("stack", [load_stack("base-a100"), load_stack("agg-a100-standalone"),
                                   _multinode_base()], ids=["base", "standalone", "multinode"])
def test_every_key_exists_in_the_chart(stack, chart_defaults):
    values = platform_values(stack, prometheus_endpoint="http://prom.monitoring.svc:9090")
    assert _unknown_keys(values, chart_defaults) == []


def test_key_check_catches_a_misspelled_key(chart_defaults):
    assert _unknown_keys({"dynamo-operator": {"discoveryBackends": "x"}}, chart_defaults) == \
        [".dynamo-operator.discoveryBackends"]


def test_the_chart_installs_nats_unless_told_not_to(chart_defaults):
    """Why the values below switch NATS off: the 1.3.0 chart's own default is on."""
    assert chart_defaults["global"]["nats"]["install"] is True


def test_etcd_and_nats_off_with_kubernetes_discovery():
    values = platform_values(load_stack("base-a100"))
    assert values["global"]["etcd"]["install"] is False
    assert values["global"]["nats"]["install"] is False  # the 1.3.0 chart defaults it to true
    assert values["dynamo-operator"]["discoveryBackend"] == "kubernetes"
    assert "dynamo" not in values["dynamo-operator"]  # no Prometheus endpoint unless given


def test_grove_only_when_multinode_is_allowed():
    assert platform_values(load_stack("base-a100"))["global"]["grove"]["install"] is False
    assert platform_values(_multinode_base())["global"]["grove"] == {"install": True,
                                                                     "enabled": True}


def test_operator_on_cpu_nodes_and_prometheus_endpoint_passed():
    values = platform_values(load_stack("base-a100"), prometheus_endpoint="http://p:9090")
    operator = values["dynamo-operator"]
    assert operator["dynamo"]["metrics"]["prometheusEndpoint"] == "http://p:9090"
    terms = operator["controllerManager"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0] == {"key": NODE_GROUP_LABEL, "operator": "In",
                                               "values": ["cpu"]}


def test_chart_version_pinned_from_serving_or_schema_default():
    assert platform_chart_version(load_stack("base-a100")) == "1.6.1"
    raw = read_stack_file(stack_file("agg-a100-standalone"))
    raw["serving"] = {**raw["serving"], "platformChartVersion": "1.5.2"}
    assert platform_chart_version(parse_config("agg-a100-standalone", raw)) == "1.5.2"
