"""The local engine's command lines (pure): `python -m dynamo.frontend` and one
`python -m dynamo.mocker` per worker replica, every flag with the stack field it came from.

workloads.targets.local starts the processes with `tokens(...)` of these; pre-flight
(stacks.preflight.engine_parse) runs the same lists through Dynamo 1.6.1's own frontend and
mocker parsers (dynamo/frontend/main.py parse_args, dynamo/mocker/args.py parse_args(argv);
ai-dynamo 1.6.1), so a flag the local engine would refuse at start is refused before it.
A worker group's extraArgs go to its mockers, the frontend's extraArgs to the frontend; they come
last, so they win. What only the runner knows (the ports, the model snapshot's folder, pre-flight's
KV blocks when numGpuBlocks is unset, the timing table it builds) is a parameter here, and a
stand-in of the same type when pre-flight parses (local_frontend_argv, local_mocker_argvs).
"""

from __future__ import annotations

from stacks.config.schema import Role, StackConfig, Topology
from stacks.engine_argv.argv import FIXED, Arg

LOOPBACK = "127.0.0.1"
# pre-flight's stand-ins for what the runner decides when it starts the processes
STAND_IN_PORT = 8000
STAND_IN_MODEL_PATH = "/models/snapshot"
STAND_IN_BLOCKS = 16


def _extra(field: str, extra_args: list[str]) -> list[Arg]:
    return [Arg(a, f"{field}.extraArgs[{j}]") for j, a in enumerate(extra_args)]


def frontend_args(stack: StackConfig, port: int) -> list[Arg]:
    """The local frontend's arguments on `port`, routing with the stack's router mode."""
    s = stack.serving
    assert s is not None
    out = [Arg(t, FIXED) for t in ("--http-host", LOOPBACK, "--http-port", str(port))]
    out += [Arg("--router-mode", "serving.router"), Arg(s.router.value, "serving.router")]
    if s.topology == Topology.DISAGGREGATED:
        out.append(Arg("--enforce-disagg", "serving.topology"))  # never aggregated silently
    return out + _extra("serving.frontend", s.frontend.extra_args)


def mocker_args(stack: StackConfig, group: int, blocks: int, model_path: str,
                table: str | None) -> list[Arg]:
    """A mocker's arguments for worker group `group` with `blocks` KV blocks; `table`: the
    step-timing table (npz) it runs on, None for the mocker's generic timings."""
    s = stack.serving
    assert s is not None
    w = s.workers[group]
    f = f"serving.workers[{group}]"
    blocks_field = ("serving.mocker.numGpuBlocks" if s.mocker.num_gpu_blocks is not None
                    else FIXED)
    pairs = [("--model-path", model_path, FIXED),
             ("--model-name", stack.model.name,
              "model.servedName" if stack.model.served_name else "model.id"),
             ("--speedup-ratio", str(s.mocker.speedup_ratio), "serving.mocker.speedupRatio"),
             ("--block-size", str(s.mocker.block_size), "serving.mocker.blockSize"),
             ("--num-gpu-blocks-override", str(blocks), blocks_field),
             ("--max-model-len", str(w.max_model_len), f"{f}.maxModelLen")]
    if w.role != Role.WORKER:
        pairs.append(("--disaggregation-mode", w.role.value, f"{f}.role"))
    if table is not None:
        # the step timings only: KV capacity stays --num-gpu-blocks-override's (Dynamo 1.6.1
        # lib/mocker/src/common/perf_model.rs PerfModel::from_npz reads the five timing arrays)
        pairs.append(("--planner-profile-data", table, FIXED))
    out = [Arg(tok, field) for flag, value, field in pairs for tok in (flag, value)]
    if not s.prefix_caching:
        out.append(Arg("--no-enable-prefix-caching", "serving.prefixCaching"))
    return out + _extra(f, w.extra_args)


def local_frontend_argv(stack: StackConfig) -> list[Arg]:
    """The frontend's arguments as pre-flight parses them (the port a stand-in)."""
    return frontend_args(stack, STAND_IN_PORT)


def local_mocker_argvs(stack: StackConfig) -> list[list[Arg]]:
    """One mocker command line per worker group as pre-flight parses them (a group's replicas
    differ only in the runner's ports): the model folder and, without numGpuBlocks, the KV
    blocks are stand-ins; without the timing table (the runner's own file)."""
    s = stack.serving
    assert s is not None
    blocks = s.mocker.num_gpu_blocks or STAND_IN_BLOCKS
    return [mocker_args(stack, g, blocks, STAND_IN_MODEL_PATH, None)
            for g in range(len(s.workers))]
