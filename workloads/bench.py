"""`make bench`: how far the client's view is from the engine's, and what the runner costs.

For c = 1..64 on the local engine it runs the concurrency sweep twice: once through the runner
(`python -m workloads run`, everything it records) and once as the bare AIPerf commands of the
same steps (same datasets, fresh engine). Per concurrency it prints client TTFT / ITL (AIPerf)
next to the engine's own (the frontend histograms' sum/count over the step), their ratio,
AIPerf's CPU use, achieved concurrency, and the runner's wall time per step against the bare
command's. A third pass runs the same commands again with AIPerf's client ACKing every segment
at once (aiperf_site/aiperf_quickack.py): its TTFT is the client's without the first-token
stall (Dynamo's frontend without TCP_NODELAY meeting the client's delayed ACK, docs/testing.md),
so the table shows the client-minus-engine gap in ms, the stall's size and share of it, and the
gap and ratio without it (the quick-ACK client against the quick-ACK pass's own engine).
Every pass keeps its AIPerf's output (`<pass>/<step>/aiperf.log`) and the bench checks the
patches' status lines in it (pass_patch_problems): a pass that ran another client than the one
it stands for is named in the table, and the bench exits non-zero.
A measurement, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from stacks.catalog import metrics
from stacks.config.loader import stack_file
from stacks.preflight.run import require_valid
from workloads import aiperf_site, predictions, receipt_split
from workloads.aiperf_args import AiperfInvocation, profile_args
from workloads.grace import MIN_GRACE_S
from workloads.model_folder import build_model_folder, default_hf_home
from workloads.results import summary_metric
from workloads.runner import REPO, RunOptions, run
from workloads.step_exec import aiperf_executable
from workloads.steps import plan
from workloads.targets.local import LocalTarget

ISL, OSL = 1024, 256


def bench_stack(stack: str, tmp: Path, concurrencies: list[int], duration_s: float) -> str:
    """A copy of `stack` whose quick concurrency sweep is the benchmark's."""
    doc = yaml.safe_load(stack_file(stack).read_text())
    doc["config"]["dynamo-bench:workloads"] = {"warmupRequests": 8, "concurrencySweep": {
        "quick": {"concurrencies": concurrencies, "durationS": duration_s, "isl": ISL,
                  "osl": OSL}}}
    name = f"bench-{stack}"
    (tmp / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc))
    return name


def engine_mean_ms(step_dir: Path, histogram: str) -> float | None:
    """The frontend histogram's mean over the step (sum / count of its profiling window)."""
    path = step_dir / "server_metrics_export.json"
    if not path.exists():
        return None
    series = json.loads(path.read_text())["metrics"].get(histogram, {}).get("series", [])
    total = sum(s["stats"].get("sum", 0) for s in series)
    count = sum(s["stats"].get("count", 0) for s in series)
    return 1000 * total / count if count else None


def run_bare(name: str, stacks_dir: Path, out_dir: Path, steps_args: list[dict],
             quickack: bool = False) -> dict:
    """The same AIPerf commands without the runner: fresh engine, same datasets. With
    `quickack`, AIPerf's client ACKs every segment at once (aiperf_site/aiperf_quickack.py):
    the first-token stall's diagnostic pass."""
    report = require_valid(name, stacks_dir)
    stack = report.stack
    model = build_model_folder(default_hf_home(), stack.model.id, stack.model.arch)
    target = LocalTarget(stack, out_dir / "engine", model=model,
                         kv_capacity_tokens=[m.kv_capacity_tokens for m in report.memory])
    walls: dict[str, float] = {}
    patches: dict[str, dict[str, str]] = {}
    t0 = time.monotonic()
    target.start()
    try:
        ep = target.endpoints()
        env = aiperf_site.aiperf_env({**os.environ, **model.env}, quickack=quickack)
        for s in steps_args:
            inv = AiperfInvocation(model=ep.model, url=ep.base_url, tokenizer=stack.model.id,
                                   input_file=s["dataset"],
                                   request_count=s["rows"] - s["warmup_requests"],
                                   warmup_requests=s["warmup_requests"],
                                   concurrency=s["concurrency"], seed=s["seed"],
                                   artifact_dir=out_dir / s["id"],
                                   server_metrics=tuple(ep.metrics_urls),
                                   duration_s=s["duration_s"],
                                   grace_period_s=s["grace_period_s"],
                                   concurrency_ramp_s=s.get("concurrency_ramp_s"))
            t = time.monotonic()
            patches[s["id"]] = run_aiperf([str(aiperf_executable()), *profile_args(inv)], env,
                                          out_dir / s["id"] / "aiperf.log")
            walls[s["id"]] = time.monotonic() - t
    finally:
        target.stop()
    return {"steps": walls, "total": time.monotonic() - t0, "dir": out_dir,
            "patches": patches, "quickack": quickack}


