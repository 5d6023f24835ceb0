"""The EFA workers' image check (dynamo.md F2, aws.md R6): NIXL's LIBFABRIC plugin needs the
system libfabric.so.1, which only Dynamo's -efa images carry; a missing plugin is skipped with a
warning and vLLM's register_memory then fails with KeyError (ai-dynamo/nixl _api.py). Every EFA
worker pod runs the check in its own image first; the runner stops on its refusal at once and
the attestation records what it saw. The check is run here for real, shell included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from graph_stacks import graph_of, main, serving_stack_names
from k8s_validation import validate_pod_templates

from components import efa, libfabric_check
from stacks.config.loader import load_stack
from stacks.conventions.k8s_names import LIBFABRIC_CHECK_CONTAINER, LIBFABRIC_MISSING_EXIT
from workloads.attest.checks import PASS, check_nixl_backend
from workloads.attest.parse import expected
from workloads.targets.aws import k8s_graph

AWS = [n for n in serving_stack_names() if load_stack(n).target == "aws"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", libfabric_check.SCRIPT, *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", AWS)
def test_every_efa_worker_checks_its_own_image_before_it_starts(name: str) -> None:
    graph = graph_of(name)
    for comp in graph["spec"]["components"]:
        pod, c = comp["podTemplate"]["spec"], main(comp)
        efa_worker = "vpc.amazonaws.com/efa" in c["resources"].get("limits", {})
        inits = pod.get("initContainers", [])
        if not efa_worker:
            assert inits == [], comp["name"]
            continue
        (check,) = inits
        assert check["name"] == LIBFABRIC_CHECK_CONTAINER
        assert check["image"] == c["image"]          # the image the engine will run
        # the library path the worker's start shell gives the engine
        assert efa.EFA_LIBRARY_PATH in check["command"][2]
    validate_pod_templates(graph)


def test_the_four_b200_disagg_model_builds_are_checked() -> None:
    for model in ("axk2", "kexaone", "solar2", "motif3"):
        graph = graph_of(f"disagg-b200-{model}")
        workers = [c for c in graph["spec"]["components"] if c["type"] != "frontend"]
        assert workers and all(c["podTemplate"]["spec"].get("initContainers") for c in workers)


def test_the_check_refuses_an_image_without_libfabric_through_its_shell(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    command = libfabric_check.init_container("img")["command"]
    # this machine has no libfabric.so.1 (as the recipe model builds): the real shell and script
    out = subprocess.run([*command[:-1], str(log)], capture_output=True, text=True, timeout=60)
    assert out.returncode == LIBFABRIC_MISSING_EXIT, out.stderr
    seen = json.loads(log.read_text())
    assert seen["ok"] is False and seen["libfabric"].startswith("missing")


def test_the_check_passes_where_the_library_loads_and_records_it(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    out = _run(str(log), "libc.so.6")
    assert out.returncode == 0, out.stderr
    seen = json.loads(log.read_text())
    assert seen["ok"] is True and seen["libfabric"] == "loaded"


def _pod(init_status: dict) -> dict:
    return {"metadata": {"name": "p", "labels": {k8s_graph.OP_COMPONENT_LABEL: "prefill-b200"}},
            "status": {"phase": "Pending", "initContainerStatuses": [init_status],
                       "containerStatuses": [{"name": "main", "restartCount": 0, "state": {
                           "waiting": {"reason": "PodInitializing"}}}]}}


def test_the_runner_stops_at_once_on_the_checks_refusal() -> None:
    message = json.dumps({"ok": False, "libfabric": "missing: libfabric.so.1"})
    refused = _pod({"name": LIBFABRIC_CHECK_CONTAINER, "restartCount": 1,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": LIBFABRIC_MISSING_EXIT,
                                                 "message": message}}})
    state = k8s_graph.pod_state(refused)
    assert state.fatal and "libfabric" in (state.problem or "") and "missing" in state.problem
    running = _pod({"name": LIBFABRIC_CHECK_CONTAINER, "state": {"running": {}}})
    assert not k8s_graph.pod_state(running).fatal


def test_the_attestation_records_what_the_check_saw() -> None:
    seen = {"ok": True, "libfabric": "loaded", "nixl_plugins": ["LIBFABRIC", "UCX"]}
    passed = _pod({"name": LIBFABRIC_CHECK_CONTAINER, "state": {"terminated": {
        "exitCode": 0, "message": json.dumps(seen)}}})
    assert k8s_graph.libfabric_check_seen(passed) == seen
    x = expected(load_stack("disagg-a100"), "aws")
    pods = {"prefill-0": {"role": "prefill", "nixl_backends": ["LIBFABRIC"],
                          "libfabric_check": seen},
            "decode-0": {"role": "decode", "nixl_backends": ["LIBFABRIC"]}}
    check = check_nixl_backend(x, {"pods": pods})
    assert check.status == PASS
    assert check.evidence["libfabric_check"] == {"prefill-0": seen}


def test_preflight_notes_a_libfabric_stack_on_a_model_build_and_only_there() -> None:
    from stacks.preflight.efa_image import runs_an_efa_build
    from stacks.preflight.run import check_stack
    for model in ("axk2", "kexaone", "solar2", "motif3"):
        report = check_stack(f"disagg-b200-{model}")
        assert report.ok
        (note,) = [n for n in report.notes if "libfabric.so.1" in n]
        assert "serving.image" in note and "docker run" in note
    assert not [n for n in check_stack("disagg-a100").notes if "libfabric.so.1" in n]
    assert runs_an_efa_build("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1")
    assert runs_an_efa_build("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa@sha256:ab")
    assert not runs_an_efa_build("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-a.x-k2-post.1")
