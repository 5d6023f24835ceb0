"""Run-time attestation, judged (pure): is the deployment what the stack says?

Before the smoke test of every run, and again after every cold restart, the target gathers
evidence from the real pods and metrics (workloads/targets/aws/attest_aws.py on a cluster,
the local target's own probe on the mocker) and this module judges it, check by check. A
failed check refuses the run: no load is sent and the message shows the evidence. Every
attestation is kept in the manifest (`attestations`) and report.md shows one line per run.

Evidence (a dict): `models` (ids /v1/models lists); `pods` {pod: {component, role, node,
gpu_probe, nixl_backends, engine; EFA workers also libfabric_check, efa_userspace (a donor's
copy) and libfabric_loaded (what their processes mapped)}} on a cluster; `before` /
`after` metric totals around the probe requests (attest_parse.metric_totals);
`repeat_cached_tokens` (usage.prompt_tokens_details.cached_tokens of each send of one prompt);
`offload_requests` (the overflow requests sent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stacks.conventions.k8s_names import GPU_PINNED_BY
from workloads.attest import first_data
from workloads.attest.parse import Expected, expected_gpus
from workloads.targets.base import TargetError

PASS, FAIL = "pass", "fail"
# Recorded and flagged on the run's figures, never a refusal (the server answers correctly).
FLAGGED = "flagged"
MOCKER = "not applicable (mocker)"
NOT_CONFIGURED = "not configured"
CHECKS = ("model", "gpus", "driver", "nixl_backend", "kv_transfer", "prefix_cache",
          "kv_events", "kv_offload", "precision", "first_data")
# What a NIXL fallback to TCP looks like in the log: the backend that was not asked for.
_OTHER_BACKEND = {"LIBFABRIC": "UCX", "UCX": "LIBFABRIC"}
_QUANTIZATION = {"bf16": ("none", ""), "fp8": ("fp8", "compressed-tensors", "modelopt"),
                 "nvfp4": ("modelopt_fp4", "compressed-tensors", "nvfp4", "modelopt")}


class AttestationRefused(TargetError):
    """A check failed: the deployment is not what the stack says; no load is sent."""


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Attestation:
    when: str
    target: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    def line(self) -> str:
        groups: dict[str, list[str]] = {}
        for c in self.checks:
            groups.setdefault(c.status, []).append(c.name)
        verdict = "passed" if self.ok else "REFUSED"
        parts = [f"{status} {len(names)}: {', '.join(names)}"
                 for status, names in groups.items()]
        return f"{verdict} ({self.when}; {'; '.join(parts)})"

    def refusal(self) -> str:
        failed = [c for c in self.checks if c.status == FAIL]
        lines = [f"attestation ({self.when}) refused the run: the deployment is not what the "
                 "stack says; no load was sent"]
        lines += [f"  - {c.name}: {c.detail}; evidence: {c.evidence}" for c in failed]
        return "\n".join(lines)

    def record(self) -> dict[str, Any]:
        return {"when": self.when, "target": self.target, "ok": self.ok, "line": self.line(),
                "checks": [{"name": c.name, "status": c.status, "detail": c.detail,
                            "evidence": c.evidence} for c in self.checks]}


def _delta(ev: dict, key: str) -> float | None:
    before, after = (ev.get("before") or {}).get(key), (ev.get("after") or {}).get(key)
    if after is None:
        return None
    return after - (before or 0.0)


def _workers(ev: dict) -> dict[str, dict]:
    return {name: p for name, p in (ev.get("pods") or {}).items()
            if p.get("role") in ("worker", "prefill", "decode")}


def check_model(x: Expected, ev: dict) -> Check:
    models = ev.get("models") or []
    if x.model_name not in models:
        return Check("model", FAIL, f"/v1/models lists {models}, not '{x.model_name}'",
                     {"models": models})
    if x.target != "aws":
        return Check("model", PASS, f"'{x.model_name}' served (revision: not reported by the "
                     "mocker)", {"models": models})
    seen = {}
    for name, pod in _workers(ev).items():
        engine = pod.get("engine")
        if not engine:
            return Check("model", FAIL, f"{name}: no vLLM engine-config line in its log",
                         {"pod": name})
        seen[name] = {"model": engine.get("model"), "revision": engine.get("revision")}
        want_rev = x.revision or "None"
        if engine.get("model") != x.model_id or engine.get("revision") != want_rev:
            return Check("model", FAIL, f"{name} loaded {engine.get('model')} at revision "
                         f"{engine.get('revision')}, the stack says {x.model_id} at "
                         f"{want_rev}", seen)
    return Check("model", PASS, f"{x.model_id} at revision {x.revision or 'default'} on every "
                 "worker", {"models": models, "workers": seen})




def _names(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def pinning_problem(probe: dict) -> str | None:
    """How the EFA workers' start shell pinned its GPUs (components/efa.py): from the device
    plugin's NVIDIA_VISIBLE_DEVICES list, from its volume-mount entries, or the node's GPUs
    when the pod holds all of them. Whether a pinned worker's CUDA_VISIBLE_DEVICES is what
    the device plugin answered (None for a worker the shell did not start, or when it is)."""
    way = probe.get("pinned_by")
    if way is None:
        return None
    cuda = _names(probe.get("cuda_visible_devices"))
    if way == "volume-mounts":
        plugin = list(probe.get("device_list_mounts") or [])
    elif way == "envvar":
        plugin = _names(probe.get("nvidia_visible_devices"))
    elif way == "whole-node":
        return None     # the count and the no-sharing checks below hold it
    else:
        return f"pinned its GPUs by {way!r}, none of {list(GPU_PINNED_BY)}"
    if sorted(cuda) != sorted(plugin):
        return (f"runs on CUDA_VISIBLE_DEVICES {cuda}, the device plugin's {way} answer "
                f"names {plugin}")
    return None


def check_gpus(x: Expected, ev: dict) -> Check:
    owners: dict[str, list[str]] = {}
    seen = {}
    for name, pod in _workers(ev).items():
        probe = pod.get("gpu_probe") or {}
        want = expected_gpus(x, pod.get("component", ""))
        uuids = [g["uuid"] for g in probe.get("gpus") or []]
        seen[name] = {"node": pod.get("node"), "uuids": uuids, "expected": want,
                      "pinned_by": probe.get("pinned_by"),
                      "device_list_mounts": probe.get("device_list_mounts")}
        if probe.get("error") or probe.get("nvidia_smi_exit", 0) != 0:
            return Check("gpus", FAIL, f"{name}: GPU probe failed: "
                         f"{probe.get('error') or probe.get('stderr')}", seen)
        wrong = pinning_problem(probe)
        if wrong:
            return Check("gpus", FAIL, f"{name} {wrong}", seen)
        if want is None or len(set(uuids)) != want or len(uuids) != want:
            return Check("gpus", FAIL, f"{name} sees {len(set(uuids))} distinct GPU(s), the "
                         f"stack gives it {want} (TP x PP)", seen)
        for u in uuids:
            owners.setdefault(u, []).append(name)
    shared = {u: pods for u, pods in owners.items() if len(pods) > 1}
    if shared:
        u, pods = next(iter(shared.items()))
        return Check("gpus", FAIL, f"GPU {u} is used by {len(pods)} pods on node "
                     f"{seen[pods[0]]['node']}: {pods}", seen)
    ways = sorted({str(p["pinned_by"]) for p in seen.values() if p["pinned_by"]})
    how = f", pinned from the device plugin's {'/'.join(ways)} answer" if ways else ""
    return Check("gpus", PASS, f"{len(seen)} worker pod(s), each on its own GPUs{how}", seen)


def check_driver(x: Expected, ev: dict) -> Check:
    drivers = sorted({g["driver"] for p in _workers(ev).values()
                      for g in (p.get("gpu_probe") or {}).get("gpus") or []})
    if not drivers:
        return Check("driver", FAIL, "no driver version reported by the GPU probe", {})
    old = [d for d in drivers if int(d.split(".")[0]) < x.min_driver]
    if old:
        return Check("driver", FAIL, f"driver {old} is older than the {x.min_driver} the "
                     "image's CUDA needs", {"drivers": drivers})
    return Check("driver", PASS, f"NVIDIA driver {', '.join(drivers)} (>= {x.min_driver})",
                 {"drivers": drivers})


def check_nixl_backend(x: Expected, ev: dict) -> Check:
    # evaluate() judges it only where configured(): the stack names a NIXL backend
    assert x.nixl_backend is not None
    pods = {n: p for n, p in _workers(ev).items() if p.get("role") in ("prefill", "decode")}
    seen: dict[str, Any] = {n: p.get("nixl_backends") or [] for n, p in pods.items()}
    # the EFA workers' image check before start (components/libfabric_check.py), recorded
    image_checks = {n: p["libfabric_check"] for n, p in pods.items() if "libfabric_check" in p}
    for name, backends in list(seen.items()):
        if x.nixl_backend not in backends:
            return Check("nixl_backend", FAIL, f"{name}: NIXL did not log 'Backend "
                         f"{x.nixl_backend} was instantiated' (saw {backends or 'none'})", seen)
        if _OTHER_BACKEND[x.nixl_backend] in backends:
            return Check("nixl_backend", FAIL, f"{name}: NIXL also instantiated "
                         f"{_OTHER_BACKEND[x.nixl_backend]}: a fallback from "
                         f"{x.nixl_backend}", seen)
    if image_checks:
        seen["libfabric_check"] = image_checks
    donors = {n: p["efa_userspace"] for n, p in pods.items() if "efa_userspace" in p}
    if donors:
        seen["efa_userspace"] = donors
    wrong = _libfabric_loaded(x, pods, seen)
    if wrong:
        return Check("nixl_backend", FAIL, wrong, seen)
    where = f", libfabric from {x.libfabric_home}" if x.libfabric_home else ""
    return Check("nixl_backend", PASS, f"{x.nixl_backend} instantiated on {len(pods)} "
                 f"prefill/decode worker(s){where}", seen)


def _libfabric_loaded(x: Expected, pods: dict[str, dict], seen: dict[str, Any]) -> str | None:
    """On the LIBFABRIC paths every prefill/decode worker's processes must map libfabric from
    the stack's EFA userspace (the image's /opt/amazon/efa or the donor's copy,
    stacks/conventions/kv_path.py), which the loaded-libfabric probe reads from /proc; what
    they mapped (libfabric, libefa) and the EFA devices they hold open are recorded."""
    home = x.libfabric_home
    if home is None:
        return None
    loaded: dict[str, Any] = {}
    seen["libfabric_loaded"] = loaded
    for name, pod in pods.items():
        probe = pod.get("libfabric_loaded")
        if not probe or probe.get("error"):
            return (f"{name}: no record of the libfabric its processes mapped "
                    f"({(probe or {}).get('error') or 'the probe did not run'})")
        paths = sorted(probe.get("libfabric") or {})
        loaded[name] = {"libfabric": paths, "libefa": sorted(probe.get("libefa") or {}),
                        "uverbs_fds": sum((probe.get("uverbs_fds") or {}).values())}
        if not paths:
            return f"{name}: no process maps libfabric, yet NIXL logged LIBFABRIC"
        elsewhere = [p for p in paths if not p.startswith(home.rstrip("/") + "/")]
        if elsewhere:
            return (f"{name} maps libfabric from {elsewhere}, not from the stack's EFA "
                    f"userspace {home}")
    return None


def check_kv_transfer(x: Expected, ev: dict) -> Check:
    moved, failed = _delta(ev, "nixl_bytes_transferred"), _delta(ev, "nixl_failed_transfers")
    evidence = {"bytes": moved, "failed_transfers": failed}
    if moved is None:
        return Check("kv_transfer", FAIL, "the decode workers export no NIXL transfer metrics",
                     evidence)
    if moved <= 0:
        # also what a graph with no prefill worker registered looks like: the frontend then
        # "uses decode-only routing" (Dynamo 1.6 router docs, disaggregated-serving)
        return Check("kv_transfer", FAIL, "a request that went through prefill and decode "
                     "moved no KV bytes (NIXL transfer metrics did not grow; no prefill "
                     "worker registered with the frontend serves decode-only)", evidence)
    if failed:
        return Check("kv_transfer", FAIL, f"{failed:.0f} NIXL transfer(s) failed", evidence)
    return Check("kv_transfer", PASS, f"{moved:.0f} KV bytes moved prefill -> decode",
                 evidence)


def check_prefix_cache(x: Expected, ev: dict) -> Check:
    cached = ev.get("repeat_cached_tokens") or []
    frontend = _delta(ev, "frontend_cached_tokens")
    evidence = {"cached_tokens_per_send": cached, "frontend_cached_tokens": frontend}
    if not cached or max(cached[1:] or [0]) <= 0:
        return Check("prefix_cache", FAIL, f"a prompt sent {len(cached)} times showed no "
                     "cached tokens on the server", evidence)
    if frontend is not None and frontend <= 0:
        return Check("prefix_cache", FAIL, "the frontend counted no cached tokens", evidence)
    return Check("prefix_cache", PASS, f"the repeated prompt hit the cache ({max(cached)} "
                 "cached tokens)", evidence)


def check_kv_events(x: Expected, ev: dict) -> Check:
    applied = _delta(ev, "router_kv_events_stored")
    if not applied:
        return Check("kv_events", FAIL, "the KV router applied no KV 'stored' event from the "
                     "workers: it routes blind (load balancing only)",
                     {"stored_events_applied": applied})
    return Check("kv_events", PASS, f"the router applied {applied:.0f} stored event(s)",
                 {"stored_events_applied": applied})


def check_kv_offload(x: Expected, ev: dict) -> Check:
    stored = _delta(ev, "offload_store_bytes")
    evidence = {"store_bytes": stored, "requests": ev.get("offload_requests")}
    if stored is None:
        return Check("kv_offload", FAIL, "the workers export no KV offload metrics", evidence)
    if stored <= 0:
        return Check("kv_offload", FAIL, "requests overflowing the GPU KV cache stored nothing "
                     "to the CPU tier", evidence)
    return Check("kv_offload", PASS, f"{stored:.0f} bytes offloaded GPU -> CPU", evidence)


def check_precision(x: Expected, ev: dict) -> Check:
    seen = {}
    for name, pod in _workers(ev).items():
        engine = pod.get("engine") or {}
        quant = (engine.get("quantization") or "").lower()
        dtype = engine.get("dtype") or ""
        seen[name] = {"dtype": dtype, "quantization": quant,
                      "kv_cache_dtype": engine.get("kv_cache_dtype")}
        ok = quant in _QUANTIZATION[x.precision]
        if x.precision == "bf16":
            ok = ok and "bfloat16" in dtype
        if x.kv_cache_dtype == "fp8":
            ok = ok and str(engine.get("kv_cache_dtype", "")).startswith("fp8")
        if not engine or not ok:
            return Check("precision", FAIL, f"{name} runs dtype={dtype or '?'} "
                         f"quantization={quant or '?'}, the stack is labelled {x.precision}"
                         f" (KV cache {x.kv_cache_dtype})", seen)
    return Check("precision", PASS, f"{x.precision} on every worker", seen)


def check_first_data(x: Expected, ev: dict) -> Check:
    """The client's first data against the frontend's own TTFT on a kept-alive connection
    (workloads/attest/first_data.py). A stall above the bound is flagged with its size and the
    plain first data it came at: the floor under a client's TTFT (first_data_floor), which the
    report weighs per step against that step's own frontend TTFT (reports/tables/tables.py
    ttft_gap). A probe that could not arm TCP_QUICKACK compared the plain client with itself:
    its figure is refused, the check says not measured."""
    probe = ev.get("first_data")
    stall = first_data.stall_ms(probe)
    why = None
    if stall is None or probe is None:
        why = (probe or {}).get("error") or "the probe did not run"
    elif probe.get("quickack_supported") is not True:
        why = ("the probe's Python has no socket.TCP_QUICKACK, so its quick-ACK mode was the "
               "plain one and its stall figure means nothing (run it on Linux)")
    if why is not None:
        # the probe kept apart: no `stall_ms` a reader could take for a measurement
        return Check("first_data", FLAGGED, f"first-data stall not measured: {why}; TTFT "
                     "figures may include a client-side stall", {"probe": probe or {}})
    assert probe is not None and stall is not None
    seen = {"stall_ms": stall, "gap_ms": first_data.gap_ms(probe),
            "plain_first_data_p50_ms": probe["plain"]["first_data_p50_ms"],
            "quickack_first_data_p50_ms": probe["quickack"]["first_data_p50_ms"],
            "frontend_ttft_mean_ms": probe["plain"]["frontend_ttft_mean_ms"],
            "bound_ms": first_data.STALL_BOUND_MS}
    if stall > first_data.STALL_BOUND_MS:
        return Check("first_data", FLAGGED, f"the client sees the first token {stall:.1f} ms "
                     f"after a client that ACKs at once (bound {first_data.STALL_BOUND_MS:g} "
                     "ms): the frontend's Nagle delay meets the client's delayed ACK, so a "
                     "request whose first token comes sooner than "
                     f"{seen['plain_first_data_p50_ms']:.1f} ms reaches the client then; the "
                     "report weighs it per step", seen)
    return Check("first_data", PASS, f"first-data stall {stall:.1f} ms <= "
                 f"{first_data.STALL_BOUND_MS:g} ms", seen)


_JUDGES = {"model": check_model, "gpus": check_gpus, "driver": check_driver,
           "nixl_backend": check_nixl_backend, "kv_transfer": check_kv_transfer,
           "prefix_cache": check_prefix_cache, "kv_events": check_kv_events,
           "kv_offload": check_kv_offload, "precision": check_precision,
           "first_data": check_first_data}
# What the local mocker can show: it has no GPUs, NIXL, offload tier or vLLM engine log.
MOCKER_CHECKS = ("model", "prefix_cache", "kv_events", "first_data")


def configured(x: Expected, name: str) -> bool:
    return {"nixl_backend": x.nixl_backend is not None,
            "kv_transfer": x.nixl_backend is not None, "prefix_cache": x.prefix_caching,
            "kv_events": x.kv_router, "kv_offload": x.kv_offload}.get(name, True)


def evaluate(x: Expected, evidence: dict, when: str) -> Attestation:
    checks = []
    for name in CHECKS:
        if not configured(x, name):
            checks.append(Check(name, NOT_CONFIGURED, "the stack does not configure it"))
        elif x.target != "aws" and name not in MOCKER_CHECKS:
            checks.append(Check(name, MOCKER, "the local mocker cannot show it"))
        else:
            checks.append(_JUDGES[name](x, evidence))
    return Attestation(when, x.target, checks)


def first_data_measured(records: list[dict] | None) -> dict[str, Any] | None:
    """The evidence of the last first-data check that measured a stall (stall_ms, the plain
    and quick-ACK first data, the bound, ...), passed or flagged; None when none did."""
    for att in reversed(records or []):
        for check in att.get("checks") or []:
            evidence = check.get("evidence") or {}
            if check.get("name") == "first_data" and isinstance(evidence.get("stall_ms"),
                                                                (int, float)):
                return evidence
    return None


def first_data_floor(records: list[dict] | None) -> float | None:
    """Where a run's attestation flagged a first-data stall: the plain mode's first data
    (ms), the floor under a client's TTFT whose first token comes sooner; None when the stall
    was within its bound or not measured."""
    evidence = first_data_measured(records)
    if evidence is None or float(evidence["stall_ms"]) <= float(
            evidence.get("bound_ms", first_data.STALL_BOUND_MS)):
        return None
    floor = evidence.get("plain_first_data_p50_ms")
    return float(floor) if isinstance(floor, (int, float)) else None


def summary_line(records: list[dict] | None) -> str:
    """One line for a run's report: its last attestation, and how many there were."""
    if not records:
        return "none recorded"
    last = records[-1]
    refused = sum(1 for r in records if not r.get("ok"))
    extra = f"; {refused} refused" if refused else ""
    return f"{last.get('line')} [{len(records)} attestation(s){extra}]"
