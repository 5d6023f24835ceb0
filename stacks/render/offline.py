"""Run the Pulumi program of a stack offline, under Pulumi's mocks, and record every resource.

No Pulumi CLI, AWS account or Kubernetes API is involved: `__main__.py` runs exactly as under
`pulumi up`, but each resource registration is answered by `RecordingMocks`, which records the
type, name, inputs (and which inputs were secret) and returns the outputs the program reads
(ids, ARNs, the pulumi-eks kubeconfig, ...). Used by `python -m stacks render` and the tests.

Known traps handled here (see the design brief, "Testing offline"):
- resource references in inputs are kept as URN strings instead of live Resource objects, which
  otherwise bind futures to another event loop and fail at random (pulumi#6561);
- the root Stack resource is reset before every run;
- an attached variant's StackReference is answered with the outputs of its base, obtained by
  running the base program first.
This module runs the program file; it never imports components/ (stacks/ stays upstream).
"""

from __future__ import annotations

import hashlib
import json
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.sync_await import _sync_await

from stacks.config.loader import PROJECT, load_stack, load_stack_file

ROOT_DIR = Path(__file__).resolve().parents[2]
PROGRAM = ROOT_DIR / "__main__.py"
ORGANIZATION = "organization"          # the DIY backend's organization name
ACCOUNT = "123456789012"
SECRET_KEYS = (f"{PROJECT}:hfToken",)
# The Pulumi types a Helm chart installation is recorded as (components/charts.py).
HELM_CHART = "kubernetes:helm.sh/v4:Chart"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_TYPES = (HELM_CHART, HELM_RELEASE)
PLACEHOLDER_TOKEN = "hf_offline_placeholder_not_a_real_token"
# Who may reach the API endpoint when a stack is rendered offline: a documentation range
# (RFC 5737 TEST-NET-2), never a real network.
PLACEHOLDER_API_ACCESS = '["198.51.100.0/24"]'

_SIG = rpc._special_sig_key
_SECRET_SIG = rpc._special_secret_sig
_RESOURCE_SIG = rpc._special_resource_sig
_OUTPUT_SIG = rpc._special_output_value_sig
_ID_PREFIX = {"Vpc": "vpc", "Subnet": "subnet", "SecurityGroup": "sg", "FileSystem": "fs",
              "LaunchTemplate": "lt", "InternetGateway": "igw", "NatGateway": "nat",
              "Eip": "eipalloc", "RouteTable": "rtb", "PlacementGroup": "pg",
              "AccessPoint": "fsap"}


@dataclass
class Recorded:
    """One registered resource, as the program asked for it."""

    type: str
    name: str
    urn: str
    inputs: dict[str, Any]
    secret_inputs: frozenset[str]   # top-level input names that were Pulumi secrets
    custom: bool
    provider: str | None            # "<provider urn>::<id>" or None
    depends_on: frozenset[str] = frozenset()   # URNs of explicit and input dependencies
    retain_on_delete: bool = False             # the resource option (kept by `destroy`)


