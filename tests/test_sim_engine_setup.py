"""A stack's simulated engine (workloads/sim/engine_setup.py): an aws stack's mocker command
line carries what its real vLLM workers would run (vLLM 0.31.0 defaults for the GPU, the
worker's own flags, pre-flight's KV capacity over the real block size, the KV transfer of its
path, host offload from cpuGb), a local stack the very command line of its live mockers, and
every departure is said in the notes the run record keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.config.loader import load_stack
from stacks.config.schema import RouterMode, StackConfig
from stacks.preflight.run import check_stack, load_base
from workloads.sim.build import sim_setup
from workloads.sim.engine_setup import SimSetup, Unsimulated, flag_value
from workloads.targets.local import mocker_argv, mocker_blocks, worker_specs

SNAP = "/snap"
GIB = 1024**3


def _setup(stack: StackConfig, kv_tokens: list[int] | None = None) -> SimSetup:
    tokens = kv_tokens or [m.kv_capacity_tokens for m in check_stack(stack.name).memory]
    return sim_setup(stack, tokens, SNAP, {}, load_base(stack))


def _argv(setup: SimSetup, role: str) -> list[str]:
    return next(r.argv for r in setup.roles if r.role == role)


def _with_workers(stack: StackConfig, **update) -> StackConfig:
    s = stack.serving
    assert s is not None
    workers = [w.model_copy(update=update) for w in s.workers]
    return stack.model_copy(update={"serving": s.model_copy(update={"workers": workers})})


def test_an_a100_worker_runs_vllms_defaults_on_pre_flights_capacity():
    setup = _setup(load_stack("agg-a100"), [777_577])
    argv = _argv(setup, "worker")
    assert setup.block_size == 16
    assert flag_value(argv, "--block-size") == "16"
    assert flag_value(argv, "--num-gpu-blocks-override") == str(777_577 // 16)
    assert flag_value(argv, "--max-num-seqs") == "256"
    assert flag_value(argv, "--max-num-batched-tokens") == "2048"
    assert "--enable-prefix-caching" in argv and "--enable-chunked-prefill" in argv
    assert "--kv-transfer-bandwidth" not in argv and "--num-host-blocks" not in argv
    assert any("A100-SXM4-40GB): block 16 (vLLM 0.31.0 default)" in n for n in setup.notes)


def test_the_workers_own_flags_win_over_vllms_defaults():
    stack = load_stack("agg-a100")
    assert stack.serving is not None
    custom = _with_workers(stack, extra_args=["--max-num-seqs=64", "--max-num-batched-tokens",
                                              "4096", "--no-enable-prefix-caching"])
    custom = custom.model_copy(update={"serving": custom.serving.model_copy(  # type: ignore
        update={"block_size": 32})})
    argv = _argv(_setup(custom, [777_577]), "worker")
    assert [flag_value(argv, f) for f in ("--block-size", "--num-gpu-blocks-override",
                                          "--max-num-seqs", "--max-num-batched-tokens")] == [
        "32", str(777_577 // 32), "64", "4096"]
    assert "--no-enable-prefix-caching" in argv


def test_an_h100_worker_gets_the_larger_server_defaults():
    stack = load_stack("agg-a100-standalone")
    cluster = stack.cluster.model_copy(update={"node_groups": [
        g.model_copy(update={"instance_type": "p5.48xlarge"}) if g.name == "p4d" else g
        for g in stack.cluster.node_groups]})
    h100 = stack.model_copy(update={"cluster": cluster})
    argv = _argv(sim_setup(h100, [1_000_000], SNAP, {}), "worker")
    assert [flag_value(argv, "--max-num-seqs"), flag_value(argv, "--max-num-batched-tokens")] \
        == ["1024", "8192"]


def test_a_disaggregated_stack_charges_its_transfer_on_the_prefill_only():
    setup = _setup(load_stack("disagg-l40s-decode"))
    prefill, decode = _argv(setup, "prefill"), _argv(setup, "decode")
    assert flag_value(prefill, "--kv-transfer-bandwidth") == "2.5"
    assert flag_value(prefill, "--kv-transfer-timing-mode") == "destination_missing"
    assert "--kv-transfer-bandwidth" not in decode
    # the decode worker is an L40S's: its own capacity, the same block
    assert flag_value(decode, "--block-size") == "16"
    assert any("TCP (NIXL UCX" in n and "2.5 GB/s" in n for n in setup.notes)
    assert any("5 Gbps" in n for n in setup.notes)


def test_host_offload_blocks_come_from_cpu_gb_over_the_workers_bytes_per_block():
    setup = _setup(load_stack("disagg-a100-kv-offload"))
    prefill, decode = _argv(setup, "prefill"), _argv(setup, "decode")
    # 100 GiB / (16 tokens x 98,304 B): vLLM's OffloadingConnector over the whole worker
    assert flag_value(prefill, "--num-host-blocks") == str(100 * GIB // (16 * 98_304))
    # 4 ranks x PCIe Gen4 x16 one way
    assert flag_value(prefill, "--host-offload-d2h-bandwidth-gbps") == "128"
    assert flag_value(prefill, "--host-offload-h2d-bandwidth-gbps") == "128"
    assert prefill.count("--kv-bytes-per-token") == 1
    assert "--num-host-blocks" not in decode   # decode workers keep plain NIXL


def test_the_disk_tier_is_said_not_simulated():
    stack = load_stack("disagg-a100-kv-offload")
    s = stack.serving
    assert s is not None
    disk = stack.model_copy(update={"serving": s.model_copy(update={
        "kv_offload": s.kv_offload.model_copy(update={"kind": "disk", "disk_gb": 500.0})})})
    setup = _setup(disk, [777_577, 777_577])
    assert any("disk tier (kvOffload diskGb 500) is not simulated" in n for n in setup.notes)
    assert flag_value(_argv(setup, "prefill"), "--num-host-blocks") is not None


def test_what_dynosim_cannot_run_is_refused_with_the_reason():
    random = load_stack("agg-a100")
    assert random.serving is not None
    random = random.model_copy(update={"serving": random.serving.model_copy(
        update={"router": RouterMode.RANDOM})})
    with pytest.raises(Unsimulated, match="router random"):
        _setup(random, [777_577])
    with pytest.raises(Unsimulated, match="hybrid linear-attention"):
        _setup(load_stack("baseline-b200-solar2"), [1_000_000, 1_000_000])
    with pytest.raises(Unsimulated, match="set serving.blockSize"):
        _setup(load_stack("baseline-b200-axk2"), [1_000_000])


def test_a_recipe_image_says_its_vllm_is_not_the_one_whose_defaults_are_used():
    """K-EXAONE's build carries vLLM 0.28.0 (its release notes, engine_releases.py)."""
    notes = _setup(load_stack("agg-b200-kexaone"), [3_046_210]).notes
    assert any("runs vLLM 0.28.0" in n and "unverified" in n for n in notes)
    assert not any("runs vLLM" in n for n in _setup(load_stack("agg-a100"), [777_577]).notes)


