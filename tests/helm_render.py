"""The charts the Pulumi program installs, rendered by Helm itself (test helpers).

Which charts a stack installs, under which release name and in which namespace, is read from
the program's own run under Pulumi's mocks (tests/pulumi_harness.py); the values are the pure
functions components/ passes (VALUES_OF), which tests/test_chart_render.py checks are what the
program handed to each chart. `rendered(install)` runs `helm template <release> <archive> -n
<namespace> -f values.json` with helm 4.1.4 (tests/helm_install.py, `make helm`) on the pinned
archive of tests/reference.toml (with `--kube-version` of the stack's cluster and
`--skip-tests`), once per distinct input per session.

Validation (`validate`): built-in kinds strictly with kubernetes-validate (tests/k8s_validation.py:
an unknown kind raises, never a pass); the prometheus-operator kinds (monitoring.coreos.com)
with jsonschema against the CRDs kube-prometheus-stack itself ships (charts/crds/crds/ in the
pinned archive, prometheus-operator v0.86.2), closed the same way as the Dynamo CRD
(k8s_validation.strict_schema).

The dynamo-platform chart has no archive here (its repository is too large to fetch and it
pulls five other charts): it stays checked against its values file (tests/test_platform_values.py).
"""

from __future__ import annotations

import functools
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from helm_install import HELM_VERSION, helm_path, reported_version
from k8s_validation import strict_schema, validate_builtin
from pulumi_harness import k8s_objects, run
from reference import reference_file

from components import monitoring_specs, node_specs
from stacks.config.loader import all_stack_names, load_stack
from stacks.config.schema import StackConfig

PLATFORM_CHART = "dynamo-platform"   # no archive: checked against its values file
# (chart, version) -> the pinned archive (tests/reference.toml)
ARCHIVES = {
    ("kube-prometheus-stack", "79.5.0"): "charts/kube-prometheus-stack-79.5.0.tgz",
    ("dcgm-exporter", "4.8.2"): "charts/dcgm-exporter-4.8.2.tgz",
    ("nvidia-device-plugin", "0.18.0"): "charts/nvidia-device-plugin-0.18.0.tgz",
    ("aws-efa-k8s-device-plugin", "v0.5.29"): "charts/aws-efa-k8s-device-plugin-v0.5.29.tgz",
}
# The pure function whose result components/ passes to each chart as its values
# (components/monitoring.py, components/nodegroups.py).
VALUES_OF: dict[str, Callable[[StackConfig], dict[str, Any]]] = {
    "kube-prometheus-stack": monitoring_specs.kube_prometheus_values,
    "dcgm-exporter": monitoring_specs.dcgm_exporter_values,
    "nvidia-device-plugin": lambda stack: node_specs.nvidia_device_plugin_values(),
    "aws-efa-k8s-device-plugin": lambda stack: node_specs.efa_device_plugin_values(),
}
MONITORING_GROUP = "monitoring.coreos.com"
PROMETHEUS_CRDS = ("kube-prometheus-stack", "79.5.0")


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML 1.1 reads a bare `=` as the "value" type, which PyYAML cannot build; Kubernetes
    (YAML via JSON) reads it as a string, as in the CRDs' `enum: [=, !=, =~, !~]`."""


_Loader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_yaml_str)


def chart_stacks() -> list[str]:
    """The shipped stacks whose program installs charts: bases and standalones on AWS, and any
    variant with node groups of its own (which may install the EFA plugin)."""
    out = []
    for name in all_stack_names():
        stack = load_stack(name)
        if stack.target == "aws" and (not stack.is_attached or stack.cluster.node_groups):
            out.append(name)
    return out


@dataclass(frozen=True)
class Install:
    """One chart installation of a stack, as the program registered it."""
    stack: str
    chart: str
    version: str
    release: str
    namespace: str
    recorded_values: str     # JSON of the values the program passed (under the mocks)

    @property
    def config(self) -> StackConfig:
        return load_stack(self.stack)

    @property
    def values(self) -> dict[str, Any]:
        """What the chart is rendered with: the pure function components/ calls."""
        return VALUES_OF[self.chart](self.config)

    @property
    def id(self) -> str:
        return f"{self.stack}:{self.chart}"


@functools.cache
def program_installs(stack: str) -> tuple[Install, ...]:
    """Every chart the program installs for `stack`, the platform chart included."""
    result = run(stack)
    assert result.error is None, f"{stack}: the program failed under the mocks: {result.error}"
    out = []
    for chart, r in result.helm_charts().items():
        # A helm.v4.Chart without `name` takes its resource's name as the release name.
        out.append(Install(stack, chart, r.inputs["version"], r.inputs.get("name") or r.name,
                           r.inputs["namespace"], json.dumps(r.inputs.get("values") or {},
                                                             sort_keys=True)))
    return tuple(out)


def namespace_labels(stack: str, name: str) -> dict[str, str]:
    """The labels of a Namespace the program creates, with the one the API server adds
    (kubernetes.io/metadata.name), as a namespace selector sees them."""
    (ns,) = [o for _, o in k8s_objects(run(stack))
             if o["kind"] == "Namespace" and o["metadata"]["name"] == name]
    return {**(ns["metadata"].get("labels") or {}), "kubernetes.io/metadata.name": name}


