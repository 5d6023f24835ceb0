"""A campaign on the local Dynamo engine: one engine at a time, kept mockers for real.

Deploying a slot starts the frontend and mockers (workloads/targets/local.py); a slot that
adopts its predecessor's workers keeps the running mockers and only replaces the frontend
(`LocalTarget.swap_frontend`, refused unless the mockers' command lines are byte-identical).
The runner gets the running target and neither starts nor stops it; tearing down stops every
process unless the workers are handed over. There are no node groups to scale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from stacks.config.workload_config import Scale
from stacks.preflight.run import PreflightReport
from workloads.model_folder import build_model_folder
from workloads.runner import RunOptions, RunResult, run
from workloads.targets.local import (
    LocalTarget,
    engine_python,
    mocker_argv,
    mocker_blocks,
    worker_specs,
)


class LocalPlatform:
    kind = "local"

    def __init__(self, reports: dict[str, PreflightReport], *, run_id: str, runs_dir: Path,
                 stacks_dir: Path, hf_home: Path, workdir: Path, scale: Scale,
                 show_progress: bool, console: Console):
        self.reports, self.run_id, self.runs_dir = reports, run_id, runs_dir
        self.stacks_dir, self.hf_home, self.workdir = stacks_dir, hf_home, workdir
        self.workload_scale, self.show_progress, self.console = scale, show_progress, console
        self.target: LocalTarget | None = None

    def _capacity(self, name: str) -> list[int]:
        return [m.kv_capacity_tokens for m in self.reports[name].memory]

    def argvs(self, stack) -> list[list[str]]:
        """The mockers `stack` would start (what kept workers are compared on)."""
        model = build_model_folder(self.hf_home, stack.model.id, stack.model.arch)
        blocks = mocker_blocks(stack, self._capacity(stack.name))
        return [mocker_argv(engine_python(), stack, spec, model.snapshot)
                for spec in worker_specs(stack, blocks)]

    # --- the campaign's Platform ---------------------------------------------------------
    def prepare(self, sizes: dict[str, int]) -> None:
        return None

    def scale(self, sizes: dict[str, int]) -> None:
        return None

    def nodes_up(self, group: str) -> int | None:
        return None

    def is_deployed(self, slot: dict) -> bool:
        t = self.target
        return t is not None and t.stack.name == slot["name"] and not t.problems()

    def can_adopt(self, slot: dict) -> bool:
        t = self.target
        return t is not None and t.stack.name == slot["kept_from"] and not t.problems()

    def deploy(self, slot: dict, adopt: bool) -> dict:
        stack = self.reports[slot["name"]].stack
        if adopt:
            # the engine adopts only when can_adopt() said yes, which needs a running target
            assert self.target is not None
            return {"swap": self.target.swap_frontend(stack)}
        if self.target is not None:
            self.target.stop()
        model = build_model_folder(self.hf_home, stack.model.id, stack.model.arch)
        self.target = LocalTarget(stack, self.workdir / slot["name"], model=model,
                                  kv_capacity_tokens=self._capacity(stack.name))
        self.target.start()
        return {"started": {n: p.pid for n, p in self.target.workers.items()}}

    def workers(self, slot: dict) -> dict[str, str]:
        if self.target is None:
            return {}
        return {n: str(p.pid) for n, p in self.target.workers.items() if p.alive()}

    def run(self, slot: dict, epoch: int, info: dict, clock: Any) -> RunResult:
        return run(RunOptions(stack=slot["name"], scale=self.workload_scale, run_id=self.run_id,
                              runs_dir=self.runs_dir, stacks_dir=self.stacks_dir,
                              hf_home=self.hf_home, show_progress=self.show_progress,
                              campaign=info, prompt_epoch=epoch, only=slot.get("only"),
                              target=self.target),
                   self.console)

    def teardown(self, slot: dict, hand_over: bool) -> dict:
        if hand_over or self.target is None:
            return {"kept": hand_over}
        self.target.stop()
        self.target = None
        return {"stopped": True}

    def close(self) -> None:
        if self.target is not None:
            self.target.stop()
            self.target = None