def test_a_local_disaggregated_stack_simulates_its_live_mockers_own_command_lines():
    """The live rehearsal and its simulation run one configuration, transfer included."""
    stack = load_stack("local-disagg")
    kv = [m.kv_capacity_tokens for m in check_stack(stack.name).memory]
    setup = _setup(stack, kv)
    blocks = mocker_blocks(stack, kv)
    for spec in worker_specs(stack, blocks):
        live = mocker_argv(Path("/py"), stack, spec, Path(SNAP))[3:]
        assert live == _argv(setup, spec.role.value)
    prefill = _argv(setup, "prefill")
    assert flag_value(prefill, "--kv-transfer-bandwidth") == "5"
    assert flag_value(prefill, "--block-size") == "64"       # the mocker's own, as live
    assert any("ASSUMED 10 Gbps per TCP flow" in n for n in setup.notes)


# --- what DynoSim does with the host offload flags (ai-dynamo 1.6.1) -------------------------

def _reloads(offload: list[str]) -> list[dict]:
    """Four 1024-token prompts, twice, on a worker whose GPU holds 80 blocks of 16 (so the
    second pass finds nothing on the GPU): the second pass's requests."""
    from workloads.sim.replay import Replayer
    rows = [{"session_id": f"s{n}", "timestamp": n * 2000.0, "input_length": 1024,
             "output_length": 4, "hash_ids": [n % 4 * 10 + i for i in range(4)]}
            for n in range(8)]
    argv = ["--model-path", "", "--block-size", "16", "--num-gpu-blocks-override", "80",
            "--max-num-batched-tokens", "2048", *offload]
    job = {"trace": rows, "trace_block_size": 256, "router_mode": "round_robin",
           "router_config": None, "replay_concurrency": None, "runs": 1,
           "roles": {"worker": {"argv": argv, "count": 1}}}
    replayer = Replayer()
    try:
        (answer,) = replayer([job])
    finally:
        replayer.close()
    return sorted(answer["runs"][0]["requests"], key=lambda r: r["arrival_time_ms"])[4:]


@pytest.mark.engine
def test_dynosim_reloads_evicted_prefixes_from_host_blocks_at_the_host_links_speed():
    def offload(h2d: str) -> list[str]:
        return ["--num-host-blocks", "1000", "--host-offload-d2h-bandwidth-gbps", "128",
                "--host-offload-h2d-bandwidth-gbps", h2d, "--kv-bytes-per-token", "98304"]
    assert [r["reused_input_tokens"] for r in _reloads([])] == [0] * 4
    fast, slow = _reloads(offload("128")), _reloads(offload("1"))
    assert [r["reused_input_tokens"] for r in fast] == [1008] * 4
    # the 64 blocks of 16 tokens come back over the host link: 1 GB/s instead of 128 GB/s
    extra = 64 * 16 * 98304 * (1 / 1e9 - 1 / 128e9) * 1000
    assert slow[0]["ttft_ms"] - fast[0]["ttft_ms"] == pytest.approx(extra, rel=0.02)
