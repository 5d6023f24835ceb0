"""Load-generator RBAC, storage classes, PVCs, the HF token Secret and the model download Job,
including a real run of the download program against a stand-in hub client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from components.conventions import (
    EFS_STORAGE_CLASS,
    HF_TOKEN_KEY,
    HF_TOKEN_SECRET,
    LOADGEN_SERVICE_ACCOUNT,
    MODEL_CACHE_MOUNT,
    MODEL_CACHE_PVC,
    RESULTS_PVC,
)
from components.loadgen_specs import (
    EBS_AUTO_MODE_PROVISIONER,
    EBS_PROVISIONER,
    ebs_storage_class,
    efs_persistent_volume,
    hf_token_secret,
    loadgen_rbac,
    model_download_job,
    pvcs,
    storage_classes,
)
from components.model_download import DOWNLOAD_SCRIPT
from stacks.config.loader import all_stack_names, load_stack


def test_loadgen_rbac_is_least_privilege_in_its_namespace():
    # runner.md M3: the ServiceAccount is bound to nothing (its pods mount no token); the only
    # Role is the runner's (tests/test_runner_rbac.py checks it covers every call of a run)
    ns, sa, role, binding, *cluster_scoped = loadgen_rbac("bench")
    assert (ns["kind"], ns["metadata"]["name"]) == ("Namespace", "bench")
    assert (sa["kind"], sa["metadata"]["name"]) == ("ServiceAccount", LOADGEN_SERVICE_ACCOUNT)
    assert sa["automountServiceAccountToken"] is False
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "bench"
    granted = {(g, r): set(rule["verbs"]) for rule in role["rules"]
               for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "secrets") not in granted
    assert all("*" not in verbs for verbs in granted.values())
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert all(s["kind"] == "Group" for b in (binding, *cluster_scoped) for s in b.get(
        "subjects", []))
    (nodes,) = [o for o in cluster_scoped if o["kind"] == "ClusterRole"]
    assert nodes["rules"] == [{"apiGroups": [""], "resources": ["nodes"],
                               "verbs": ["get", "list"]}]


def _tags_from(params: dict[str, str]) -> dict[str, str]:
    pairs = [v.split("=", 1) for k, v in params.items() if k.startswith("tagSpecification_")]
    return dict(pairs)


@pytest.mark.parametrize("name", [n for n in all_stack_names() if load_stack(n).target == "aws"])
def test_ebs_volumes_carry_every_cost_tag(name):
    tags = load_stack(name).resource_tags()
    sc = ebs_storage_class(tags)
    assert sc["provisioner"] == EBS_PROVISIONER
    params = sc["parameters"]
    assert _tags_from(params) == tags
    keys = sorted(k for k in params if k.startswith("tagSpecification_"))
    assert keys == sorted(f"tagSpecification_{i}" for i in range(1, len(tags) + 1))
    assert {"project", "stack", "experiment"} <= set(tags)
    assert (params["type"], params["encrypted"]) == ("gp3", "true")


def test_ebs_class_on_auto_mode_and_bad_tags():
    assert ebs_storage_class({"a": "b"}, auto_mode=True)["provisioner"] == \
        EBS_AUTO_MODE_PROVISIONER
    with pytest.raises(ValueError, match="rename the tag"):
        ebs_storage_class({"team=x": "y"})
    with pytest.raises(ValueError, match="rename the tag"):
        ebs_storage_class({"owner": "{{ .PVCName }}"})


def test_efs_volumes_are_static_and_bound_to_their_claim_through_an_access_point():
    efs, ebs = storage_classes(tags={"project": "x"})
    assert efs["metadata"]["name"] == EFS_STORAGE_CLASS
    assert efs["provisioner"] == "efs.csi.aws.com" and "parameters" not in efs  # no dynamic
    assert ebs["kind"] == "StorageClass"
    pv = efs_persistent_volume("dynamo", MODEL_CACHE_PVC, 200, file_system_id="fs-0abc1234",
                               access_point_id="fsap-0123456789abcdef0")
    assert pv["spec"]["csi"] == {"driver": "efs.csi.aws.com",
                                 "volumeHandle": "fs-0abc1234::fsap-0123456789abcdef0"}
    assert pv["spec"]["claimRef"] == {"namespace": "dynamo", "name": MODEL_CACHE_PVC}
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    claim = pvcs("dynamo", model_cache_gib=200, results_gib=20)[0]
    assert claim["spec"]["volumeName"] == pv["metadata"]["name"]
    with pytest.raises(ValueError, match="fs-"):
        efs_persistent_volume("dynamo", RESULTS_PVC, 20, file_system_id="vol-123",
                              access_point_id="fsap-1")


def test_pvcs_are_rwx_on_efs_with_configured_sizes():
    cache, results = pvcs("dynamo", model_cache_gib=200, results_gib=20)
    assert (cache["metadata"]["name"], results["metadata"]["name"]) == (MODEL_CACHE_PVC,
                                                                        RESULTS_PVC)
    for claim, size in ((cache, "200Gi"), (results, "20Gi")):
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
        assert claim["spec"]["storageClassName"] == EFS_STORAGE_CLASS
        assert claim["spec"]["resources"]["requests"]["storage"] == size


def test_hf_token_secret_holds_the_given_token_and_refuses_an_empty_one():
    secret = hf_token_secret("dynamo", "hf_abc")
    assert secret["metadata"]["name"] == HF_TOKEN_SECRET
    assert secret["stringData"] == {HF_TOKEN_KEY: "hf_abc"}
    with pytest.raises(ValueError, match="dynamo-bench:hfToken"):
        hf_token_secret("dynamo", "")


def test_download_job_spec():
    job = model_download_job("dynamo", model_id="Qwen/Qwen3-30B-A3B", revision="abc123",
                             timeout_minutes=90)
    assert job["spec"]["activeDeadlineSeconds"] == 90 * 60
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    assert (env["MODEL_ID"], env["MODEL_REVISION"]) == ("Qwen/Qwen3-30B-A3B", "abc123")
    assert env["HF_HOME"].startswith(MODEL_CACHE_MOUNT + "/")
    assert env[HF_TOKEN_KEY] == {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY}}
    assert env["DOWNLOAD_SCRIPT"] == DOWNLOAD_SCRIPT
    assert c["volumeMounts"] == [{"name": MODEL_CACHE_PVC, "mountPath": MODEL_CACHE_MOUNT}]
    assert {"name": MODEL_CACHE_PVC,
            "persistentVolumeClaim": {"claimName": MODEL_CACHE_PVC}} in pod["volumes"]


# --- the download program, run for real against a stand-in huggingface_hub ------------------

FAKE_HUB = textwrap.dedent('''
    import os, pathlib
    def snapshot_download(repo_id, revision, cache_dir, token):
        with open(os.environ["FAKE_HUB_CALLS"], "a") as calls:
            calls.write(repo_id + "\\n")
        if os.environ.get("FAKE_HUB_FAIL"):
            raise RuntimeError("network down")
        repo = "models--" + repo_id.replace("/", "--")
        snap = pathlib.Path(cache_dir) / repo / "snapshots" / ("0" * 40)
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").write_text("{}")
        return str(snap)
''')


@pytest.fixture
def run_download(tmp_path):
    (tmp_path / "fakehub").mkdir()
    (tmp_path / "fakehub" / "huggingface_hub.py").write_text(FAKE_HUB)
    calls = tmp_path / "calls.txt"

    def run(fail: bool = False) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(tmp_path / "fakehub"),
               "MODEL_ID": "Qwen/Qwen3-30B-A3B", "MODEL_REVISION": "",
               "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "hf_x",
               "FAKE_HUB_CALLS": str(calls)}
        if fail:
            env["FAKE_HUB_FAIL"] = "1"
        return subprocess.run([sys.executable, "-c", DOWNLOAD_SCRIPT], env=env,
                              capture_output=True, text=True, timeout=60)

    def n_calls() -> int:
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    run.calls = n_calls
    run.home = tmp_path / "hf"
    return run


def _logged(out: str, tag: str) -> dict:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(tag + " ")]
    return json.loads(line[len(tag) + 1:])


def test_download_records_times_then_skips_a_complete_snapshot(run_download):
    first = run_download()
    assert first.returncode == 0, first.stderr
    timing = _logged(first.stdout, "DOWNLOAD_TIMING")
    assert timing["skipped"] is False and timing["seconds"] >= 0
    assert timing["started_at"] <= timing["finished_at"]
    records = run_download.home / ".dynamo-bench" / "downloads"
    (saved,) = records.glob("*.json")
    assert json.loads(saved.read_text()) == timing  # the same record on the PVC and in the log
    assert run_download.calls() == 1

    second = run_download()
    assert second.returncode == 0, second.stderr
    assert run_download.calls() == 1  # the hub was not asked again
    assert _logged(second.stdout, "DOWNLOAD_SKIPPED")["skipped"] is True


def test_download_is_redone_when_the_snapshot_is_gone(run_download):
    assert run_download().returncode == 0
    snapshot = _logged(run_download().stdout, "DOWNLOAD_SKIPPED")["snapshot"]
    shutil.rmtree(snapshot)
    again = run_download()
    assert again.returncode == 0 and "DOWNLOAD_TIMING" in again.stdout
    assert run_download.calls() == 2


def test_failed_download_is_not_marked_complete(run_download):
    failed = run_download(fail=True)
    assert failed.returncode != 0 and "network down" in failed.stderr
    assert not list((run_download.home / ".dynamo-bench" / "downloads").glob("*.complete"))
    assert run_download().returncode == 0  # the retry downloads
    assert run_download.calls() == 2