def _plain(value: Any) -> tuple[Any, bool]:
    """Decode a MessageToDict'ed property: references become URNs, secrets are unwrapped (and
    reported), unknowns become None, integral floats become ints."""
    if isinstance(value, dict):
        sig = value.get(_SIG)
        if sig == _SECRET_SIG:
            return _plain(value.get("value"))[0], True
        if sig == _RESOURCE_SIG:
            return value.get("urn"), False
        if sig == _OUTPUT_SIG:
            inner, secret = _plain(value.get("value"))
            return inner, secret or bool(value.get("secret"))
        out, secret = {}, False
        for k, v in value.items():
            decoded, s = _plain(v)
            secret |= s
            if decoded is not None:
                out[k] = decoded
        return out, secret
    if isinstance(value, list):
        items = [_plain(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    if value == rpc.UNKNOWN:
        return None, False
    if isinstance(value, float) and value.is_integer():
        return int(value), False
    return value, False


def decode_properties(struct: Any) -> tuple[dict[str, Any], frozenset[str]]:
    raw = json_format.MessageToDict(struct, preserving_proto_field_name=True)
    inputs, secrets = {}, set()
    for key, value in raw.items():
        decoded, secret = _plain(value)
        if decoded is not None:
            inputs[key] = decoded
        if secret:
            secrets.add(key)
    return inputs, frozenset(secrets)


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


class RecordingMocks(Mocks):
    """Answers registrations and calls with plausible AWS/EKS outputs, recording everything."""

    def __init__(self, region: str,
                 stack_outputs: dict[str, tuple[dict[str, Any], set[str]]]):
        self.region = region
        self.stack_outputs = stack_outputs
        self.resources: list[Recorded] = []
        self._pending_secrets: frozenset[str] = frozenset()
        self._pending_deps: frozenset[str] = frozenset()
        self._pending_retain = False
        self._pending_urn = ""

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict]:
        self.resources.append(Recorded(
            type=args.typ, name=args.name, urn=self._pending_urn, inputs=args.inputs,
            secret_inputs=self._pending_secrets, custom=bool(args.custom),
            provider=args.provider or None, depends_on=self._pending_deps,
            retain_on_delete=self._pending_retain))
        if args.typ == "pulumi:pulumi:StackReference":
            return self._stack_reference(args)
        kind = args.typ.rsplit(":", 1)[-1]
        resource_id = args.resource_id or f"{_ID_PREFIX.get(kind, kind.lower())}-" \
                                          f"{_short_hash(args.typ + args.name)}"
        state = dict(args.inputs)
        if args.typ.startswith("aws:"):
            service = args.typ.split(":")[1].split("/")[0]
            region = "" if service == "iam" else self.region
            state.setdefault("arn", f"arn:aws:{service}:{region}:{ACCOUNT}:"
                                    f"{kind.lower()}/{args.inputs.get('name', args.name)}")
            state.setdefault("name", args.inputs.get("name", args.name))
            state.setdefault("latestVersion", 1)
        if args.typ == "eks:index:Cluster":
            state.update(self._eks_cluster(args))
        if args.typ == "random:index/randomPassword:RandomPassword":
            state["result"] = f"offline-{_short_hash(args.name)}"
        return resource_id, state

    def _eks_cluster(self, args: MockResourceArgs) -> dict[str, Any]:
        name = args.inputs.get("name", args.name)
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": {
                "server": f"https://{_short_hash(name)}.gr7.{self.region}.eks.amazonaws.com",
                "certificate-authority-data": "TU9DSw=="}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "users": [{"name": name, "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", name]}}}],
        }
        state = {"kubeconfig": kubeconfig, "kubeconfigJson": json.dumps(kubeconfig),
                 "clusterSecurityGroupId": f"sg-{_short_hash(name + 'cluster')}",
                 "nodeSecurityGroupId": f"sg-{_short_hash(name + 'node')}"}
        if (args.inputs.get("autoMode") or {}).get("enabled"):
            state["autoModeNodeRoleName"] = f"{name}-auto-mode-node"
        return state

    def _stack_reference(self, args: MockResourceArgs) -> tuple[str, dict]:
        ref = args.inputs.get("name") or args.resource_id or ""
        base = ref.rsplit("/", 1)[-1]
        if base not in self.stack_outputs:
            raise KeyError(f"no outputs recorded for base stack '{ref}'")
        outputs, secret = self.stack_outputs[base]
        return ref, {"name": ref, "outputs": outputs, "secretOutputNames": sorted(secret)}

    # pulumi's MockMonitor.Invoke takes a bare dict as well as the (dict, failures) tuple that
    # Mocks.call is annotated with (an isinstance check in pulumi/runtime/mocks.py); a tuple
    # with None failures would crash there, so the dict form stays.
    def call(self, args: Any) -> dict:  # type: ignore[override]  # stub: dict is accepted
        token, a = args.token, args.args
        zones = [f"{self.region}{c}" for c in "abcdef"]
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"names": zones, "zoneIds": [f"use1-az{i}" for i in range(1, 7)],
                    "id": self.region}
        if token == "aws:index/getPartition:getPartition":
            # the partition of the region, as AWS answers (aws-cn, aws-us-gov, aws)
            partition, suffix = (("aws-cn", "amazonaws.com.cn") if self.region.startswith("cn-")
                                 else ("aws-us-gov", "amazonaws.com")
                                 if self.region.startswith("us-gov-")
                                 else ("aws", "amazonaws.com"))
            return {"partition": partition, "dnsSuffix": suffix, "id": partition}
        if token == "aws:ec2/getVpc:getVpc":
            return {"id": a.get("id"), "cidrBlock": "10.0.0.0/16", "arn": "arn"}
        if token == "aws:ec2/getSubnet:getSubnet":
            sid = a.get("id", "")
            return {"id": sid, "vpcId": "vpc-existing",
                    "availabilityZone": zones[int(_short_hash(sid), 16) % 3]}
        raise NotImplementedError(f"no offline answer for the call {token}")


