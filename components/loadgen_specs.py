"""Kubernetes objects around the serving deployment (pure): the load generator's namespace and
RBAC, the storage classes, the shared PVCs, the HF token Secret and the model download Job.

Functions take plain values (names, ids, tags, sizes) and return object dicts; the Pulumi
components turn them into resources. Facts followed:
- EFS through access points the program creates itself (aws.efs.AccessPoint, tagged like every
  other resource), bound statically: a PersistentVolume per claim with
  `volumeHandle: <fs-id>::<fsap-id>` on a provisioner-only StorageClass, as the driver's own
  example does (kubernetes-sigs/aws-efs-csi-driver examples/kubernetes/access_points). The EKS
  add-on cannot tag the access points it would create dynamically: `controller.tags` is a Helm
  chart value, not an add-on configuration key (aws/containers-roadmap#2755, open), and the
  add-on refuses unknown keys; the AWS-managed AmazonEFSCSIDriverPolicy would also refuse
  custom tag keys on CreateAccessPoint (kubernetes-sigs/aws-efs-csi-driver#1921). An access
  point enforces one POSIX identity, so every pod of a claim reads what the download Job wrote.
- EBS CSI tags volumes from StorageClass parameters named `tagSpecification_<n>` with value
  `key=value` (aws-ebs-csi-driver docs/tagging.md); values are Go templates, so `{{` is refused.
  EKS Auto Mode's built-in EBS driver has the provisioner `ebs.csi.eks.amazonaws.com`.
"""

from __future__ import annotations

from typing import Any

from components.conventions import (
    EBS_STORAGE_CLASS,
    EFS_STORAGE_CLASS,
    HF_TOKEN_KEY,
    HF_TOKEN_SECRET,
    LOADGEN_SERVICE_ACCOUNT,
    MODEL_CACHE_MOUNT,
    MODEL_CACHE_PVC,
    RESULTS_PVC,
)
from components.model_download import DOWNLOAD_SCRIPT
from components.runner_rbac import runner_rbac
from stacks.preflight.aws_checks import ebs_tag_problem

EBS_PROVISIONER = "ebs.csi.aws.com"
EBS_AUTO_MODE_PROVISIONER = "ebs.csi.eks.amazonaws.com"
EFS_PROVISIONER = "efs.csi.aws.com"
# The download Job installs this client into a plain Python image (no GPU image pull needed).
DOWNLOAD_IMAGE = "python:3.12-slim"
HUGGINGFACE_HUB_VERSION = "2.4.0"
DOWNLOAD_JOB = "model-download"
_PART_OF = {"app.kubernetes.io/part-of": "dynamo-bench"}


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**_PART_OF, **labels}}
    if namespace:
        meta["namespace"] = namespace
    return meta


# --- load generator ------------------------------------------------------------------------

def loadgen_rbac(namespace: str) -> list[dict[str, Any]]:
    """The Dynamo namespace, the load-generator Jobs' ServiceAccount, and the runner's RBAC.

    The ServiceAccount has no Role: its pods mount no token and AIPerf calls no API (AIPerf's
    in-cluster discovery stays off because no token is mounted, k8s_jobs.py; runner.md M3, M4).
    Every call is the runner's, with the kubeconfig's identity: what that needs is
    components/runner_rbac.py, bound to a group a non-admin identity can be mapped to.
    """
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(namespace)},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": _meta(LOADGEN_SERVICE_ACCOUNT, namespace),
         "automountServiceAccountToken": False},
        *runner_rbac(namespace),
    ]


# --- storage -------------------------------------------------------------------------------

# The POSIX identity every pod acts as on the shared file system (the load generator's user).
EFS_POSIX_ID = 1000
EFS_ROOT = "/dynamo-bench"


