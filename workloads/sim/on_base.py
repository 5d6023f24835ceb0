"""Stacks that attach to a base, simulated without a run record (a thin shell): what `stacks
explore` gives its search (stacks/explore/search.py `Simulator`), one object per explore.

A variant names its base's node groups, so its workers' timing tables are built with the base
(stacks/predict/mocker_table.py `build(stack, folder, base)`; workloads/targets/mocker_timings
`resolve` sees only the stack). A table depends only on (model, role, GPU, TP), so it is built
from a stand-in of the stack (one replica per role, the sweep's first quick step only: one
AIConfigurator estimate for the versions) and kept per (model, roles' groups and TPs): the
tables of a hundred candidates cost a few builds. The model folder, its chat template and the
engine's version are made once; each candidate's workers are then the mocker command lines of
workloads/sim/engine_setup.py with pre-flight's KV blocks. Every step goes through
workloads/sim/plan_sim.py on one replay process for the whole explore.

`fingerprint` is what decides a result: each role's mocker command line (the model folder's
path and the table's path replaced by the model id and the table's sha256), its worker count,
the router, the block size, ai-dynamo's version and the code that turns a step into replays
(workloads/sim/*.py and the step preparation it calls).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.predict.mocker_table import MockerTable, build, make_missing
from stacks.predict.mocker_table import plan as plan_tables
from stacks.predict.predictor import PredictorUnavailable, cache_key, predictor_python
from workloads.model_folder import build_model_folder
from workloads.sim.build import chat_template, sim_setup
from workloads.sim.calibrate import CALIBRATED, Calibration
from workloads.sim.engine_setup import Unsimulated
from workloads.sim.plan_sim import simulate_plan
from workloads.sim.prompt_layout import ChatTemplate
from workloads.sim.replay import Replayer
from workloads.sim.target import SimTarget, label
from workloads.targets.local import TargetError, dynamo_version, engine_python
from workloads.targets.mocker_timings import from_tables, scaled

WORKLOADS = Path(__file__).resolve().parents[1]
# What turns a stack's step into replays, besides the engine: hashed into every fingerprint.
CODE = [*sorted((WORKLOADS / "sim").glob("*.py")),
        *(WORKLOADS / f for f in ("steps.py", "datasets.py", "step_exec.py", "step_warmup.py",
                                  "trace_replay.py"))]


def code_hash() -> str:
    h = hashlib.sha256()
    for path in CODE:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@dataclass
class Prepared:
    fingerprint: str
    label: str
    engine: str
    timings: tuple[str, ...]
    tables: dict[str, Path]
    records: dict[str, dict]
    target: SimTarget
    template: ChatTemplate


@dataclass
class BaseSimulator:
    base: StackConfig
    scale: Scale
    hf_home: Path
    tables_dir: Path
    replayer: Replayer = field(default_factory=Replayer)
    _tables: dict[str, list[MockerTable] | str] = field(default_factory=dict)
    _models: dict[str, tuple[Path, ChatTemplate]] = field(default_factory=dict)
    _version: str | None = None
    _code: str = field(default_factory=code_hash)
    # `stacks explore --calibrate`: factors fitted to measured runs (workloads/sim/calibrate.py),
    # applied to every table whose (GPU, TP, role, model) they cover
    calibration: Calibration | None = None
    _lanes: list[Replayer] = field(default_factory=list)
    _free: list[Replayer] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_base(cls, base: StackConfig, scale: Scale) -> BaseSimulator:
        """The project's model folder and timing-table folders (the runner's and the local
        target's defaults)."""
        from workloads.model_folder import default_hf_home
        from workloads.targets.mocker_timings import tables_dir
        return cls(base, scale, default_hf_home(), tables_dir())

    def _model(self, stack: StackConfig) -> tuple[Path, ChatTemplate]:
        if stack.model.id not in self._models:
            folder = build_model_folder(self.hf_home, stack.model.id, stack.model.arch)
            self._models[stack.model.id] = (folder.snapshot, chat_template(folder.snapshot))
        return self._models[stack.model.id]

    def version(self) -> str:
        if self._version is None:
            self._version = dynamo_version(engine_python())
        return self._version

    def _key(self, stack: StackConfig) -> str:
        assert stack.serving is not None
        return json.dumps([stack.model.id, [(w.role.value, w.node_group, w.tensor_parallel_size)
                                            for w in stack.serving.workers]])

    @staticmethod
    def _stand_in(stack: StackConfig) -> StackConfig:
        """One replica per role, the sweep's first quick step only: what decides the tables."""
        assert stack.serving is not None
        workers = [w.model_copy(update={"replicas": 1}) for w in stack.serving.workers]
        return stack.model_copy(update={
            "serving": stack.serving.model_copy(update={"workers": workers}),
            "workloads": stack.workloads.model_copy(update={
                **{n: getattr(stack.workloads, n).model_copy(update={"enabled": False})
                   for n in stack.workloads.enabled() if n != "concurrency_sweep"},
                "concurrency_sweep": stack.workloads.concurrency_sweep.model_copy(
                    update={"quick": {"concurrencies": [1]}})})})

    def make_tables(self, stacks: list[StackConfig]) -> None:
        """Makes every table these stacks need and none is kept yet, spread over one runner
        per core (stacks/predict/mocker_table.py `make_missing`): a hundred candidates share a
        few dozen tables, and a runner's start costs more than a table."""
        planned, seen = [], set()
        for stack in stacks:
            key = self._key(stack)
            if key in seen or key in self._tables or self._unavailable(key, stack).exists():
                continue
            seen.add(key)
            try:
                planned += plan_tables(self._stand_in(stack), self.tables_dir, self.base).tables
            except PredictorUnavailable:
                continue            # tables() says why, per stack
        make_missing(planned)       # a table that fails is asked again by its stack's build,
                                    # which says which and why

    def tables(self, stack: StackConfig) -> list[MockerTable] | str:
        """The stack's timing tables (built once per model and roles' groups and TPs), or why
        there are none."""
        key = self._key(stack)
        if key not in self._tables and (known := self._unavailable(key, stack)).exists():
            self._tables[key] = json.loads(known.read_text())["reason"]
        if key not in self._tables:
            try:
                built = build(self._stand_in(stack), self.tables_dir, self.base)
                self._tables[key] = (self._calibrated(built) if built else
                                     "AIConfigurator's database cannot predict it")
            except PredictorUnavailable as exc:
                if predictor_python() is None:
                    raise       # no table can be built at all: the caller says the fix
                self._tables[key] = f"no timing table: {exc}"
                known = self._unavailable(key, stack)
                known.parent.mkdir(parents=True, exist_ok=True)
                known.write_text(json.dumps({"reason": self._tables[key]}))
        return self._tables[key]

    def _calibrated(self, tables: list[MockerTable]) -> list[MockerTable]:
        """The tables scaled by the calibration's factors where it has them (the record of a
        scaled table names its source, the factors and the runs: table_scale.py)."""
        if self.calibration is None:
            return tables
        timings = from_tables(tables)
        factors = self.calibration.scales(timings)
        if not factors:
            return tables
        done = scaled(timings, factors, self.tables_dir / CALIBRATED, self.calibration.runs)
        return [MockerTable(t["role"], done.tables[t["role"]],
                            {k: v for k, v in t.items() if k != "role"})
                for t in done.record["tables"]]

    def _unavailable(self, key: str, stack: StackConfig) -> Path:
        """Where a table the database cannot make is remembered (a failed query is not kept
        by the predictor's cache, and asking again costs a runner start): by the roles, the
        base's groups, and the predictor's pins and runner (stacks/predict/predictor.py)."""
        query = {"op": "explore-unavailable", "roles": key,
                 "groups": [g.model_dump(mode="json") for g in self.base.cluster.node_groups]}
        return self.tables_dir / f"unavailable-{cache_key(query, [])[:16]}.json"

    def prepare(self, stack: StackConfig, kv_tokens: list[int]) -> Prepared | str:
        tables = self.tables(stack)
        if isinstance(tables, str):
            return tables
        snapshot, template = self._model(stack)
        timings = from_tables(tables)
        paths = {t.role: t.path for t in tables}
        try:   # the engine the stack's workers would run on the base's nodes (build.sim_setup)
            sim = sim_setup(stack, kv_tokens, str(snapshot),
                            {role: str(p) for role, p in paths.items()}, self.base)
        except (Unsimulated, TargetError) as exc:
            return str(exc)
        target = SimTarget(stack, sim, timings.record, self.version(), replayer=self.replayer)
        sha = {str(t.path): t.record["sha256"] for t in tables}
        roles = [(r.role, [sha.get(a, stack.model.id if a == str(snapshot) else a)
                           for a in r.argv], r.count) for r in sim.roles]
        fingerprint = hashlib.sha256(json.dumps(
            [roles, sim.router_mode, sim.block_size, self.version(), self._code],
            sort_keys=True).encode()).hexdigest()
        systems = tuple(dict.fromkeys(
            f"AIConfigurator {t.record['aiconfigurator']} {t.record['system']}/"
            f"{t.record['backend']} {t.record['backend_version']}" for t in tables))
        return Prepared(fingerprint, label(timings.record, self.version()),
                        f"DynoSim (dynamo.replay, ai-dynamo {self.version()})", systems, paths,
                        {t.role: {"role": t.role, **t.record} for t in tables}, target, template)

    def run(self, prepared: Any, stack: StackConfig, workload: str) -> list[dict[str, Any]]:
        """The workload's steps; a sweep step (a bracketing probe) is replayed once even under
        the KV router (its figures are the first run's either way; the other runs only show
        the spread of the router's random ties)."""
        runs = 1 if workload == "concurrency_sweep" else None
        replayer = self._take()
        try:
            figs = simulate_plan(stack, self.scale, prepared.target, prepared.template,
                                 only=[workload], replayer=replayer, runs=runs)
        finally:
            self._give(replayer)
        return [f.as_dict() for f in figs]

    def _take(self) -> Replayer:
        """A replay process no other thread is using: the explore's own first, one more per
        lane searching at once (stacks/explore/lanes.py), each kept for the whole explore."""
        with self._lock:
            if self._free is None:
                self._free = [self.replayer]
            if not self._free:
                self._lanes.append(Replayer())
                return self._lanes[-1]
            return self._free.pop()

    def _give(self, replayer: Replayer) -> None:
        with self._lock:
            assert self._free is not None
            self._free.append(replayer)

    def close(self) -> None:
        self.replayer.close()
        for r in self._lanes:
            r.close()
