"""A stack's workers and router as DynoSim runs them (pure).

Each role's workers are simulated on the command line a live mocker of the stack runs
(stacks/engine_argv/local.py `mocker_args`, the same function the local target starts its
mockers with): KV blocks from pre-flight's memory fit, the block size, the context limit, the
timing table for the GPU and TP the role imitates, and the engine settings below, so the live
rehearsal and the simulation of a local stack run one configuration. The replay child turns the
command line into the engine's configuration with the mocker's own code (replay_child.py).

DynoSim runs one engine configuration per role (Dynamo 1.6.1 dynamo.replay: `extra_engine_args`,
or `prefill_engine_args` + `decode_engine_args`, with a worker count each), and routes with
round-robin or its KV router only: a stack with two groups of one role that differ, or the
`random` router, is refused with the reason (`Unsimulated`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stacks.config.schema import Role, RouterMode, StackConfig, Topology
from stacks.engine_argv.argv import tokens
from stacks.engine_argv.local import mocker_args

ROUTER_MODES = {RouterMode.ROUND_ROBIN: "round_robin", RouterMode.KV: "kv_router"}


class Unsimulated(ValueError):
    """DynoSim cannot run this stack as it is: the message says why and what would."""


@dataclass(frozen=True)
class RoleSetup:
    role: str                  # "worker" | "prefill" | "decode"
    argv: list[str]            # the mocker command line (without the interpreter)
    count: int                 # workers of the role
    group: int                 # the first worker group of the role (serving.workers index)


@dataclass(frozen=True)
class SimSetup:
    roles: tuple[RoleSetup, ...]
    router_mode: str
    block_size: int
    notes: list[str] = field(default_factory=list)

    def job_roles(self) -> dict[str, dict]:
        return {r.role: {"argv": r.argv, "count": r.count} for r in self.roles}


def setup(stack: StackConfig, blocks: list[int], model_path: str,
          tables: dict[str, str], extra: dict[str, list[str]] | None = None) -> SimSetup:
    """The simulated workers of `stack`: `blocks` KV blocks per worker group (pre-flight's fit,
    as the local target sizes its mockers), `tables` the timing table per role (none: the
    mocker's generic timings), `extra` more mocker flags per role (transfer, offload)."""
    s = stack.serving
    if s is None:
        raise Unsimulated(f"stack '{stack.name}' serves nothing: nothing to simulate")
    if s.router not in ROUTER_MODES:
        raise Unsimulated(f"serving.router {s.router.value}: DynoSim routes round-robin or "
                          "with its KV router only (Dynamo 1.6.1 dynamo.replay router_mode); "
                          "simulate the stack with router round-robin or kv")
    roles = [Role.WORKER] if s.topology == Topology.AGGREGATED else [Role.PREFILL, Role.DECODE]
    out = []
    for role in roles:
        groups = [g for g, w in enumerate(s.workers) if w.role == role]
        argvs = {tuple(tokens(mocker_args(stack, g, blocks[g], model_path,
                                          tables.get(role.value)))) for g in groups}
        if len(argvs) != 1:
            raise Unsimulated(f"serving.workers: the {role.value} workers are groups with "
                              "different settings; DynoSim runs one engine configuration per "
                              "role (Dynamo 1.6.1 dynamo.replay): simulate one group at a time")
        argv = [*argvs.pop(), *(extra or {}).get(role.value, [])]
        out.append(RoleSetup(role.value, argv, sum(s.workers[g].replicas for g in groups),
                             groups[0]))
    return SimSetup(tuple(out), ROUTER_MODES[s.router], s.mocker.block_size)
