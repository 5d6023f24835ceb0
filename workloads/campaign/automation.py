"""Pulumi's Automation API (the `pulumi.automation` module of the pinned SDK 3.272.0): the only
place the campaign talks to Pulumi.

A `PulumiStacks` opens the project's stacks as `pulumi up` would: the program is this
checkout's `__main__.py` (a local program: `create_or_select_stack(stack_name, work_dir=<repo>)`),
its stack files are `stacks/Pulumi.<stack>.yaml` (Pulumi.yaml's stackConfigDir), and the state
backend is a local one unless the caller names another (`PULUMI_BACKEND_URL`, default
`file://~`, Pulumi's own `pulumi login --local`). A stack's config is set with
`Stack.set_config` (which writes the stack file, as `pulumi config set` does) and removed with
`Stack.remove_config`; `Stack.up` and `Stack.destroy` deploy and remove it, `UpResult.outputs`
gives the outputs (OutputValue.value; secrets included, as `--show-secrets` would).

The Automation API drives the Pulumi CLI, which is not installed here: the tests replace
`PulumiStacks.select` with a fake workspace at exactly this boundary (set_config, get_config,
remove_config, up, destroy, outputs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from stacks.config.stack_file import PROJECT

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BACKEND = "file://~"


class StackHandle(Protocol):
    """What the campaign uses of `pulumi.automation.Stack`."""

    def set_config(self, key: str, value: Any, *, path: bool = False) -> None: ...
    def remove_config(self, key: str, *, path: bool = False) -> None: ...
    def up(self, *, on_output: Callable[[str], Any] | None = None) -> Any: ...
    def destroy(self, *, on_output: Callable[[str], Any] | None = None) -> Any: ...
    def outputs(self) -> Mapping[str, Any]: ...


class PulumiError(RuntimeError):
    """A Pulumi operation failed (its stderr tail in the message)."""


def config_value(value: Any):
    """A ConfigValue of `value` (JSON text for structured values, as Pulumi passes them)."""
    from pulumi import automation as auto

    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return auto.ConfigValue(value=text, secret=False)


def plain_outputs(outputs: dict) -> dict:
    """OutputMap -> {name: value} (what `pulumi stack output --json --show-secrets` prints)."""
    return {k: getattr(v, "value", v) for k, v in outputs.items()}


class PulumiStacks:
    def __init__(self, backend_url: str | None = None, work_dir: Path = REPO,
                 on_output: Callable[[str], None] | None = None):
        self.backend_url = backend_url or os.environ.get("PULUMI_BACKEND_URL") \
            or DEFAULT_BACKEND
        self.work_dir = work_dir
        self.on_output = on_output

    def check_ready(self) -> list[str]:
        """What keeps the Automation API from running here (each with its fix)."""
        import shutil

        problems = []
        if shutil.which("pulumi") is None:
            problems.append("the Pulumi CLI is not on PATH (the Automation API drives it): "
                            "install it (https://www.pulumi.com/docs/iac/download-install/)")
        if self.backend_url.startswith("file://") and not (
                os.environ.get("PULUMI_CONFIG_PASSPHRASE")
                or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")):
            problems.append("a local backend encrypts secrets with a passphrase: set "
                            "PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE)")
        return problems

    def select(self, name: str) -> StackHandle:
        from pulumi import automation as auto

        opts = auto.LocalWorkspaceOptions(
            work_dir=str(self.work_dir),
            env_vars={"PULUMI_BACKEND_URL": self.backend_url})
        return auto.create_or_select_stack(stack_name=name, work_dir=str(self.work_dir),
                                           opts=opts)

    # --- what the campaign does, each a few Automation API calls ----------------------------
    def set_key(self, stack: StackHandle, key: str, value: Any) -> None:
        stack.set_config(f"{PROJECT}:{key}", config_value(value))

    def remove_key(self, stack: StackHandle, key: str) -> None:
        stack.remove_config(f"{PROJECT}:{key}")

    def up(self, stack: StackHandle) -> dict:
        try:
            result = stack.up(on_output=self.on_output)
        except Exception as exc:  # noqa: BLE001 - auto.CommandError and friends
            raise PulumiError(f"pulumi up failed: {str(exc)[-800:]}") from exc
        return plain_outputs(result.outputs)

    def destroy(self, stack: StackHandle) -> None:
        try:
            stack.destroy(on_output=self.on_output)
        except Exception as exc:  # noqa: BLE001
            raise PulumiError(f"pulumi destroy failed: {str(exc)[-800:]}") from exc