class UrnMonitor(MockMonitor):
    """MockMonitor that decodes inputs itself, keeping resource references as URN strings
    (never live Resource objects) and noting which inputs were secret."""

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        return self._register(request, urn, request.importId or None, request.custom)

    def ReadResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        reply = self._register(request, urn, request.id, True, properties=request.properties)
        return resource_pb2.ReadResourceResponse(urn=urn, properties=reply.object)

    def _register(self, request: Any, urn: str, resource_id: str | None, custom: bool,
                  properties: Any = None) -> Any:
        inputs, secrets = decode_properties(properties if properties is not None
                                            else request.object)
        mocks: RecordingMocks = self.mocks  # type: ignore[assignment]  # always a RecordingMocks
        mocks._pending_secrets, mocks._pending_urn = secrets, urn
        deps = set(getattr(request, "dependencies", []))
        for prop in getattr(request, "propertyDependencies", {}).values():
            deps.update(prop.urns)
        mocks._pending_deps = frozenset(deps)
        mocks._pending_retain = bool(getattr(request, "retainOnDelete", False))
        id_, state = mocks.new_resource(MockResourceArgs(
            typ=request.type, name=request.name, inputs=inputs, provider=request.provider,
            resource_id=resource_id, custom=custom))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
        obj = _sync_await(rpc.serialize_properties(state, {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=obj)


@dataclass
class ProgramRun:
    stack: str
    resources: list[Recorded] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)
    error: BaseException | None = None

    def of_type(self, type_token: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == type_token]

    def helm_charts(self) -> dict[str, Recorded]:
        """Every chart installation (a v4 Chart or a v3 Release), by chart name."""
        return {r.inputs["chart"]: r for r in self.resources if r.type in HELM_TYPES}


def config_strings(raw: dict[str, Any], hf_token: str | None,
                   api_access: str | None = PLACEHOLDER_API_ACCESS) -> dict[str, str]:
    """Stack-file config as Pulumi passes it to a program: structured values as JSON text."""
    out = {f"{PROJECT}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
    if hf_token is not None:
        out[f"{PROJECT}:hfToken"] = hf_token
    if api_access is not None:
        out[f"{PROJECT}:apiAccessCidrs"] = api_access
    return out


def run_program(stack: str, config: dict[str, str], *, region: str,
                stack_outputs: dict[str, tuple[dict[str, Any], set[str]]] | None = None,
                secret_keys: tuple[str, ...] = SECRET_KEYS,
                program: Callable[[], None] | None = None) -> ProgramRun:
    """Run the program (default: __main__.py) for `stack` under the mocks.

    Errors the program raises are returned in `ProgramRun.error` with whatever was recorded
    before them (an invalid stack must have recorded nothing).
    """
    if str(ROOT_DIR) not in sys.path:
        sys.path.insert(0, str(ROOT_DIR))
    mocks = RecordingMocks(region, stack_outputs or {})
    run = ProgramRun(stack=stack, resources=mocks.resources)
    pulumi.runtime.settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False,
                             monitor=UrnMonitor(mocks), organization=ORGANIZATION)
    pulumi.runtime.set_all_config(config, list(secret_keys))
    # set_mocks registered a fresh root Stack; drop its record so only program resources count.
    mocks.resources.clear()

    def body() -> Any:
        (program or (lambda: runpy.run_path(str(PROGRAM), run_name="__main__")))()
        exported = pulumi.runtime.get_root_resource().outputs  # type: ignore[union-attr]
        futures = {k: pulumi.Output.from_input(v) for k, v in exported.items()}
        secrets: dict[str, pulumi.Output[bool]] = {
            k: pulumi.Output.from_input(v.is_secret()) for k, v in futures.items()}

        def capture(args: list[dict[str, Any]]) -> None:
            values, secret = args
            run.outputs.update(values)
            run.secret_outputs.update(k for k, s in secret.items() if s)

        return pulumi.Output.all(pulumi.Output.all(**futures), pulumi.Output.all(**secrets)) \
            .apply(capture)

    try:
        pulumi.runtime.test(body)()
    except Exception as exc:  # noqa: BLE001 - handed to the caller with the partial record
        run.error = exc
    finally:
        pulumi.runtime.settings.ROOT.set(None)
    return run


def run_stack(name: str, *, hf_token: str | None = PLACEHOLDER_TOKEN,
              cache: dict[str, ProgramRun] | None = None) -> ProgramRun:
    """Run a stack file's program; an attached variant first runs its base for the outputs."""
    cache = {} if cache is None else cache
    if name in cache:
        return cache[name]
    raw = load_stack_file(name).config   # a derived `<variant>.<base>` too
    attach = (raw.get("cluster") or {}).get("attachTo")
    outputs: dict[str, tuple[dict[str, Any], set[str]]] = {}
    region = (raw.get("cluster") or {}).get("region", "us-east-1")
    if attach:
        base = run_stack(attach, hf_token=hf_token, cache=cache)
        if base.error is not None:
            raise RuntimeError(f"base stack '{attach}' failed offline: {base.error}")
        outputs[attach] = (base.outputs, base.secret_outputs)
        region = load_stack(attach).cluster.region
    run = run_program(name, config_strings(raw, hf_token), region=region,
                      stack_outputs=outputs)
    cache[name] = run
    return run
