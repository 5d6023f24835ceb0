"""A stack's workers and router as DynoSim runs them (pure).

Each role's workers are simulated on one mocker command line, which the replay child turns into
the engine's configuration with the mocker's own code (replay_child.py):

- A local stack runs the command line its live mockers run (stacks/engine_argv/local.py
  `mocker_args`, the function the local target starts them with: KV blocks from pre-flight's
  memory fit over serving.mocker.blockSize, the context limit, the timing table, and for a
  disaggregated stack the KV transfer of the hardware it imitates), so the live rehearsal and
  its simulation run one configuration.
- An aws stack runs what its vLLM workers would run (`cluster_argv`): each setting read from the
  worker's real command line (stacks/engine_argv/argv.py `worker_argv`, what the graph starts),
  and where it is unset vLLM 0.31.0's own default for the GPU (stacks/catalog/vllm_defaults.py):
  the KV block size, KV blocks = pre-flight's capacity / that block size, the batch limits,
  chunked prefill and prefix caching; the KV transfer of the path its prefill and decode pods
  use (stacks/catalog/kv_transfer.py, through local.py `kv_transfer_args`); host KV offload
  where the stack has it (`host_offload_args`).

What the simulation departs from is said in SimSetup.notes, which the run record keeps
(target.py describe()). DynoSim runs one engine configuration per role (Dynamo 1.6.1
dynamo.replay: `extra_engine_args`, or `prefill_engine_args` + `decode_engine_args`, with a
worker count each), and routes with round-robin or its KV router only: a stack with two groups
of one role that differ, the `random` router, or an engine setting the catalogue cannot give is
refused with the reason (`Unsimulated`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from stacks.catalog.instances import INSTANCE_TYPES, Gpu
from stacks.catalog.interconnects import GPU_LINKS
from stacks.catalog.kv_transfer import UncataloguedLink
from stacks.catalog.model_arch import AttentionKind
from stacks.catalog.vllm_defaults import (
    CHUNKED_PREFILL_DEFAULT,
    DYNAMO_VERSION,
    PREFIX_CACHING_DEFAULT,
    USAGE_CONTEXT,
    VLLM_VERSION,
    default_block_size,
    resolve_batch_limits,
)
from stacks.config.schema import ClusterConfig, Role, RouterMode, StackConfig, Topology
from stacks.conventions.kv_path import describe
from stacks.engine_argv.argv import tokens, worker_argv
from stacks.engine_argv.kv import offloads, uses_kvbm
from stacks.engine_argv.local import (
    kv_bytes_per_token,
    kv_transfer_args,
    mocker_args,
    transfer_plan,
)
from stacks.preflight.engine_releases import image_tag, parser_release
from stacks.sizing.memory import GIB

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


def _checked(stack: StackConfig):
    s = stack.serving
    if s is None:
        raise Unsimulated(f"stack '{stack.name}' serves nothing: nothing to simulate")
    if s.router not in ROUTER_MODES:
        raise Unsimulated(f"serving.router {s.router.value}: DynoSim routes round-robin or "
                          "with its KV router only (Dynamo 1.6.1 dynamo.replay router_mode); "
                          "simulate the stack with router round-robin or kv")
    return s


def _roles(stack: StackConfig, argv_of: Callable[[int], list[str]]) -> list[RoleSetup]:
    """One mocker command line per role: every group of a role must run the same one."""
    s = _checked(stack)
    roles = [Role.WORKER] if s.topology == Topology.AGGREGATED else [Role.PREFILL, Role.DECODE]
    out = []
    for role in roles:
        groups = [g for g, w in enumerate(s.workers) if w.role == role]
        argvs = {tuple(argv_of(g)) for g in groups}
        if len(argvs) != 1:
            raise Unsimulated(f"serving.workers: the {role.value} workers are groups with "
                              "different settings; DynoSim runs one engine configuration per "
                              "role (Dynamo 1.6.1 dynamo.replay): simulate one group at a time")
        out.append(RoleSetup(role.value, list(argvs.pop()),
                             sum(s.workers[g].replicas for g in groups), groups[0]))
    return out


def setup(stack: StackConfig, blocks: list[int], model_path: str,
          tables: dict[str, str]) -> SimSetup:
    """A local stack's simulated workers: its live mockers' own command lines, `blocks` KV
    blocks per worker group (workloads/targets/local.py mocker_blocks), `tables` the timing
    table per role (none: the mocker's generic timings)."""
    s = _checked(stack)
    roles = _roles(stack, lambda g: tokens(mocker_args(stack, g, blocks[g], model_path,
                                                       tables.get(s.workers[g].role.value))))
    notes = [] if s.topology == Topology.AGGREGATED else _transfer_notes(stack, None, None)
    return SimSetup(tuple(roles), ROUTER_MODES[s.router], s.mocker.block_size, notes)


# --- an aws stack: what its vLLM workers would run ------------------------------------------

def flag_value(argv: list[str], name: str) -> str | None:
    """The last value of `--name V` / `--name=V` (vLLM's parser also takes `--name_with_
    underscores`; abbreviations are refused by pre-flight's parse), None when absent."""
    value = None
    for i, tok in enumerate(argv):
        key, eq, inline = tok.partition("=")
        if key.replace("_", "-") != name:
            continue
        value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def flag_switch(argv: list[str], name: str) -> bool | None:
    """`--name` / `--no-name` (argparse BooleanOptionalAction): the last one wins."""
    found = None
    for tok in argv:
        key = tok.replace("_", "-")
        if key in (name, f"--no-{name[2:]}"):
            found = key == name
    return found


@dataclass(frozen=True)
class EngineFacts:
    """What one worker group's vLLM engine runs with, and where each figure came from."""
    gpu: Gpu
    block_size: int
    blocks: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    prefix_caching: bool
    chunked_prefill: bool
    note: str


def engine_facts(stack: StackConfig, group: int, cluster: ClusterConfig,
                 kv_capacity_tokens: int) -> EngineFacts:
    s = _checked(stack)
    w = s.workers[group]
    inst = INSTANCE_TYPES[next(g for g in cluster.node_groups
                               if g.name == w.node_group).instance_type]
    assert inst.gpu is not None
    real = tokens(worker_argv(stack, group, rdma=inst.efa_interfaces > 0))
    where = f"serving.workers[{group}] ({w.role.value})"
    arch = stack.model.arch
    if arch.attention_kind == AttentionKind.HYBRID_LINEAR:
        raise Unsimulated(f"{where}: {stack.model.id} is a hybrid linear-attention model; vLLM "
                          f"{VLLM_VERSION} sizes its KV block to the recurrent state's page "
                          "(vllm/platforms/interface.py _align_hybrid_block_size) and DynoSim "
                          "models no recurrent state: it is not simulated")
    given = flag_value(real, "--block-size")
    block = int(given) if given is not None else default_block_size(arch)
    if block is None:
        raise Unsimulated(f"{where}: vLLM {VLLM_VERSION} picks the KV block size of "
                          f"{stack.model.id}'s attention backend at start (MLA or head size "
                          f"{arch.head_dim}: stacks/catalog/vllm_defaults.py); set "
                          "serving.blockSize to the one it runs")
    max_len = int(flag_value(real, "--max-model-len") or w.max_model_len)
    chunked = flag_switch(real, "--enable-chunked-prefill")
    chunked = CHUNKED_PREFILL_DEFAULT if chunked is None else chunked
    prefix = flag_switch(real, "--enable-prefix-caching")
    prefix = PREFIX_CACHING_DEFAULT if prefix is None else prefix
    seqs, batched = flag_value(real, "--max-num-seqs"), flag_value(real, "--max-num-batched-tokens")
    limits = resolve_batch_limits(inst.gpu, max_num_seqs=None if seqs is None else int(seqs),
                                  max_num_batched_tokens=None if batched is None else int(batched),
                                  max_model_len=max_len, chunked_prefill=chunked,
                                  performance_mode=flag_value(real, "--performance-mode"))
    blocks = kv_capacity_tokens // block
    if blocks < 16:
        raise Unsimulated(f"{where}: pre-flight leaves {kv_capacity_tokens} KV tokens, "
                          f"{blocks} blocks of {block}: fix the memory fit")
    note = (f"{where} on {inst.name} ({inst.gpu.name}): block {block} "
            f"({'the command line' if given is not None else f'vLLM {VLLM_VERSION} default'}), "
            f"{blocks} KV blocks (pre-flight's {kv_capacity_tokens} tokens / {block}), "
            f"max_num_seqs {limits.max_num_seqs}, max_num_batched_tokens "
            f"{limits.max_num_batched_tokens} ({limits.rule}; usage context {USAGE_CONTEXT}, "
            f"Dynamo {DYNAMO_VERSION}), chunked prefill {'on' if chunked else 'off'}, prefix "
            f"caching {'on' if prefix else 'off'}")
    return EngineFacts(inst.gpu, block, blocks, max_len, limits.max_num_seqs,
                       limits.max_num_batched_tokens, prefix, chunked, note)


def host_offload_args(stack: StackConfig, group: int, facts: EngineFacts) -> tuple[list[str],
                                                                                 list[str]]:
    """The mocker's host (G2) offload for a group that offloads (stacks/engine_argv/kv.py
    `offloads`: aggregated and prefill workers): vLLM's OffloadingConnector sizes its CPU cache
    as cpu_bytes_to_use (cpuGb x 2**30: kv.py) over the whole worker's bytes per block, all TP
    ranks together (vllm 0.31.0 vllm/v1/kv_offload/cpu/spec.py: worker_kv_bytes_per_block x
    world_size), so host blocks = cpuGb x 2**30 / (block size x the worker's KV bytes per
    token); each rank copies over its own GPU's host link (interconnects.GPU_LINKS), one way
    each direction."""
    s = _checked(stack)
    w = s.workers[group]
    if not offloads(s, w.role):
        return [], []
    where = f"serving.workers[{group}] ({w.role.value})"
    if not facts.prefix_caching:
        raise Unsimulated(f"{where}: DynoSim's host offload needs prefix caching (ai-dynamo "
                          "1.6.1 dynamo/mocker/args.py --num-host-blocks); the worker runs "
                          "without it")
    per_token = kv_bytes_per_token(stack, group)
    host_blocks = int(s.kv_offload.cpu_gb * GIB // (facts.block_size * per_token))
    link = GPU_LINKS[facts.gpu.name]
    gb_s = w.tensor_parallel_size * link.host_gb_s_one_way
    notes = [f"{where} host KV offload: {host_blocks} host blocks (cpuGb {s.kv_offload.cpu_gb:g} "
             f"GiB / ({facts.block_size} tokens x {per_token} B)), {gb_s:g} GB/s each way "
             f"({w.tensor_parallel_size} x {link.host_link} at "
             f"{link.host_gb_s_one_way:g} GB/s one way: {link.source}; ASSUMED each GPU's own "
             "link at line rate, not shared with a PCIe-switch neighbour)"]
    if s.kv_offload.kind == "disk":
        notes.append(f"the disk tier (kvOffload diskGb {s.kv_offload.disk_gb:g}) is not "
                     "simulated: DynoSim models GPU <-> host offload only (its docs: multi-tier "
                     "offload is not modelled); only the CPU tier runs")
    if uses_kvbm(s):
        notes.append(f"Dynamo {s.dynamo_version} offloads with KVBM; DynoSim models vLLM's "
                     "native host offload in its place")
    return ["--num-host-blocks", str(host_blocks), "--host-offload-d2h-bandwidth-gbps",
            f"{gb_s:g}", "--host-offload-h2d-bandwidth-gbps", f"{gb_s:g}",
            "--kv-bytes-per-token", str(per_token)], notes


def cluster_argv(stack: StackConfig, group: int, kv_capacity_tokens: int, model_path: str,
                 table: str | None, cluster: ClusterConfig,
                 owner: StackConfig) -> tuple[list[str], EngineFacts, list[str]]:
    """The mocker command line that imitates worker group `group` of an aws stack, its engine
    facts and the notes on what it assumed."""
    s = _checked(stack)
    w = s.workers[group]
    facts = engine_facts(stack, group, cluster, kv_capacity_tokens)
    argv = ["--model-path", model_path, "--model-name", stack.model.name,
            "--block-size", str(facts.block_size),
            "--num-gpu-blocks-override", str(facts.blocks),
            "--max-model-len", str(facts.max_model_len),
            "--max-num-seqs", str(facts.max_num_seqs),
            "--max-num-batched-tokens", str(facts.max_num_batched_tokens),
            "--enable-prefix-caching" if facts.prefix_caching else "--no-enable-prefix-caching",
            ("--enable-chunked-prefill" if facts.chunked_prefill
             else "--no-enable-chunked-prefill")]
    if w.role != Role.WORKER:
        argv += ["--disaggregation-mode", w.role.value]
    if table is not None:
        argv += ["--planner-profile-data", table]
    try:
        argv += tokens(kv_transfer_args(stack, group, cluster, owner))
    except UncataloguedLink as exc:
        raise Unsimulated(f"serving.transfer: {exc}") from None
    offload, notes = host_offload_args(stack, group, facts)
    if offload and "--kv-bytes-per-token" in argv:   # the transfer's, the same figure
        at = offload.index("--kv-bytes-per-token")
        offload = offload[:at] + offload[at + 2:]
    return [*argv, *offload], facts, notes


def cluster_setup(stack: StackConfig, kv_capacity_tokens: list[int], model_path: str,
                  tables: dict[str, str], cluster: ClusterConfig,
                  owner: StackConfig) -> SimSetup:
    """An aws stack's simulated workers: each role on the engine its vLLM workers would run
    (`cluster_argv`), `kv_capacity_tokens` pre-flight's per worker group, `cluster` the nodes
    it runs on (an attached variant's: its base's, `owner` the base)."""
    s = _checked(stack)
    built = {g: cluster_argv(stack, g, kv_capacity_tokens[g], model_path,
                             tables.get(w.role.value), cluster, owner)
             for g, w in enumerate(s.workers)}
    roles = _roles(stack, lambda g: built[g][0])
    blocks = {built[r.group][1].block_size for r in roles}
    if len(blocks) != 1:
        raise Unsimulated("serving.workers: the roles run different KV block sizes "
                          f"({sorted(blocks)}); DynoSim hashes a trace with one block size")
    notes = [f"engine: vLLM {VLLM_VERSION} as Dynamo {DYNAMO_VERSION}'s worker runs it, each "
             "setting from the worker's command line, else vLLM's default"]
    release = parser_release(s.image, s.dynamo_version)
    if release.vllm != VLLM_VERSION or image_tag(s.image) != DYNAMO_VERSION:
        notes.append(f"image {s.image} runs vLLM {release.vllm} (Dynamo {release.dynamo} "
                     f"base): its defaults are taken as vLLM {VLLM_VERSION}'s, unverified for "
                     "that image")
    for r in roles:
        notes.append(built[r.group][1].note)
        notes += built[r.group][2]
    if s.topology == Topology.DISAGGREGATED:
        notes += _transfer_notes(stack, cluster, owner)
    return SimSetup(tuple(roles), ROUTER_MODES[s.router], blocks.pop(), notes)


def _transfer_notes(stack: StackConfig, cluster: ClusterConfig | None,
                    owner: StackConfig | None) -> list[str]:
    """What a disaggregated stack's KV transfer is charged, and what that assumed."""
    s = _checked(stack)
    prefill = next(g for g, w in enumerate(s.workers) if w.role == Role.PREFILL)
    try:
        plan = transfer_plan(stack, prefill, cluster, owner)
    except UncataloguedLink as exc:
        raise Unsimulated(f"serving.transfer: {exc}") from None
    if plan is None:
        raise Unsimulated(f"serving.transfer: no KV path ({describe(s)}), or a nodeGroup the "
                          "cluster lacks: pre-flight says which")
    moved = kv_bytes_per_token(stack, plan.decode_group)
    return [f"KV path: {describe(s)}",
            f"KV transfer prefill -> decode: {plan.link.path}, {plan.placement.value}: "
            f"{plan.link.detail} = {plan.link.gb_s:g} GB/s; {moved} B per token (the decode "
            f"worker's KV, kvCacheDtype {s.kv_cache_dtype}); charged on the prompt tokens the "
            "decode worker lacks (destination_missing, vLLM's NIXL pull)",
            *(f"KV transfer assumes: {a}" for a in (*plan.link.assumptions, *plan.notes))]