def efs_storage_class() -> dict[str, Any]:
    """The class the EFS volumes and claims name: provisioner only, so no claim is ever
    provisioned dynamically (every EFS volume below is bound to its claim)."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": _meta(EFS_STORAGE_CLASS), "provisioner": EFS_PROVISIONER}


def efs_access_point_path(claim: str) -> str:
    """The directory an access point roots its claim at."""
    return f"{EFS_ROOT}/{claim}"


def efs_volume_name(namespace: str, claim: str) -> str:
    return f"dynamo-bench-{namespace}-{claim}"


def efs_persistent_volume(namespace: str, claim: str, gib: int, *, file_system_id: str,
                          access_point_id: str) -> dict[str, Any]:
    """The PersistentVolume of one claim, mounted through its access point; reserved for that
    claim (claimRef). Retain: the data outlives the Kubernetes objects until the file system
    goes with `pulumi destroy`."""
    if not file_system_id.startswith("fs-") or not access_point_id.startswith("fsap-"):
        raise ValueError(f"'{file_system_id}::{access_point_id}' is not an EFS file system "
                         "id (fs-...) and access point id (fsap-...)")
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": _meta(efs_volume_name(namespace, claim)),
        "spec": {"capacity": {"storage": f"{gib}Gi"}, "volumeMode": "Filesystem",
                 "accessModes": ["ReadWriteMany"],
                 "persistentVolumeReclaimPolicy": "Retain",
                 "storageClassName": EFS_STORAGE_CLASS,
                 "claimRef": {"namespace": namespace, "name": claim},
                 "csi": {"driver": EFS_PROVISIONER,
                         "volumeHandle": f"{file_system_id}::{access_point_id}"}},
    }


def ebs_tag_parameters(tags: dict[str, str]) -> dict[str, str]:
    """EBS CSI `tagSpecification_<n>: key=value` parameters, in a stable order."""
    params = {}
    for n, (key, value) in enumerate(sorted(tags.items()), start=1):
        # pre-flight refuses it first (stacks.preflight.aws_checks)
        why = ebs_tag_problem(key, value)
        if why:
            raise ValueError(f"tag '{key}={value}': {why}: rename the tag")
        params[f"tagSpecification_{n}"] = f"{key}={value}"
    return params


def ebs_storage_class(tags: dict[str, str], *, auto_mode: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": _meta(EBS_STORAGE_CLASS),
        "provisioner": EBS_AUTO_MODE_PROVISIONER if auto_mode else EBS_PROVISIONER,
        "parameters": {"type": "gp3", "encrypted": "true", **ebs_tag_parameters(tags)},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }


def storage_classes(*, tags: dict[str, str], auto_mode: bool = False) -> list[dict[str, Any]]:
    """The EFS class (static volumes: model cache and results) and the tagged EBS gp3 class."""
    return [efs_storage_class(), ebs_storage_class(tags, auto_mode=auto_mode)]


def efs_claim_sizes(*, model_cache_gib: int, results_gib: int) -> dict[str, int]:
    """The RWX claims on EFS and their sizes: the model cache (workers, frontend and the
    download Job) and the results (the load generator)."""
    return {MODEL_CACHE_PVC: model_cache_gib, RESULTS_PVC: results_gib}


def _rwx_claim(name: str, namespace: str, gib: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(name, namespace),
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": EFS_STORAGE_CLASS,
                     "volumeName": efs_volume_name(namespace, name),
                     "resources": {"requests": {"storage": f"{gib}Gi"}}}}


def pvcs(namespace: str, *, model_cache_gib: int, results_gib: int) -> list[dict[str, Any]]:
    """The RWX claims, each bound to its own EFS volume (efs_persistent_volume)."""
    return [_rwx_claim(name, namespace, gib) for name, gib in efs_claim_sizes(
        model_cache_gib=model_cache_gib, results_gib=results_gib).items()]


def hf_token_secret(namespace: str, token: str) -> dict[str, Any]:
    """The Hugging Face token Secret the workers and the download Job read (key HF_TOKEN)."""
    if not token:
        raise ValueError("the HF token is empty: set it with "
                         "`pulumi config set --secret dynamo-bench:hfToken <token>`")
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(HF_TOKEN_SECRET, namespace),
            "stringData": {HF_TOKEN_KEY: token}}


# --- model download --------------------------------------------------------------------------

def model_download_job(namespace: str, *, model_id: str, revision: str | None,
                       timeout_minutes: int, affinity: dict[str, Any] | None = None,
                       image: str = DOWNLOAD_IMAGE) -> dict[str, Any]:
    """A Job that fills the model cache PVC once (see components.model_download).

    Idempotent: a re-run on a complete snapshot exits at once. activeDeadlineSeconds bounds the
    whole Job; a failed attempt is retried (finished files are kept, the download resumes).
    """
    env = [{"name": "MODEL_ID", "value": model_id},
           {"name": "MODEL_REVISION", "value": revision or ""},
           {"name": "HF_HOME", "value": f"{MODEL_CACHE_MOUNT}/hf"},
           {"name": "DOWNLOAD_SCRIPT", "value": DOWNLOAD_SCRIPT},
           {"name": HF_TOKEN_KEY, "valueFrom": {"secretKeyRef": {
               "name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY}}}]
    install = (f"pip install --no-cache-dir --quiet "
               f"'huggingface_hub=={HUGGINGFACE_HUB_VERSION}'")
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{
            "name": "download",
            "image": image,
            "command": ["sh", "-c", f'{install} && exec python -c "$DOWNLOAD_SCRIPT"'],
            "env": env,
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
            "volumeMounts": [{"name": MODEL_CACHE_PVC, "mountPath": MODEL_CACHE_MOUNT}],
        }],
        "volumes": [{"name": MODEL_CACHE_PVC,
                     "persistentVolumeClaim": {"claimName": MODEL_CACHE_PVC}}],
    }
    if affinity:
        pod["affinity"] = affinity
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": _meta(DOWNLOAD_JOB, namespace),
        "spec": {"backoffLimit": 3, "activeDeadlineSeconds": timeout_minutes * 60,
                 "template": {"metadata": {"labels": {**_PART_OF, "job": DOWNLOAD_JOB}},
                              "spec": pod}},
    }
