"""The EFA workers' image check (dynamo.md F2, aws.md R6): NIXL's LIBFABRIC plugin needs the
system libfabric.so.1, which only Dynamo's -efa images carry; a missing plugin is skipped with a
warning and vLLM's register_memory then fails with KeyError (ai-dynamo/nixl _api.py). Every EFA
worker pod runs the check in its own image first; the runner stops on its refusal at once and
the attestation records what it saw. The check is run here for real, shell included."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from graph_stacks import graph_of, main, serving_stack_names
from k8s_validation import validate_pod_templates

from components import efa, libfabric_check
from stacks.config.loader import load_stack
from stacks.conventions.k8s_names import (
    EFA_USERSPACE_CONTAINER,
    LIBFABRIC_CHECK_CONTAINER,
    LIBFABRIC_MISSING_EXIT,
)
from stacks.conventions.kv_path import DONOR_HOME
from workloads.attest.checks import FAIL, PASS, check_nixl_backend
from workloads.attest.parse import expected
from workloads.targets.aws import k8s_graph
from workloads.targets.aws.attest_scripts import LOADED_FABRIC

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
        check = inits[-1]   # after the donor's copy, where there is one
        assert check["name"] == LIBFABRIC_CHECK_CONTAINER
        assert check["image"] == c["image"]          # the image the engine will run
        # the library path the worker's start shell gives the engine, and the efa provider
        # listed by the fi_info of that userspace
        (path,) = re.findall(r'export LD_LIBRARY_PATH="([^"$]*)\$', c["command"][2])
        assert f'export LD_LIBRARY_PATH="{path}$' in check["command"][2]
        assert efa.EFA_LIBRARY_PATH in path
        assert check["command"][-1].endswith("/bin/fi_info")
    validate_pod_templates(graph)


def test_the_four_b200_disagg_model_builds_are_checked() -> None:
    for model in ("axk2", "kexaone", "solar2", "motif3"):
        graph = graph_of(f"disagg-b200-{model}")
        workers = [c for c in graph["spec"]["components"] if c["type"] != "frontend"]
        assert workers and all(c["podTemplate"]["spec"].get("initContainers") for c in workers)


def test_the_check_refuses_an_image_without_libfabric_through_its_shell(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    command = libfabric_check.init_container("img", home="/opt/amazon/efa")["command"]
    # this machine has no libfabric.so.1 (as the recipe model builds): the real shell and script
    out = subprocess.run([*command[:4], str(log), *command[5:]], capture_output=True, text=True,
                         timeout=60)
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
    loaded = {"libfabric": {"/opt/amazon/efa/lib/libfabric.so.1.29.0": [7, 9]},
              "libefa": {"/usr/lib/x86_64-linux-gnu/libefa.so.1.3.58.0": [7, 9]},
              "uverbs_fds": {"7": 2, "9": 2}}
    pods = {"prefill-0": {"role": "prefill", "nixl_backends": ["LIBFABRIC"],
                          "libfabric_check": seen, "libfabric_loaded": loaded},
            "decode-0": {"role": "decode", "nixl_backends": ["LIBFABRIC"],
                         "libfabric_loaded": loaded}}
    check = check_nixl_backend(x, {"pods": pods})
    assert check.status == PASS, check.detail
    assert check.evidence["libfabric_check"] == {"prefill-0": seen}
    assert check.evidence["libfabric_loaded"]["decode-0"] == {
        "libfabric": ["/opt/amazon/efa/lib/libfabric.so.1.29.0"],
        "libefa": ["/usr/lib/x86_64-linux-gnu/libefa.so.1.3.58.0"], "uverbs_fds": 4}


def test_a_worker_that_mapped_another_libfabric_fails_the_backend_check() -> None:
    # the donor path: the engine must map the donor's copy, not a libfabric found elsewhere
    x = expected(load_stack("disagg-b200-solar2"), "aws")
    assert x.libfabric_home == DONOR_HOME
    own = {"libfabric": {f"{DONOR_HOME}/lib/libfabric.so.1.29.0": [7]}, "uverbs_fds": {"7": 1}}
    other = {"libfabric": {"/usr/local/lib/python3.12/dist-packages/nixl_cu13.libs/"
                           "libfabric-4f2a.so.1": [7]}}
    pods = {"prefill-0": {"role": "prefill", "nixl_backends": ["LIBFABRIC"],
                          "libfabric_loaded": own},
            "decode-0": {"role": "decode", "nixl_backends": ["LIBFABRIC"],
                         "libfabric_loaded": other}}
    check = check_nixl_backend(x, {"pods": pods})
    assert check.status == FAIL and "decode-0 maps libfabric from" in check.detail
    pods["decode-0"]["libfabric_loaded"] = {"error": "exit 1: no python3"}
    assert "no record of the libfabric" in check_nixl_backend(x, {"pods": pods}).detail
    pods["decode-0"]["libfabric_loaded"] = own
    assert check_nixl_backend(x, {"pods": pods}).status == PASS


def test_the_loaded_libfabric_probe_reads_every_process_of_the_container(tmp_path: Path) -> None:
    # vLLM's NIXL agents live in its TP worker processes: the probe reads them all
    proc = tmp_path / "proc"
    lib = f"{DONOR_HOME}/lib/libfabric.so.1.29.0"
    for pid, maps, fds in (
            ("1", ["7f00-7f10 r-xp 00000000 00:2f 12 /usr/bin/python3.12"], {"0": "/dev/null"}),
            ("41", [f"7f00-7f10 r-xp 00000000 00:2f 12 {lib}",
                    f"7f10-7f20 r--p 00010000 00:2f 12 {lib}",
                    "7f20-7f30 r-xp 00000000 00:2f 13 /usr/lib/x86_64-linux-gnu/libefa.so.1.3",
                    "7f30-7f40 rw-p 00000000 00:00 0"],
             {"3": "/dev/infiniband/uverbs0", "4": "/dev/infiniband/uverbs1", "5": "/tmp/x"}),
            ("42", [f"7f00-7f10 r-xp 00000000 00:2f 12 {lib}"], {})):
        (proc / pid / "fd").mkdir(parents=True)
        (proc / pid / "maps").write_text("\n".join(maps) + "\n")
        for fd, target in fds.items():
            (proc / pid / "fd" / fd).symlink_to(target)
    (proc / "self").mkdir()
    (proc / "77").mkdir()          # a process that exited between listdir and open
    out = subprocess.run([sys.executable, "-c", LOADED_FABRIC, str(proc)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["libfabric"] == {lib: [41, 42]}
    assert seen["libefa"] == {"/usr/lib/x86_64-linux-gnu/libefa.so.1.3": [41]}
    assert seen["uverbs_fds"] == {"41": 2}


def test_an_init_image_the_registry_does_not_have_stops_the_wait_at_once() -> None:
    missing = _pod({"name": EFA_USERSPACE_CONTAINER, "state": {"waiting": {
        "reason": "ErrImagePull", "message": 'failed to pull image "nvcr.io/nvidia/ai-dynamo/'
        'vllm-runtime:9.9.9-efa": not found'}}})
    state = k8s_graph.pod_state(missing)
    assert state.fatal and EFA_USERSPACE_CONTAINER in (state.problem or "")
    slow = _pod({"name": EFA_USERSPACE_CONTAINER, "state": {"waiting": {
        "reason": "ErrImagePull", "message": "context deadline exceeded"}}})
    assert not k8s_graph.pod_state(slow).fatal
