"""The search's outcomes as rows (pure): per workload and SLO the rank by $ per 1M output tokens,
the Pareto frontier (output tok/s per GPU vs tok/s per user), and explore.csv's rows, one per
candidate x workload x SLO (refused and pruned candidates too, with why)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stacks.explore.figure_bands import figure_bands
from stacks.explore.figure_bands import words as band_words
from stacks.explore.run import Exploration
from stacks.explore.search import Outcome
from stacks.explore.space import Candidate

CSV_COLUMNS = ("candidate", "stack", "topology", "precision", "gpu", "tp", "replicas", "gpus",
               "router", "offload", "workload", "slo", "status", "concurrency", "meets_slo",
               "output_tok_s_per_gpu", "tok_s_per_user", "ttft_p50_ms", "itl_p50_ms",
               "ttft_p50_likely_ms", "itl_p50_likely_ms", "usd_per_1m_output_tokens",
               "bound_usd_per_1m", "pareto", "rank", "note")


@dataclass(frozen=True)
class Ranked:
    outcome: Outcome
    rank: int | None
    pareto: bool

    @property
    def candidate(self) -> Candidate:
        return self.outcome.subject.candidate

    @property
    def tok_s_per_gpu(self) -> float | None:
        r = self.outcome.row
        return r.output_tok_s / self.candidate.gpus if r and r.output_tok_s else None

    @property
    def tok_s_per_user(self) -> float | None:
        return self.outcome.row.tok_s_per_user if self.outcome.row else None


def _good(o: Outcome) -> bool:
    return o.status == "simulated" and bool(o.meets) and o.usd is not None


def frontier(points: list[tuple[float, float]]) -> list[bool]:
    """Which points no other point beats on both axes (at least as high on both, higher on
    one)."""
    return [not any(x2 >= x and y2 >= y and (x2 > x or y2 > y) for x2, y2 in points)
            for x, y in points]


def ranked(ex: Exploration, workload: str, slo: str) -> list[Ranked]:
    """The outcomes of one workload and SLO, rank 1 the cheapest meeting it (ties: faster per
    user, then the label), then the others."""
    rows = [o for o in ex.outcomes if o.workload == workload and o.slo == slo]
    good = sorted((o for o in rows if _good(o)),
                  key=lambda o: (o.usd, -(o.row.tok_s_per_user or 0) if o.row else 0,
                                 o.subject.candidate.label))
    pts = [((o.row.output_tok_s or 0) / o.subject.candidate.gpus if o.row else 0.0,
            (o.row.tok_s_per_user or 0) if o.row else 0.0) for o in good]
    on = frontier(pts)
    # rank 1 + the engine setups that are cheaper: twins on one setup and equal $ share a
    # rank, and the top K are K setups (what the search proves)
    setups = {_setup(o): o.usd for o in good}
    out = [Ranked(o, 1 + sum(u is not None and o.usd is not None and u < o.usd
                             for u in setups.values()), p)
           for o, p in zip(good, on, strict=True)]
    rest = sorted((o for o in rows if not _good(o)), key=lambda o: (
        ["simulated", "pruned", "unsimulated"].index(o.status), o.bound_usd or 0,
        o.subject.candidate.label))
    return out + [Ranked(o, None, False) for o in rest]


def _setup(o: Outcome) -> str:
    """The engine setup a row was simulated on (twins share it)."""
    p = o.subject.prepared
    return p.fingerprint if p is not None else o.subject.candidate.name


def setup_of(r: Ranked) -> str:
    return _setup(r.outcome)


def grouped(rows: list[Ranked]) -> list[tuple[Ranked, list[Ranked]]]:
    """Rows with their twins on the same engine setup folded under the first."""
    out: list[tuple[Ranked, list[Ranked]]] = []
    seen: dict[str, list[Ranked]] = {}
    for r in rows:
        key = setup_of(r)
        if key in seen:
            seen[key].append(r)
        else:
            seen[key] = []
            out.append((r, seen[key]))
    return out


def best(ex: Exploration, workload: str, slo: str) -> Ranked | None:
    top = ranked(ex, workload, slo)
    return top[0] if top and top[0].rank == 1 else None


def per_role(c: Candidate, what: str) -> str:
    if c.topology == "aggregated":
        return str(getattr(c.tiers[0], what))
    return ";".join(f"{t.role}={getattr(t, what)}" for t in c.tiers)


def _fmt(x: float | None, digits: int) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def candidate_columns(c: Candidate) -> dict[str, Any]:
    return {"candidate": c.label, "stack": c.name, "topology": c.topology,
            "precision": c.precision, "gpu": per_role(c, "gpu"), "tp": per_role(c, "tp"),
            "replicas": ";".join(f"{t.role}={t.replicas}" for t in c.tiers),
            "gpus": c.gpus, "router": c.router, "offload": c.offload}


def csv_rows(ex: Exploration) -> list[dict[str, Any]]:
    out = []
    for w in ex.workloads:
        for slo in ex.slos:
            for r in ranked(ex, w, slo.name):
                o, row = r.outcome, r.outcome.row
                bands = figure_bands(o) if o.status == "simulated" else {}
                out.append({**candidate_columns(r.candidate), "workload": w, "slo": slo.name,
                            "status": o.status,
                            "concurrency": row.concurrency if row and o.meets else "",
                            "meets_slo": "" if o.meets is None else str(o.meets).lower(),
                            "output_tok_s_per_gpu": _fmt(r.tok_s_per_gpu, 1),
                            "tok_s_per_user": _fmt(r.tok_s_per_user, 1),
                            "ttft_p50_ms": _fmt(row.ttft_p50_ms if row else None, 1),
                            "itl_p50_ms": _fmt(row.itl_p50_ms if row else None, 2),
                            "ttft_p50_likely_ms": band_words(bands.get("ttft")),
                            "itl_p50_likely_ms": band_words(bands.get("itl")),
                            "usd_per_1m_output_tokens": _fmt(o.usd, 4),
                            "bound_usd_per_1m": _fmt(o.bound_usd, 4)
                            if o.bound_usd is not None and o.bound_usd != float("inf") else "",
                            "pareto": str(r.pareto).lower(), "rank": r.rank or "",
                            "note": o.note})
    for ref in ex.refused:
        out += [{**candidate_columns(ref.candidate), "workload": w, "slo": slo.name,
                 "status": "refused", "note": ref.rules}
                for w in ex.workloads for slo in ex.slos]
    return [{k: row.get(k, "") for k in CSV_COLUMNS} for row in out]
