"""The KV path of the recipe model builds on AWS (components/efa_userspace.py): a donor -efa
runtime's EFA userspace copied into the worker pods by an init container and checked in the
worker's own image before the engine starts. The graph objects are validated (kubernetes-validate
strict, the vendored CRD), and the copy, the check and the worker's start shell run for real
against a fake donor tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from graph_stacks import env_of, graph_of, main, variant
from k8s_validation import validate_dgd, validate_pod_templates

from components import efa, efa_userspace, libfabric_check
from components.graph import build_graph_deployment
from stacks.config.loader import StackError
from stacks.conventions.k8s_names import (
    EFA_USERSPACE_CONTAINER,
    GPU_COUNT_ENV,
    LIBFABRIC_CHECK_CONTAINER,
    LIBFABRIC_MISSING_EXIT,
)
from stacks.conventions.kv_path import DONOR_HOME, EFA_HOME

RECIPES = [f"disagg-b200-{m}" for m in ("axk2", "kexaone", "solar2", "motif3")]
DONOR = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0-efa"
EXPORT = re.compile(r'export LD_LIBRARY_PATH="([^"$]*)\$')


def _workers(graph):
    return [c for c in graph["spec"]["components"] if c["type"] != "frontend"]


@pytest.mark.parametrize("name", RECIPES)
def test_a_recipe_build_gets_the_donors_efa_userspace_checked_in_its_own_image(name):
    graph = graph_of(name)
    validate_dgd(graph)
    validate_pod_templates(graph)
    for comp in _workers(graph):
        pod, worker = comp["podTemplate"]["spec"], main(comp)
        copy, check = pod["initContainers"]
        assert copy["name"] == EFA_USERSPACE_CONTAINER and copy["image"] == DONOR
        assert copy["command"][-3:] == [EFA_HOME, DONOR_HOME, libfabric_check.TERMINATION_LOG]
        assert check["name"] == LIBFABRIC_CHECK_CONTAINER
        assert check["image"] == worker["image"]      # the recipe build, not the donor
        assert not worker["image"].endswith("-efa")
        # one volume, written by the copy, read by the check and the engine
        (volume,) = [v for v in pod["volumes"] if v["name"] == efa_userspace.VOLUME]
        assert "emptyDir" in volume
        for c, read_only in ((copy, None), (check, True), (worker, True)):
            (m,) = [m for m in c["volumeMounts"] if m["name"] == efa_userspace.VOLUME]
            assert m["mountPath"] == DONOR_HOME and m.get("readOnly") is read_only
        # the check loads what the engine will load: same library path first, same env,
        # fi_info of the copy, the worker's EFA interfaces and privileges
        (worker_path,) = EXPORT.findall(worker["command"][2])
        (check_path,) = EXPORT.findall(check["command"][2])
        assert worker_path == check_path and worker_path.startswith(f"{DONOR_HOME}/lib:")
        assert check["command"][-1] == f"{DONOR_HOME}/bin/fi_info"
        assert env_of(worker)["FI_PROVIDER_PATH"] == f"{DONOR_HOME}/lib/libfabric"
        check_env = {e["name"]: e["value"] for e in check["env"]}
        assert {k: env_of(worker)[k] for k in check_env} == check_env
        assert check_env["FI_PROVIDER"] == "efa"
        efa_count = worker["resources"]["limits"]["vpc.amazonaws.com/efa"]
        assert check["resources"]["limits"] == {"vpc.amazonaws.com/efa": efa_count}
        assert check["securityContext"] == worker["securityContext"]


def test_an_efa_image_keeps_its_own_userspace_and_no_copy():
    graph = graph_of("disagg-a100")
    for comp in _workers(graph):
        pod, worker = comp["podTemplate"]["spec"], main(comp)
        (check,) = pod["initContainers"]
        assert worker["image"].endswith("-efa") and check["image"] == worker["image"]
        assert check["command"][-1] == f"{EFA_HOME}/bin/fi_info"
        assert worker["command"] == efa.pinned_command()
        assert "FI_PROVIDER_PATH" not in env_of(worker)
        assert not [v for v in pod["volumes"] if v["name"] == efa_userspace.VOLUME]


def test_a_recipe_build_without_a_donor_is_refused_naming_the_field():
    stack = variant("disagg-b200-solar2", efaUserspaceImage=None)
    with pytest.raises(StackError) as err:
        build_graph_deployment(stack, namespace="dynamo", efa=True)
    (problem,) = err.value.problems
    assert problem.field == "dynamo-bench:serving.efaUserspaceImage"
    assert "vllm-runtime:1.4.0-efa" in problem.fix


# --- the scripts, run for real -------------------------------------------------------------

def _ldd(path: str) -> dict[str, str]:
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return {m[1]: m[2] for m in re.finditer(r"^\s*(\S+) => (/\S+)", out, re.MULTILINE)}


FI_INFO = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fi_info: 2.4.0amzn5.0"; echo "libfabric: 2.4.0amzn5.0"
  exit 0; fi
[ "$1 $2" = "-p efa" ] || exit 2
[ -n "${NO_EFA_DEVICE:-}" ] && { echo "fi_getinfo: -61 (No data available)" >&2; exit 1; }
[ -n "${ONLY_TCP:-}" ] && { printf 'provider: tcp\n    fabric: 10.0.0.0/16\n'; exit 0; }
printf 'provider: efa\\n    fabric: efa\\n    domain: rdmap79s0-rdm\\n    type: FI_EP_RDM\\n'
printf 'provider: efa\\n    fabric: efa\\n    domain: rdmap80s0-rdm\\n    type: FI_EP_RDM\\n'
"""