def run_aiperf(argv: list[str], env: dict[str, str], log: Path) -> dict[str, str]:
    """One AIPerf command, its output kept in `log` (as the runner keeps a step's aiperf.log):
    what the project's start-up file said of each patch (aiperf_site.patch_status), so the
    pass can prove which client it ran."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    return aiperf_site.patch_status(log.read_text(errors="replace"))


def _phase_seconds(manifest: dict, step_id: str) -> float | None:
    from datetime import datetime
    for phase in manifest["attempts"][-1]["phases"]:
        if phase["name"] == f"step:{step_id}" and phase["end"]:
            return (datetime.fromisoformat(phase["end"]) -
                    datetime.fromisoformat(phase["start"])).total_seconds()
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _minus(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def stall_columns(ttft_client: float | None, ttft_engine: float | None,
                  ttft_quickack: float | None, ttft_engine_quickack: float | None) -> dict:
    """The client-minus-engine TTFT gap, the first-token stall's part of it and the ratio
    without the stall (pure). The quick-ACK pass runs on a fresh engine whose own TTFT differs
    from the runner pass's by run-to-run noise, so each pass is judged against its own engine:
    the stall is the runner pass's gap minus the quick-ACK pass's gap, and the ratio without
    it is the quick-ACK client over the quick-ACK engine."""
    gap = _minus(ttft_client, ttft_engine)
    gap_quickack = _minus(ttft_quickack, ttft_engine_quickack)
    stall = _minus(gap, gap_quickack)
    return {"ttft_gap_ms": gap, "stall_ms": stall,
            "stall_share": stall / gap if stall is not None and gap else None,
            "ttft_quickack_ms": ttft_quickack, "ttft_engine_quickack_ms": ttft_engine_quickack,
            "ttft_gap_no_stall_ms": gap_quickack,
            "ttft_ratio_no_stall": _ratio(ttft_quickack, ttft_engine_quickack)}


def predicted_columns(pred: dict | None, step_id: str, ttft_client: float | None,
                      itl_client: float | None) -> dict:
    """AIConfigurator's predicted TTFT / ITL for the step (the run manifest's `predictions`,
    workloads/predictions.py) and the client's measured / predicted; None without one."""
    row = predictions.predicted_step(pred, step_id) or {}
    ttft_p, itl_p = row.get("ttft_ms"), row.get("itl_ms")
    return {"ttft_predicted_ms": ttft_p, "ttft_vs_predicted": _ratio(ttft_client, ttft_p),
            "itl_predicted_ms": itl_p, "itl_vs_predicted": _ratio(itl_client, itl_p)}


def receipt_columns(step_dir: Path | None, receipts: dict[str, int],
                    ttft_quickack: float | None, ttft_engine_quickack: float | None) -> dict:
    """Of the gap left without the stall, the part before the frontend received the request
    (workloads/receipt_split.py), and the quick-ACK client's TTFT over the frontend's plus it."""
    export = step_dir / "profile_export.jsonl" if step_dir else None
    pre = (receipt_split.before_receipt_ms(export.read_text().splitlines(), receipts)
           if export is not None and export.exists() and receipts else None)
    return {"before_receipt_ms": pre,
            "ttft_ratio_after_receipt": _ratio(ttft_quickack, ttft_engine_quickack + pre)
            if pre is not None and ttft_engine_quickack is not None else None}


def _receipts(quickack: dict | None) -> dict[str, int]:
    log = quickack["dir"] / "engine" / "logs" / "frontend.log" if quickack else None
    if log is None or not log.exists():
        return {}
    return receipt_split.frontend_receipts(log.read_text(errors="replace").splitlines())


