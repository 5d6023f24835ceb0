"""Which AIConfigurator database system each GPU is predicted on, and every way a prediction
departs from the stack it is for (pure).

The A100 40 GB part of a p4d.24xlarge has no database of its own: AIConfigurator 0.12.0 ships
`a100_sxm` (aiconfigurator_core/systems/a100_sxm.yaml: 80 GiB, 2.039 TB/s). It is predicted on
`a100_sxm_40gb` (systems/a100_sxm_40gb.yaml here, passed with --systems-paths): the same file
with 40 GiB and 1.555 TB/s, its data_dir the 80 GB part's kernel measurements. In the database's
SILICON mode (the default) a step's latency is the sum of measured kernels, and the file's
bandwidth prices only an operation no measurement covers: alone, the 40 GB file changes memory
(the KV capacity and out-of-memory check) and almost no latency (Qwen3-30B-A3B TP4, ISL 1024 /
OSL 512, bs 16: TPOT 9.443 vs 9.429 ms; HYBRID and EMPIRICAL modes the same, measured:
stacks/predict/bandwidth.py). So every estimate and mocker table on it is stretched to the
40 GB part's bandwidth operation by operation (`bandwidth_from`; bandwidth.py says the rule and
checks it on the database's own H100 vs H200 kernels), and the departure says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import StackConfig, Topology

SYSTEMS_DIR = Path(__file__).resolve().parent / "systems"
BACKEND = "vllm"


@dataclass(frozen=True)
class DbSystem:
    name: str                       # AIConfigurator's system name
    # a systems file of ours (the YAML in SYSTEMS_DIR) over an installed system's data
    data_from: str | None = None
    departure: str | None = None
    # the system whose kernels this one reads at another memory bandwidth: its steps are
    # stretched to ours (stacks/predict/bandwidth.py)
    bandwidth_from: str | None = None


A100_40GB_DEPARTURE = (
    "A100-SXM4-40GB (p4d.24xlarge) predicted on a100_sxm_40gb: dynamo-bench's systems file "
    "(40 GiB, 1.555 TB/s) over the a100_sxm (80 GB, 2.039 TB/s) kernel measurements, each "
    "step's memory-bound operations stretched to 1.555 TB/s (the part of an operation's time "
    "its bytes account for, x 2.039/1.555; launch and compute time kept): an estimate of ours, "
    "checked on the database's own H100 vs H200 kernels to err slow by at most 0.10x "
    "(stacks/predict/bandwidth.py)")

# By the catalogue's GPU name (stacks.catalog.instances).
SYSTEMS: dict[str, DbSystem] = {
    "A100-SXM4-40GB": DbSystem("a100_sxm_40gb", data_from="a100_sxm",
                               departure=A100_40GB_DEPARTURE, bandwidth_from="a100_sxm"),
    "A100-SXM4-80GB": DbSystem("a100_sxm"),
    "L40S": DbSystem("l40s"),
    "H100-SXM5-80GB": DbSystem("h100_sxm"),
    "B200": DbSystem("b200_sxm"),
}

# The vLLM each Dynamo runtime image runs: ai-dynamo 1.6.1 pins vllm 0.31.0 (its
# pyproject's [vllm] extra; stacks/preflight/engine_flags.py reads that version's argparse).
RUNTIME_VLLM = {"1.6.1": "0.31.0"}

# What AIConfigurator's agg / disagg estimate does not model, by the stack setting that asks
# for it (the check, then the sentence).
# AIConfigurator 0.12.0's disagg TTFT (run by hand, `aiconfigurator cli estimate --estimate-mode
# disagg`, Qwen3-30B-A3B a100_sxm TP4 x 2 + TP4 x 2, ISL 1024 / OSL 512: 55.546 ms at decode
# batch 1, 2, 8 and 32; 149.6 ms at prefill batch 4) is one static prefill of
# --prefill-batch-size prompts x 1.1 (cli/api.py DEFAULT_PREFILL_LATENCY_CORRECTION_SCALE) x 1.8
# (sdk/picking.py _AUTOSCALE_TTFT_CORRECTION_FACTOR, applied by sdk/inference_session.py
# _get_disagg_summary_df), whatever the concurrency: the 1.8 stands for queueing ("lc/20+0.95 at
# local concurrency 15-20"), so no step's TTFT rises with it, while its agg TTFT does (mixed
# steps at the step's batch). Batch 1 is what a prefill worker sees here: at c64 on 2 prefill
# workers a request arrives every ~0.26 s per worker against a ~31 ms prefill.
DISAGG_TTFT = ("disagg TTFT: AIConfigurator's disagg estimate is one prefill at batch 1 x 1.1 "
               "x a fixed 1.8 queueing factor (aiconfigurator 0.12.0 sdk/picking.py, "
               "inference_session.py), the same at every concurrency: prefill queueing under "
               "load is not modelled step by step")

NOT_MODELLED = (
    (lambda s: s.serving.router.value == "kv",
     "KV-aware routing: the estimate splits requests evenly over replicas, as round-robin"),
    (lambda s: s.serving.prefix_caching,
     "prefix reuse across requests: every prompt's prefill is predicted in full unless the "
     "step itself names a shared prefix (prefix_cache, trace_replay)"),
    (lambda s: s.serving.kv_offload.kind != "none",
     "KV offload to CPU memory (LMCache / KVBM): not modelled"),
    (lambda s: s.serving.transfer.value != "none",
     "KV transfer between prefill and decode (NIXL over EFA / UCX): the estimate charges no "
     "transfer time"),
    (lambda s: s.serving.speculative is not None,
     "speculative decoding: not modelled (nextn 0)"),
    (lambda s: s.serving.topology == Topology.DISAGGREGATED, DISAGG_TTFT),
)


def system_for(instance_type: str) -> DbSystem | None:
    it = INSTANCE_TYPES.get(instance_type)
    return SYSTEMS.get(it.gpu.name) if it and it.gpu else None


def systems_request(systems: list[DbSystem]) -> list[dict[str, str]]:
    """The runner's `systems` entries for the systems files of ours among `systems`."""
    seen: dict[str, dict[str, str]] = {}
    for s in systems:
        if s.data_from and s.name not in seen:
            seen[s.name] = {"name": s.name, "data_from": s.data_from,
                            "yaml": (SYSTEMS_DIR / f"{s.name}.yaml").read_text()}
    return list(seen.values())


def departures(stack: StackConfig, systems: list[DbSystem],
               backend_versions: dict[str, str]) -> list[str]:
    """Every way the prediction departs from `stack`: GPU variants, the database's vLLM
    against the runtime's, what the model leaves out, and how load is split."""
    assert stack.serving is not None
    out = [s.departure for s in dict.fromkeys(systems) if s.departure]
    runtime = RUNTIME_VLLM.get(stack.serving.dynamo_version, "unknown")
    for system, version in sorted(backend_versions.items()):
        if version != runtime:
            out.append(f"{system}: database measured on vLLM {version}; the runtime "
                       f"(Dynamo {stack.serving.dynamo_version}) runs vLLM {runtime}")
    out += [text for applies, text in NOT_MODELLED if applies(stack)]
    out.append("load: a step's concurrency split evenly over the replicas (round-robin), "
               "every request of the step's mean lengths; think time, arrival bursts and "
               "length spread are not modelled")
    return out
