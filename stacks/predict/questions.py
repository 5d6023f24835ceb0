"""The plan's questions answered from predictions, before a campaign is paid (pure). Every
answer is PREDICTED (stacks/predict/rows.py says what the figures are):

1. Does disaggregation change TTFT, ITL and throughput on the same GPUs? Each disagg variant
   beside the agg variant with as many GPUs, step by step across the concurrency sweep.
2. Is a decode tier on another GPU (the L40S) cheaper per token? Its $ per 1M output tokens
   beside the disagg variant whose tiers share one GPU, step by step.
3. Where does each topology meet the SLO? Per variant and SLO, the sweep steps that meet it and
   the best point (most tok/s per GPU).
4. Where does disaggregation win? The sweep steps where a disagg variant meeting the SLO gives
   more tok/s per GPU than its equal-GPU agg variant meeting it.

A comparison whose figures' error bands overlap (stacks/predict/bands.py overlap) says it is
not resolved by the model; a variant whose latencies are upper bounds (suspect database rows)
gets no SLO verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from stacks.predict.bands import NOT_RESOLVED, overlap
from stacks.predict.rows import LABEL, SLOS, PredictedRow, Prediction

SWEEP = "concurrency_sweep"


@dataclass(frozen=True)
class Answer:
    question: str
    lines: list[str]


def _sweep(p: Prediction) -> dict[int, PredictedRow]:
    return {r.concurrency: r for r in p.rows if r.workload == SWEEP}


def distinct(preds: list[Prediction]) -> list[Prediction]:
    """The first of the variants predicting the same table: variants that differ only in what
    the model leaves out (the router, KV offload) predict alike and are compared once."""
    seen: list[list[PredictedRow]] = []
    out = []
    for p in preds:
        if p.rows and p.rows not in seen:
            seen.append(p.rows)
            out.append(p)
    return out


def _pairs(preds: list[Prediction]) -> list[tuple[Prediction, Prediction]]:
    """(agg, disagg) variants with the same GPU count."""
    ok = distinct(preds)
    return [(a, d) for d in ok if d.disaggregated for a in ok
            if not a.disaggregated and a.gpus == d.gpus]


def agg_vs_disagg(preds: list[Prediction]) -> Answer:
    lines = []
    for a, d in _pairs(preds):
        sa, sd = _sweep(a), _sweep(d)
        for c in sorted(set(sa) & set(sd)):
            ra, rd = sa[c], sd[c]
            unresolved = [m for m, x, y in (("TTFT", rd.ttft_band_ms, ra.ttft_band_ms),
                                            ("ITL", rd.itl_band_ms, ra.itl_band_ms))
                          if overlap(x, y)]
            lines.append(f"{d.stack} vs {a.stack} ({a.gpus} GPUs) c{c}: TTFT "
                         f"{rd.ttft_ms:,.0f} vs {ra.ttft_ms:,.0f} ms, ITL {rd.itl_ms:.2f} vs "
                         f"{ra.itl_ms:.2f} ms, {rd.tok_s_per_gpu:,.1f} vs "
                         f"{ra.tok_s_per_gpu:,.1f} tok/s/GPU"
                         + (f" ({' and '.join(unresolved)} {NOT_RESOLVED})" if unresolved
                            else ""))
    return Answer("agg vs disagg on equal GPUs", lines or ["no agg and disagg variant with "
                                                           "the same GPU count predicted"])


def decode_tier_cost(preds: list[Prediction]) -> Answer:
    ok = [p for p in distinct(preds) if p.disaggregated]
    mixed = [p for p in ok if len(set(p.tier_systems)) == 2]
    same = [p for p in ok if len(set(p.tier_systems)) == 1]
    lines = []
    for m in mixed:
        for s in same:
            sm, ss = _sweep(m), _sweep(s)
            for c in sorted(set(sm) & set(ss)):
                um, us = sm[c].usd_per_1m_output, ss[c].usd_per_1m_output
                if um is None or us is None:
                    continue
                lines.append(f"{m.stack} (decode on {m.tier_systems[1]}) vs {s.stack} c{c}: "
                             f"${um:,.2f} vs ${us:,.2f} per 1M output tokens "
                             f"({'cheaper' if um < us else 'dearer'})")
    return Answer("the decode tier on another GPU: $ per 1M output tokens",
                  lines or ["no disagg variant with its decode tier on another GPU predicted"])


def slo_reach(preds: list[Prediction]) -> Answer:
    lines = []
    for p in preds:
        if not p.rows:
            lines.append(f"{p.stack}: not predicted ({p.not_predicted})")
            continue
        for slo in SLOS:
            met = [f"c{c}" for c, r in sorted(_sweep(p).items()) if slo.met(r)]
            unknown = [f"c{c}" for c, r in sorted(_sweep(p).items()) if slo.met(r) is None]
            best = p.best(slo)
            verdicts = [f"meets it at {', '.join(met) or 'no step'}"] \
                if met or len(unknown) < len(_sweep(p)) else []
            if best:
                verdicts.append(f"best {best.step.split('/')[-1]} "
                                f"{best.tok_s_per_gpu:,.1f} tok/s/GPU")
            if unknown:
                verdicts.append(f"no verdict at {', '.join(unknown)} (upper bounds)")
            lines.append(f"{p.stack} {slo.name}: {'; '.join(verdicts)}")
    return Answer("where each topology meets the SLO", lines)


def disagg_wins(preds: list[Prediction]) -> Answer:
    lines = []
    for a, d in _pairs(preds):
        sa, sd = _sweep(a), _sweep(d)
        for slo in SLOS:
            both = [c for c in sorted(set(sa) & set(sd))
                    if slo.met(sd[c]) is not None and slo.met(sa[c]) is not None]
            wins = [c for c in both if slo.met(sd[c])
                    and (not slo.met(sa[c]) or sd[c].tok_s_per_gpu > sa[c].tok_s_per_gpu)]
            # a win on throughput alone rests on the ITL that sets it: bands that overlap
            # leave it unresolved
            loose = [c for c in wins if slo.met(sa[c])
                     and overlap(sd[c].itl_band_ms, sa[c].itl_band_ms)]
            lines.append(f"{d.stack} over {a.stack} ({slo.name}): "
                         f"{', '.join(f'c{c}' for c in wins) or 'at no sweep step'}"
                         + (f" ({', '.join(f'c{c}' for c in loose)}: {NOT_RESOLVED})"
                            if loose else ""))
    return Answer("where disaggregation wins", lines or ["no agg/disagg pair predicted"])


def answers(preds: list[Prediction]) -> list[Answer]:
    return [f(preds) for f in (agg_vs_disagg, decode_tier_cost, slo_reach, disagg_wins)]


def render(preds: list[Prediction]) -> list[str]:
    alike = [p.stack for p in preds if p.rows and p not in distinct(preds)]
    out = [f"(predicted alike, so compared through the first of their kind: {', '.join(alike)})"
           ] if alike else []
    for i, a in enumerate(answers(preds), 1):
        out.append(f"{LABEL} {i}. {a.question}")
        out += [f"   {line}" for line in a.lines]
    return out