def pass_patch_problems(runner_step: dict, step_id: str, bare: dict,
                        quickack: dict | None) -> list[str]:
    """What is wrong with the clients one step's passes ran (pure): the runner's and the bare
    pass must run AIPerf with the slot wait and its own client, the quick-ACK pass with the
    slot wait and the quick-ACK client (aiperf_site.patch_problems); a pass whose AIPerf left
    no status line did not load the patches at all."""
    passes = [("runner", runner_step.get("aiperf_patches") or {}, False),
              ("bare", bare.get("patches", {}).get(step_id, {}), False)]
    if quickack is not None:
        passes.append(("quick-ACK", quickack.get("patches", {}).get(step_id, {}), True))
    return [f"{name} pass: {problem}" for name, status, ack in passes
            for problem in aiperf_site.patch_problems(status, quickack=ack)]


def rows_for_table(run_dir: Path, manifest: dict, bare: dict,
                   quickack: dict | None = None) -> list[dict]:
    rows = []
    receipts = _receipts(quickack)
    for step_id, step in manifest["steps"].items():
        d = run_dir / step_id
        ttft_c = summary_metric(d, "time_to_first_token")
        itl_c = summary_metric(d, "inter_token_latency")
        ttft_e = engine_mean_ms(d, metrics.FRONTEND_TTFT)
        itl_e = engine_mean_ms(d, metrics.FRONTEND_ITL)
        runner_s = _phase_seconds(manifest, step_id)
        bare_s = bare["steps"].get(step_id)
        q = quickack["dir"] / step_id if quickack else None
        patches = pass_patch_problems(step, step_id, bare, quickack)
        ttft_q = summary_metric(q, "time_to_first_token") if q else None
        ttft_eq = engine_mean_ms(q, metrics.FRONTEND_TTFT) if q else None
        rows.append({
            "c": step["concurrency"], "requests": step["counts"]["attempted"],
            "ttft_client_ms": ttft_c, "ttft_engine_ms": ttft_e,
            "ttft_ratio": _ratio(ttft_c, ttft_e),
            **stall_columns(ttft_c, ttft_e, ttft_q, ttft_eq),
            **receipt_columns(q, receipts, ttft_q, ttft_eq),
            "itl_client_ms": itl_c, "itl_engine_ms": itl_e,
            "itl_ratio": itl_c / itl_e if itl_c and itl_e else None,
            **predicted_columns(manifest.get("predictions"), step_id, ttft_c, itl_c),
            "aiperf_cpu_cores": step["client"]["cpu"]["mean_cores"],
            "achieved_c": step["client"]["achieved_concurrency"],
            "client_bound": step["client"]["client_bound"],
            "bare_s": bare_s, "runner_s": runner_s,
            "overhead_s": runner_s - bare_s if runner_s and bare_s else None,
            "aiperf_patches": "; ".join(patches) or "as measured",
        })
    return rows


COLUMNS = [("c", "c", "{}"), ("requests", "req", "{}"),
           ("ttft_client_ms", "TTFT client ms", "{:.1f}"),
           ("ttft_engine_ms", "TTFT engine ms", "{:.1f}"), ("ttft_ratio", "ratio", "{:.3f}"),
           ("ttft_gap_ms", "gap ms", "{:+.1f}"), ("stall_ms", "stall ms", "{:.1f}"),
           ("stall_share", "stall share", "{:.0%}"),
           ("ttft_engine_quickack_ms", "TTFT engine (quick-ACK pass) ms", "{:.1f}"),
           ("ttft_gap_no_stall_ms", "gap w/o stall ms", "{:+.1f}"),
           ("ttft_ratio_no_stall", "ratio w/o stall", "{:.3f}"),
           ("before_receipt_ms", "of it before the frontend's receipt ms", "{:.1f}"),
           ("ttft_ratio_after_receipt", "ratio w/o stall, from receipt", "{:.3f}"),
           ("itl_client_ms", "ITL client ms", "{:.2f}"),
           ("itl_engine_ms", "ITL engine ms", "{:.2f}"), ("itl_ratio", "ratio", "{:.3f}"),
           ("ttft_predicted_ms", "TTFT PREDICTED ms", "{:.1f}"),
           ("ttft_vs_predicted", "TTFT meas/pred", "{:.3f}"),
           ("itl_predicted_ms", "ITL PREDICTED ms", "{:.2f}"),
           ("itl_vs_predicted", "ITL meas/pred", "{:.3f}"),
           ("aiperf_cpu_cores", "AIPerf CPU cores", "{:.2f}"),
           ("achieved_c", "achieved c", "{:.1f}"), ("client_bound", "client-bound", "{}"),
           ("bare_s", "bare AIPerf s", "{:.1f}"), ("runner_s", "runner step s", "{:.1f}"),
           ("overhead_s", "overhead s", "{:+.1f}"),
           ("aiperf_patches", "AIPerf patches", "{}")]


