"""A trust-remote-code model's pods write transformers' module cache (dynamo.md F1, F7).

transformers copies the model's .py files into HF_MODULES_CACHE (default $HF_HOME/modules) and
imports them from there (transformers/utils/hub.py, dynamic_module_utils.py): the frontend's
model cache is mounted read-only (EROFS), and the workers' is the shared EFS claim, where pods
starting together race (the copy's lock is process-local). Each pod gets its own emptyDir."""

from __future__ import annotations

import posixpath
from typing import Any

import pytest
from graph_stacks import env_of, graph_of, main, serving_stack_names
from k8s_validation import validate_pod_templates

from stacks.config.loader import load_stack
from stacks.conventions.k8s_names import HF_HOME

REMOTE_CODE = [n for n in serving_stack_names() if load_stack(n).model.trust_remote_code]


def _mount_of(pod: dict[str, Any], container: dict[str, Any], path: str) -> tuple[dict, dict]:
    """The (volumeMount, volume) holding `path`: the deepest mount that contains it."""
    mounts = [m for m in container.get("volumeMounts", [])
              if posixpath.commonpath([m["mountPath"], path]) == m["mountPath"]]
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return mount, volume


def test_the_motif_stacks_load_remote_code() -> None:
    assert {"agg-b200-motif3", "disagg-b200-motif3", "baseline-b200-motif3"} <= set(REMOTE_CODE)


@pytest.mark.parametrize("name", [n for n in REMOTE_CODE if load_stack(n).target != "local"])
def test_every_remote_code_pod_writes_its_modules_to_its_own_writable_volume(name: str) -> None:
    graph = graph_of(name)
    for comp in graph["spec"]["components"]:
        pod = comp["podTemplate"]["spec"]
        container = main(comp)
        assert "--trust-remote-code" in container["args"]
        env = env_of(container)
        modules = env.get("HF_MODULES_CACHE", posixpath.join(env["HF_HOME"], "modules"))
        mount, volume = _mount_of(pod, container, modules)
        assert not mount.get("readOnly"), (comp["name"], mount)
        # pod-local: not the shared model-cache claim
        assert "emptyDir" in volume, (comp["name"], volume)
        assert not modules.startswith(HF_HOME)
    validate_pod_templates(graph)


def test_models_without_remote_code_get_no_module_cache() -> None:
    graph = graph_of("agg-a100")
    for comp in graph["spec"]["components"]:
        assert "HF_MODULES_CACHE" not in env_of(main(comp))
        assert [v["name"] for v in comp["podTemplate"]["spec"]["volumes"]] == ["model-cache"]
