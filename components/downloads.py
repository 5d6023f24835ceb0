"""Which checkpoints a stack downloads into the model cache, and the Job that fetches each (pure).

Workers run with HF_HUB_OFFLINE=1, so every checkpoint they load must be on the cache PVC before
the graph starts: the model, and an external draft model (A.X K2's EAGLE3 head at its pinned
revision), as listed by `components.recipe_specs.checkpoints_to_download`.

- A stack that owns its storage (base, standalone) downloads all of its own checkpoints; its
  model's Job keeps the plain name `model-download`.
- An attached variant downloads only what its base does not cache already (compared as
  repo + revision: a pinned revision is another snapshot, even of the same repo).

One Job per checkpoint: each is idempotent on its own (the download program skips a complete
snapshot) and records its own start/end times, so a large model and its small draft are timed
apart and a failed draft never marks the model done. Job names carry the owning stack, so two
variants that need the same checkpoint (agg / disagg / baseline of one model) never create the
same object: with pulumi-kubernetes >= 4.29 a second create of an existing object fails
(AlreadyExists), and a shared object would be deleted by whichever stack is destroyed first.
Two such Jobs running at once fetch into the same Hugging Face cache; huggingface_hub locks each
file in it (EFS supports the NFSv4.1 locks this needs), and the later one finds the finished
files or the completion marker.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from components.loadgen_specs import DOWNLOAD_JOB, model_download_job
from components.recipe_specs import checkpoints_to_download
from stacks.config.schema import StackConfig

# A Job's name is copied into its pods' `batch.kubernetes.io/job-name` label: <= 63 characters.
MAX_JOB_NAME = 63
CHECKPOINT_ANNOTATION = "dynamo-bench.io/checkpoint"
STACK_LABEL = "dynamo-bench.io/stack"


@dataclass(frozen=True)
class Download:
    job_name: str
    repo: str
    revision: str | None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def download_job_name(repo: str, revision: str | None, owner: str) -> str:
    """`model-download-<owner>-<repo>-<hash>`, unique per owner stack and checkpoint."""
    digest = hashlib.sha1(f"{owner}|{repo}|{revision or ''}".encode()).hexdigest()[:6]
    head = f"{DOWNLOAD_JOB}-{_slug(f'{owner}-{repo}')}"[:MAX_JOB_NAME - len(digest) - 1]
    return f"{head.rstrip('-')}-{digest}"


def planned_downloads(stack: StackConfig, base: StackConfig | None) -> list[Download]:
    """The checkpoints `stack` must fetch, each with its Job name (see the module docstring)."""
    cached = set(checkpoints_to_download(base)) if base is not None else set()
    out = []
    for repo, revision in checkpoints_to_download(stack):
        if (repo, revision) in cached:
            continue
        if base is None and (repo, revision) == (stack.model.id, stack.model.revision):
            name = DOWNLOAD_JOB
        else:
            name = download_job_name(repo, revision, stack.name)
        out.append(Download(name, repo, revision))
    return out


def download_job(download: Download, namespace: str, *, stack_name: str, timeout_minutes: int,
                 affinity: dict[str, Any] | None) -> dict[str, Any]:
    """The Job of one planned download, labelled with its stack and annotated with what it
    fetches (repo names hold '/', which label values do not allow)."""
    job = model_download_job(namespace, model_id=download.repo, revision=download.revision,
                             timeout_minutes=timeout_minutes, affinity=affinity)
    meta = job["metadata"]
    meta["name"] = download.job_name
    meta["labels"][STACK_LABEL] = _slug(stack_name)[:MAX_JOB_NAME].strip("-")
    meta["annotations"] = {CHECKPOINT_ANNOTATION: f"{download.repo}@{download.revision or 'main'}"}
    return job