@pytest.fixture
def donor(tmp_path: Path) -> Path:
    """A donor's /opt/amazon/efa: libfabric.so.1 stands in as a real library that links one
    library from outside the tree (libssl, which links libcrypto) and glibc."""
    import _ssl
    libssl = _ldd(_ssl.__file__)["libssl.so.3"]
    home = tmp_path / "donor" / "opt" / "amazon" / "efa"
    (home / "lib" / "libfabric").mkdir(parents=True)
    (home / "bin").mkdir()
    shutil.copy(libssl, home / "lib" / "libfabric.so.1.29.0")
    (home / "lib" / "libfabric.so.1").symlink_to("libfabric.so.1.29.0")
    (home / "lib" / "libfabric" / "libefa-fi.so").write_text("provider")
    fi_info = home / "bin" / "fi_info"
    fi_info.write_text(FI_INFO)
    fi_info.chmod(fi_info.stat().st_mode | stat.S_IEXEC)
    return home


def _copy(src: Path, dst: Path, log: Path) -> subprocess.CompletedProcess[str]:
    argv = efa_userspace.copy_container(DONOR)["command"]
    return subprocess.run([*argv[:4], str(src), str(dst), str(log)], capture_output=True,
                          text=True, timeout=60)


def test_the_copy_takes_libfabric_its_providers_fi_info_and_what_it_links_but_not_glibc(
        donor, tmp_path):
    dst, log = tmp_path / "pod" / "efa", tmp_path / "copy-log"
    linked = {n for n in _ldd(str(donor / "lib" / "libfabric.so.1")) if not n.startswith("libc.")}
    assert linked, "the stand-in must link a library from outside the tree"
    out = _copy(donor, dst, log)
    assert out.returncode == 0, out.stderr
    assert (dst / "lib" / "libfabric.so.1").resolve().is_relative_to(dst)   # kept in the copy
    assert (dst / "lib" / "libfabric" / "libefa-fi.so").read_text() == "provider"
    assert os.access(dst / "bin" / "fi_info", os.X_OK)
    for name in linked:
        assert (dst / "lib" / name).is_file() and not (dst / "lib" / name).is_symlink()
    assert not (dst / "lib" / "libc.so.6").exists()    # the worker's own loader gives glibc
    seen = json.loads(log.read_text())
    assert seen["ok"] and set(seen["linked"]) == linked


