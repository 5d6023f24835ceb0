"""AIConfigurator's answers as a stack's predicted table, its SLA best point and its
provenance (pure). Every figure here is PREDICTED: it says what the database expects, not what
a GPU did.

Per step: TTFT and ITL (AIConfigurator's TPOT) as it gives them; output tok/s is its figure
for the configuration scaled to the step's concurrency (its agg answer is one replica at that
replica's share; its disagg answer runs decode batch x decode replicas requests); tok/s per
GPU divides by every GPU the stack's workers hold, busy or not; $ per 1M output tokens prices
those GPUs (their share of the nodes' hourly price, the cluster's fixed costs left out).

Each row carries what stands around its figures: the TTFT and ITL error bands from
AIConfigurator's own measured rows (stacks/predict/bands.py; none where no row is near), the
bandwidth stretch of a GPU predicted on another part's kernels (`stretched`,
stacks/predict/bandwidth.py), and, where the database's rows for the GPU and precision are
suspect (stacks/predict/suspect.py), that its latencies are upper bounds: no SLO verdict is
drawn from such a row (PredictSlo.met answers None).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from stacks.predict.bands import Band, NoBand
from stacks.predict.shapes import Layout, StepShape
from stacks.sizing.step_itl import ForecastItl

LABEL = "PREDICTED"


@dataclass(frozen=True)
class PredictSlo:
    """The SLOs the reports judge by (reports/tables/goodput.py DEFAULT_SLOS; a test holds them
    equal): p50 TTFT below, per-user speed at least, ITL at most."""
    name: str
    ttft_ms: float
    min_tok_s_per_user: float | None = None
    itl_ms: float | None = None

    def met(self, row: PredictedRow) -> bool | None:
        """Whether the row's figures meet the SLO; None (no verdict) when they are upper
        bounds."""
        if row.upper_bound:
            return None
        return (row.ttft_ms < self.ttft_ms
                and (self.min_tok_s_per_user is None
                     or row.tok_s_per_user >= self.min_tok_s_per_user)
                and (self.itl_ms is None or row.itl_ms <= self.itl_ms))


SLOS = (PredictSlo("sla-tps50-ttft5s", ttft_ms=5000, min_tok_s_per_user=50),
        PredictSlo("ttft2s-itl25ms", ttft_ms=2000, itl_ms=25))


@dataclass(frozen=True)
class PredictedRow:
    step: str
    workload: str
    concurrency: int
    isl: int
    osl: int
    prefix: int
    ttft_ms: float
    itl_ms: float
    request_latency_ms: float
    output_tok_s: float
    tok_s_per_gpu: float
    tok_s_per_user: float
    usd_per_1m_output: float | None
    # of ttft_ms, what AIConfigurator adds to the prefill kernels' time (its vLLM dispatch term
    # and queueing factor: aic_runner.ttft_terms), which a mocker on its table does not run;
    # None where the estimate adds neither (disagg)
    ttft_model_terms_ms: float | None = None
    # the error bands around ttft_ms / itl_ms (ms, stacks/predict/bands.py Band.around), None
    # where no measured row is near; *_band_source names the rows, or says why there is none
    ttft_band_ms: tuple[float, float] | None = None
    itl_band_ms: tuple[float, float] | None = None
    ttft_band_source: str | None = None
    itl_band_source: str | None = None
    # why the latencies are upper bounds (the database's rows are suspect), else None
    upper_bound: str | None = None
    # the bandwidth stretch each phase's steps got ({"prefill": x, "decode": y}) and the
    # estimate's figures before it (unstretched_ttft_ms, unstretched_itl_ms), else None
    stretch: dict[str, float] | None = None


@dataclass
class Prediction:
    stack: str
    label: str = LABEL
    topology: str = ""
    gpus: int = 0
    disaggregated: bool = False
    tier_systems: list[str] = field(default_factory=list)   # agg: [worker]; [prefill, decode]
    rows: list[PredictedRow] = field(default_factory=list)
    # database provenance: systems, backend and its versions, AIConfigurator's version
    database: dict[str, Any] = field(default_factory=dict)
    departures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)    # steps or workloads not predicted
    not_predicted: str | None = None                    # why nothing is

    def best(self, slo: PredictSlo, workload: str = "concurrency_sweep") -> PredictedRow | None:
        """The step of `workload` meeting `slo` with the most output tok/s per GPU."""
        met = [r for r in self.rows if r.workload == workload and slo.met(r)]
        return max(met, key=lambda r: r.tok_s_per_gpu, default=None)

    def as_record(self) -> dict[str, Any]:
        """What a run record or a JSON file keeps."""
        return {"label": self.label, "stack": self.stack, "topology": self.topology,
                "gpus": self.gpus, "disaggregated": self.disaggregated,
                "tier_systems": self.tier_systems,
                "database": self.database, "departures": self.departures,
                "skipped": self.skipped, "not_predicted": self.not_predicted,
                "steps": {r.step: r.__dict__ for r in self.rows}}


def database_words(db: dict[str, Any]) -> str:
    """'predicted (AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)': the source a figure
    taken from a prediction names (a Prediction's or a run record's `database`)."""
    systems = "+".join(f"{s}/{db.get('backend', 'vllm')} {v}"
                       for s, v in (db.get("backend_versions") or {}).items())
    return f"predicted (AIConfigurator {db.get('aiconfigurator', '?')} {systems})".strip()


def predicted_itl(pred: Prediction) -> ForecastItl | None:
    """A prediction's ITL per step for the forecast (stacks/sizing/step_itl.py), or None when
    nothing is predicted."""
    if pred.not_predicted or not pred.rows:
        return None
    return ForecastItl(database_words(pred.database), {r.step: r.itl_ms for r in pred.rows})


def describe(lay: Layout) -> str:
    names = ("prefill", "decode") if lay.disaggregated else ("worker",)
    tiers = ", ".join(f"{n} {t.replicas} x TP{t.tp} on {t.system.name}"
                      for n, t in zip(names, lay.tiers, strict=True))
    return f"{'disagg' if lay.disaggregated else 'agg'}: {tiers} ({lay.gpus} GPUs)"


def stretched(answer: dict[str, Any], osl: int) -> dict[str, Any]:
    """The estimate with its steps stretched to the GPU's own memory bandwidth (the runner's
    `stretch` terms, stacks/predict/bandwidth.py), or as it is without them. TTFT: the prefill
    step's share (agg: TTFT / queue factor - dispatch term, the part the kernels take) times
    the prefill factor; TPOT: agg averages mixed steps (prefill-dominated: the prefill factor)
    and decode-only steps (the decode factor) over its own schedule, disagg is its decode step
    times the decode factor; request latency follows, and output tok/s at the same
    concurrency falls as the request latency rises."""
    st = answer.get("stretch")
    if not st:
        return answer
    f_pre = (st.get("prefill") or {}).get("factor", 1.0)
    f_dec = (st.get("decode") or {}).get("factor", 1.0)
    ttft, tpot = answer["ttft_ms"], answer["tpot_ms"]
    dispatch, q = answer.get("ttft_dispatch_ms"), answer.get("ttft_queue_factor")
    new_ttft = ((ttft / q - dispatch) * f_pre + dispatch) * q if dispatch is not None and q \
        else ttft * f_pre
    sched = st.get("schedule") or {}
    mix = sched.get("num_mix_steps", 0.0) * sched.get("mix_step_latency_ms", 0.0)
    gen = sched.get("num_genonly_steps", 0.0) * sched.get("genonly_step_latency_ms", 0.0)
    new_tpot = tpot * ((mix * f_pre + gen * f_dec) / (mix + gen) if mix + gen > 0 else f_dec)
    latency = answer["request_latency_ms"] + (new_ttft - ttft) + (new_tpot - tpot) * (osl - 1)
    return {**answer, "ttft_ms": new_ttft, "tpot_ms": new_tpot, "request_latency_ms": latency,
            "tokens_per_s": answer["tokens_per_s"] * answer["request_latency_ms"] / latency,
            "tokens_per_s_per_user": 1000.0 / new_tpot,
            "stretch_factors": {"prefill": round(f_pre, 4), "decode": round(f_dec, 4),
                                "unstretched_ttft_ms": ttft, "unstretched_itl_ms": tpot}}


def banded(r: PredictedRow, ttft: Band | NoBand, itl: Band | NoBand) -> PredictedRow:
    """`r` with its TTFT and ITL bands (or the reasons it has none)."""
    def parts(b: Band | NoBand, value: float) -> tuple[tuple[float, float] | None, str]:
        if isinstance(b, NoBand):
            return None, b.reason
        lo, hi = b.around(value)
        return (round(lo, 3), round(hi, 3)), b.describe()
    (tb, ts), (ib, i_s) = parts(ttft, r.ttft_ms), parts(itl, r.itl_ms)
    return replace(r, ttft_band_ms=tb, ttft_band_source=ts, itl_band_ms=ib, itl_band_source=i_s)


def row(step: StepShape, lay: Layout, answer: dict[str, Any]) -> PredictedRow:
    out_tok_s = answer["tokens_per_s"] * step.concurrency / answer["concurrency"]
    usd = (lay.gpu_usd_per_hour / (out_tok_s * 3600) * 1e6
           if lay.gpu_usd_per_hour is not None and out_tok_s > 0 else None)
    return PredictedRow(step.id, step.workload, step.concurrency, step.isl, step.osl,
                        step.prefix, ttft_ms=answer["ttft_ms"], itl_ms=answer["tpot_ms"],
                        request_latency_ms=answer["request_latency_ms"],
                        output_tok_s=out_tok_s, tok_s_per_gpu=out_tok_s / lay.gpus,
                        tok_s_per_user=answer["tokens_per_s_per_user"],
                        usd_per_1m_output=usd, ttft_model_terms_ms=model_terms_ms(answer),
                        stretch=answer.get("stretch_factors"))


def model_terms_ms(answer: dict[str, Any]) -> float | None:
    """ttft = (prefill + dispatch) x factor, so what is not the prefill kernels' time is
    ttft x (1 - 1 / factor) + dispatch."""
    dispatch, factor = answer.get("ttft_dispatch_ms"), answer.get("ttft_queue_factor")
    if dispatch is None or not factor:
        return None
    return round(answer["ttft_ms"] * (1 - 1 / factor) + dispatch, 3)