def installs(stack: str) -> list[Install]:
    """The charts rendered here: everything the program installs but the platform chart."""
    return [i for i in program_installs(stack) if i.chart != PLATFORM_CHART]


def archive(install: Install) -> Path:
    key = (install.chart, install.version)
    assert key in ARCHIVES, (
        f"{install.id}: no archive of {key[0]} {key[1]} is pinned: make one with `helm package` "
        "from the chart's sources, pin it in tests/reference.toml and add it to ARCHIVES")
    return reference_file(ARCHIVES[key])


@functools.cache
def helm() -> Path:
    """The helm binary, once checked to be the pinned version (the `helm` marker skips a test,
    or fails it under CI, when it is not installed at all)."""
    path = helm_path()
    version = reported_version(path)
    assert version == HELM_VERSION, f"{path} is helm {version}, not {HELM_VERSION}: `make helm`"
    return path


@functools.cache
def _render(archive_path: Path, release: str, namespace: str, kube_version: str,
            values_json: str) -> tuple[dict[str, Any], ...]:
    with tempfile.TemporaryDirectory() as tmp:
        values = Path(tmp) / "values.json"
        values.write_text(values_json)
        done = subprocess.run([str(helm()), "template", release, str(archive_path),
                               "-n", namespace, "-f", str(values),
                               "--kube-version", kube_version, "--skip-tests"],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"helm template {archive_path.name} failed:\n{done.stderr}"
    return tuple(d for d in yaml.load_all(done.stdout, Loader=_Loader) if d)


def rendered(install: Install) -> tuple[dict[str, Any], ...]:
    """Helm's render of `install` for its cluster's Kubernetes version, as an install creates
    it: hooks in (a helm.v3.Release runs them; the helm.v4.Chart charts have none,
    components/charts.py), the charts' test hooks out (an install never runs them); the CRDs
    of a chart's crds/ folder are not rendered (`helm template` leaves them out: they are
    upstream's files as they are, the schemas `validate` reads). Identical inputs, e.g. two
    stacks passing the device plugin the same values, are rendered once."""
    return _render(archive(install), install.release, install.namespace,
                   f"v{install.config.cluster.eks_version}.0",
                   json.dumps(install.values, sort_keys=True))


def of_kind(objs: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: tuple[dict[str, Any], ...], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in of_kind(objs, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, rendered {len(found)}"
    return found[0]


# --- the prometheus-operator kinds, against the CRDs the chart ships ----------------------

@functools.cache
def _prometheus_crds() -> tuple[str, ...]:
    """The text of every CRD in kube-prometheus-stack's charts/crds/crds/."""
    out = []
    with tarfile.open(reference_file(ARCHIVES[PROMETHEUS_CRDS])) as tar:
        for member in tar.getmembers():
            if "/charts/crds/crds/" in member.name and member.name.endswith(".yaml"):
                extracted = tar.extractfile(member)
                assert extracted is not None
                out.append(extracted.read().decode())
    return tuple(out)


@functools.cache
def monitoring_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator | None:
    """A strict validator for a served version of the chart's CRD of `kind` (None: the chart
    has no such CRD). Only the CRD of a rendered kind is parsed: they are 4 MB of YAML."""
    group, _, version = api_version.partition("/")
    for text in _prometheus_crds():
        if f"\n    kind: {kind}\n" not in text:    # its spec.names.kind, before parsing
            continue
        crd = yaml.load(text, Loader=_Loader)
        if (crd["spec"]["group"], crd["spec"]["names"]["kind"]) != (group, kind):
            continue
        for served in crd["spec"]["versions"]:
            if served["name"] == version and served.get("served"):
                return jsonschema.Draft7Validator(
                    strict_schema(served["schema"]["openAPIV3Schema"]))
    return None


def validate(obj: dict[str, Any]) -> None:
    """Strict validation of one rendered object, raising on any problem or unknown kind."""
    if obj["apiVersion"].split("/")[0] == MONITORING_GROUP:
        validator = monitoring_validator(obj["apiVersion"], obj["kind"])
        assert validator is not None, f"no CRD in the chart for {obj['apiVersion']} {obj['kind']}"
        errors = sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                        for e in validator.iter_errors(obj))
        assert not errors, f"{obj['kind']} {obj['metadata']['name']}: " + "; ".join(errors)
        return
    validate_builtin(obj)


_VALID: set[str] = set()   # objects (as canonical JSON) found valid in this session


def validate_all(objs: tuple[dict[str, Any], ...]) -> int:
    """Validate every object not already found valid in this session (validation depends on
    the object alone, and most of the objects four stacks render are the same); returns how
    many were validated now."""
    keyed = {json.dumps(o, sort_keys=True): o for o in objs}
    fresh = {key: obj for key, obj in keyed.items() if key not in _VALID}
    for key, obj in fresh.items():
        validate(obj)
        _VALID.add(key)
    return len(fresh)