def test_the_copy_refuses_an_image_that_is_not_an_efa_runtime(tmp_path):
    log = tmp_path / "copy-log"
    out = _copy(tmp_path / "no-efa", tmp_path / "dst", log)
    assert out.returncode == LIBFABRIC_MISSING_EXIT
    seen = json.loads(log.read_text())
    assert seen["ok"] is False and "not a Dynamo -efa runtime" in seen["error"]


def test_the_copy_refuses_a_donor_whose_libfabric_misses_a_library(donor, tmp_path):
    # a library libfabric needs but the donor lacks: ldd says "not found"
    lib = donor / "lib" / "libfabric.so.1.29.0"
    data = lib.read_bytes()
    lib.write_bytes(data.replace(b"libcrypto.so.3", b"libcrypto.so.9"))
    log = tmp_path / "copy-log"
    out = _copy(donor, tmp_path / "dst", log)
    assert out.returncode == LIBFABRIC_MISSING_EXIT
    assert "libcrypto.so.9" in json.loads(log.read_text())["error"]


def _check(home: Path, log: Path, **env: str) -> subprocess.CompletedProcess[str]:
    spec = libfabric_check.init_container("img", home=str(home), efa_devices=4,
                                          library_path=f"{home}/lib:{efa.EFA_LIBRARY_PATH}")
    argv = list(spec["command"])
    argv[4] = str(log)
    run_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          env={**run_env, **{e["name"]: e["value"] for e in spec["env"]}, **env})


def test_the_copied_userspace_loads_in_the_worker_and_lists_the_efa_provider(donor, tmp_path):
    dst, log = tmp_path / "pod" / "efa", tmp_path / "check-log"
    assert _copy(donor, dst, tmp_path / "copy-log").returncode == 0
    out = _check(dst, log)
    assert out.returncode == 0, out.stderr
    seen = json.loads(log.read_text())
    assert seen["ok"] and seen["libfabric"] == "loaded"
    assert seen["libfabric_path"].startswith(str(dst / "lib") + "/")   # the copy, not the host
    assert seen["efa_providers"] == ["efa"]
    assert seen["efa_domains"] == ["rdmap79s0-rdm", "rdmap80s0-rdm"]
    assert "2.4.0amzn5.0" in seen["fi_info_version"]


@pytest.mark.parametrize("env, fi_info_exit, providers", [
    ({"NO_EFA_DEVICE": "1"}, 1, []),            # no EFA device in the pod: fi_getinfo -61
    ({"ONLY_TCP": "1"}, 0, ["tcp"]),            # a listing without the efa provider
])
def test_the_check_refuses_a_pod_where_fi_info_lists_no_efa_provider(
        donor, tmp_path, env, fi_info_exit, providers):
    dst, log = tmp_path / "pod" / "efa", tmp_path / "check-log"
    assert _copy(donor, dst, tmp_path / "copy-log").returncode == 0
    out = _check(dst, log, **env)
    assert out.returncode == LIBFABRIC_MISSING_EXIT
    seen = json.loads(log.read_text())
    assert seen["ok"] is False and seen["fi_info_exit"] == fi_info_exit
    assert seen["efa_providers"] == providers
    assert ("No data available" in seen.get("fi_info_error", "")) == (fi_info_exit == 1)


def test_the_workers_start_shell_puts_the_copy_first(tmp_path):
    fake_dev = tmp_path / "dev"
    fake_dev.mkdir()
    for i in range(4):
        (fake_dev / f"nvidia{i}").touch()
    library_path = f"{DONOR_HOME}/lib:{efa.EFA_LIBRARY_PATH}"
    script = efa.pin_gpus_script(device_list_dir=str(tmp_path / "none"), dev_dir=str(fake_dev),
                                 worker=("printenv", "LD_LIBRARY_PATH"),
                                 library_path=library_path)
    out = subprocess.run(["sh", "-c", script, "dynamo-vllm"], capture_output=True, text=True,
                         env={"PATH": os.environ["PATH"], GPU_COUNT_ENV: "4",
                              "LD_LIBRARY_PATH": "/opt/nvidia/nvda_nixl/lib64"}, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{library_path}:/opt/nvidia/nvda_nixl/lib64"