def _cell(value, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return fmt.format(value)


def markdown(rows: list[dict], totals: dict) -> str:
    head = "| " + " | ".join(h for _, h, _ in COLUMNS) + " |"
    sep = "|" + "|".join("---:" for _ in COLUMNS) + "|"
    body = ["| " + " | ".join(_cell(r[k], f) for k, _, f in COLUMNS) + " |" for r in rows]
    foot = (f"\nWhole sweep: runner {totals['runner']:.1f} s (start-up, smoke, warm-up, steps, "
            f"shutdown) vs bare {totals['bare']:.1f} s (engine start + the same AIPerf "
            f"commands): overhead {totals['runner'] - totals['bare']:+.1f} s.")
    return "\n".join([head, sep, *body]) + "\n" + foot + "\n"


def main(concurrencies: list[int], stack: str, duration_s: float, out: Path | None,
         console: Console) -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix="dynamo-bench-bench-"))
    # AIPerf caches synthesized datasets by content; the second pass would skip that work.
    os.environ["AIPERF_DATASET_MMAP_CACHE_ENABLED"] = "false"
    try:
        name = bench_stack(stack, tmp, concurrencies, duration_s)
        run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        runs_dir = REPO / "runs" / "bench"
        t = time.monotonic()
        result = run(RunOptions(stack=name, scale="quick", only=["concurrency_sweep"],
                                run_id=run_id, runs_dir=runs_dir, stacks_dir=tmp), console)
        runner_total = time.monotonic() - t
        manifest = json.loads((result.run_dir / "manifest.json").read_text())
        steps = plan(require_valid(name, tmp).stack, "quick", ["concurrency_sweep"])
        args = [{"id": s.id, "dataset": result.run_dir / manifest["steps"][s.id]["dataset"][
            "path"], "rows": manifest["steps"][s.id]["dataset"]["rows"],
            "warmup_requests": manifest["steps"][s.id].get("aiperf_warmup_requests", 0),
            "concurrency": s.concurrency, "seed": s.seed,
            "duration_s": s.duration_s,
            "grace_period_s": manifest["steps"][s.id].get("grace", {}).get(
                "grace_period_s", MIN_GRACE_S),
            # the runner's spread start (workloads/stagger.py), so the commands stay the same
            "concurrency_ramp_s": manifest["steps"][s.id].get("ramp", {}).get(
                "concurrency_ramp_s")} for s in steps]
        console.print("bare AIPerf pass (same commands, no runner) ...")
        bare = run_bare(name, tmp, result.run_dir.parent / f"{run_id}-bare", args)
        console.print("quick-ACK pass (the same commands, the client ACKing at once) ...")
        quick = run_bare(name, tmp, result.run_dir.parent / f"{run_id}-quickack", args,
                         quickack=True)
        rows = rows_for_table(result.run_dir, manifest, bare, quick)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table = Table(title=f"client vs engine, {stack}, ISL {ISL} / OSL {OSL}, {duration_s:g} s "
                        "per step")
    for _, h, _ in COLUMNS:
        table.add_column(h, justify="right")
    for r in rows:
        table.add_row(*[_cell(r[k], f) for k, _, f in COLUMNS])
    Console(width=200).print(table)
    md = markdown(rows, {"runner": runner_total, "bare": bare["total"]})
    Console().print(md.splitlines()[-1])
    target = out or result.run_dir / "bench.md"
    target.write_text(md)
    console.print(f"table written to {target}")
    wrong = [f"c{r['c']}: {r['aiperf_patches']}" for r in rows
             if r["aiperf_patches"] != "as measured"]
    if wrong:
        raise SystemExit("the bench's passes did not all run the client they compare (each "
                         "pass's aiperf.log keeps AIPerf's status lines): " + "; ".join(wrong))
    return rows
