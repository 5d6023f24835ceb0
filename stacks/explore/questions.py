"""The plan's four questions answered across the whole explored space (pure), per workload and
SLO, each answer labelled SIMULATED with the timing sources of the candidates it compares:

1. Does disaggregation win on the same GPUs? The cheapest aggregated candidate on a GPU group
   against the cheapest disaggregated one whose roles both sit on it.
2. Does a decode tier on another GPU type pay? The cheapest disaggregated candidate with its
   decode on another group (e.g. p4d prefill + g6e decode) against the cheapest with both roles
   on the prefill's group.
3. What does routing buy? Every pair of candidates that differ only in the router, both met
   the SLO: the KV router's $ per 1M over round-robin's.
4. What does host offload buy? The same for offload cpu over none; a pair simulated on the very
   same engine setup (the same fingerprint) says the simulation does not model offload.

A side whose cheapest candidate the search pruned is given by its bound ("at least $x"): the
answer is decided only when the bound already loses.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from stacks.explore.figure_bands import figure_bands
from stacks.explore.run import Exploration
from stacks.explore.search import Outcome, simulated_label
from stacks.explore.space import Candidate
from stacks.predict.bands import overlap


@dataclass(frozen=True)
class Answer:
    question: str
    workload: str
    slo: str
    text: str
    label: str


@dataclass(frozen=True)
class Side:
    usd: float | None             # the cheapest simulated candidate meeting the SLO
    label: str = ""
    floor: float | None = None    # the lowest bound of the pruned ones (nothing pruned: None)
    outcome: Outcome | None = None

    def words(self, what: str) -> str:
        if self.usd is None and self.floor is None:
            return f"{what}: no candidate meets the SLO"
        if self.usd is None:
            return f"{what}: every candidate pruned, none below ${self.floor:.3f}"
        pruned = f" (the pruned ones >= ${self.floor:.3f})" if self.floor is not None else ""
        return f"{what} ${self.usd:.3f} ({self.label}){pruned}"

    @property
    def low(self) -> float | None:
        """The lowest $ this side could have."""
        vals = [v for v in (self.usd, self.floor) if v is not None]
        return min(vals) if vals else None


def side(rows: list[Outcome], pick: Callable[[Candidate], bool]) -> Side:
    mine = [o for o in rows if pick(o.subject.candidate)]
    good = [o for o in mine if o.status == "simulated" and o.meets and o.usd is not None]
    pruned = [o.bound_usd for o in mine if o.status == "pruned" and o.bound_usd is not None
              and o.bound_usd != float("inf")]
    floor = min(pruned) if pruned else None
    if not good:
        return Side(None, floor=floor)
    o = min(good, key=lambda o: (o.usd, o.subject.candidate.label))
    return Side(o.usd, o.subject.candidate.label, floor, o)


def verdict(a: Side, b: Side, a_name: str, b_name: str) -> str:
    """Who is cheaper, when the numbers decide it."""
    if a.usd is not None and (b.low is None or a.usd < b.low):
        other = b.usd if b.usd is not None else b.low
        by = f" by {100 * (1 - a.usd / other):.0f} %" if other else ""
        return f"{a_name} cheaper{by}"
    if b.usd is not None and (a.low is None or b.usd < a.low):
        other = a.usd if a.usd is not None else a.low
        by = f" by {100 * (1 - b.usd / other):.0f} %" if other else ""
        return f"{b_name} cheaper{by}"
    if a.usd is not None and a.usd == b.usd:
        return "equal"
    if a.usd is None and b.usd is None:
        return "neither reaches the top K (both sides pruned by their bounds)"
    return "undecided (a pruned side's bound is below the other's best)"


def itl_band(o: Outcome) -> tuple[float, float] | None:
    """The ITL band (lo, hi ms) of an outcome's operating point (figure_bands.py)."""
    return figure_bands(o)["itl"]


def usd_band(side: Side) -> tuple[float, float] | None:
    """The side's $ per 1M as far as the timing model's ITL error moves it: decode-bound output
    tok/s falls as ITL rises, so $ scales with ITL / its band's edges."""
    o = side.outcome
    if o is None or side.usd is None or o.row is None or not o.row.itl_p50_ms:
        return None
    band = itl_band(o)
    if band is None:
        return None
    return side.usd * band[0] / o.row.itl_p50_ms, side.usd * band[1] / o.row.itl_p50_ms


NOT_RESOLVED = ("not resolved by the model: the two $ per 1M bands overlap (each the figure "
                "moved by its ITL band, AIConfigurator's own measured rows, "
                "stacks/predict/bands.py)")


def resolved(a: Side, b: Side) -> str:
    """'' when the timing model's error cannot reverse the verdict between two simulated
    sides, else NOT_RESOLVED (a missing band resolves nothing: bands.overlap)."""
    if a.usd is None or b.usd is None:
        return ""
    return f"; {NOT_RESOLVED}" if overlap(usd_band(a), usd_band(b)) else ""


def label(ex: Exploration, sides: list[Outcome]) -> str:
    return simulated_label([o.subject for o in sides])


def _rows(ex: Exploration, w: str, slo: str) -> list[Outcome]:
    return [o for o in ex.outcomes if o.workload == w and o.slo == slo]


def _groups(ex: Exploration) -> list[str]:
    return sorted({t.group for s in ex.subjects for t in s.candidate.tiers})


def on_groups(topology: str, *groups: str) -> Callable[[Candidate], bool]:
    """Candidates of `topology` whose roles sit on `groups` (one group: every role on it)."""
    def pick(c: Candidate) -> bool:
        where = tuple(t.group for t in c.tiers)
        return c.topology == topology and (where == groups or set(where) == set(groups) == {
            groups[0]})
    return pick


def disaggregation(ex: Exploration, w: str, slo: str) -> list[Answer]:
    out = []
    for g in _groups(ex):
        rows = _rows(ex, w, slo)
        agg = side(rows, on_groups("aggregated", g))
        dis = side(rows, on_groups("disaggregated", g))
        if agg.usd is None and dis.usd is None and agg.floor is None and dis.floor is None:
            continue
        text = (f"on {g}: {agg.words('aggregated')}; {dis.words('disaggregated')}: "
                f"{verdict(dis, agg, 'disaggregated', 'aggregated')}{resolved(dis, agg)}")
        out.append(Answer("1. disaggregation on the same GPUs", w, slo, text,
                          label(ex, [o for o in (agg.outcome, dis.outcome) if o])))
    return out


def decode_tier(ex: Exploration, w: str, slo: str) -> list[Answer]:
    out = []
    pairs = sorted({(s.candidate.tiers[0].group, s.candidate.tiers[1].group)
                    for s in ex.subjects if s.candidate.topology == "disaggregated"
                    and s.candidate.tiers[0].group != s.candidate.tiers[1].group})
    for pg, dg in pairs:
        rows = _rows(ex, w, slo)
        mixed = side(rows, on_groups("disaggregated", pg, dg))
        same = side(rows, on_groups("disaggregated", pg))
        text = (f"prefill {pg} + decode {dg}: {mixed.words('mixed')}; "
                f"{same.words(f'all on {pg}')}: "
                f"{verdict(mixed, same, f'the {dg} decode tier', f'all on {pg}')}"
                f"{resolved(mixed, same)}")
        out.append(Answer("2. a decode tier on another GPU", w, slo, text,
                          label(ex, [o for o in (mixed.outcome, same.outcome) if o])))
    return out


def _twins(ex: Exploration, w: str, slo: str, attr: str, a: str, b: str,
           question: str, what: str) -> Answer:
    rows = _rows(ex, w, slo)
    by: dict[tuple, dict[str, Outcome]] = {}
    for o in rows:
        c = o.subject.candidate
        key = (c.precision, c.tiers, *(getattr(c, x) for x in ("router", "offload")
                                         if x != attr))
        by.setdefault(key, {})[getattr(c, attr)] = o
    pairs = [(p[a], p[b]) for p in by.values() if a in p and b in p]
    same = [x for x, y in pairs if x.subject.prepared is not None and y.subject.prepared
            is not None and x.subject.prepared.fingerprint == y.subject.prepared.fingerprint]
    both = [(x, y) for x, y in pairs if x.status == y.status == "simulated" and x.meets and
            y.meets and x.usd and y.usd]
    if pairs and len(same) == len([1 for x, y in pairs if x.subject.prepared and
                                   y.subject.prepared]) and same:
        text = (f"not modelled: {len(same)} pair(s) run on the very same simulated engine "
                f"with {what} and without (DynoSim here does not model it; the figures are "
                "equal by construction)")
        return Answer(question, w, slo, text, label(ex, same))
    if not both:
        text = f"no pair of twins both simulated and meeting the SLO ({len(pairs)} pair(s))"
        return Answer(question, w, slo, text, label(ex, []))
    ratios = [y.usd / x.usd for x, y in both if x.usd and y.usd]
    best_a, best_b = side(rows, _having(attr, a)), side(rows, _having(attr, b))
    text = (f"{what} over its twin, $ per 1M x{statistics.median(ratios):.3f} median "
            f"(x{min(ratios):.3f} .. x{max(ratios):.3f}, {len(ratios)} pair(s)); cheapest "
            f"{best_b.words(b)}; {best_a.words(a)}")
    return Answer(question, w, slo, text, label(ex, [o for pair in both for o in pair]))


def _having(attr: str, value: str) -> Callable[[Candidate], bool]:
    return lambda c: bool(getattr(c, attr) == value)


def answers(ex: Exploration) -> list[Answer]:
    out: list[Answer] = []
    for w in ex.workloads:
        for slo in ex.slos:
            out += disaggregation(ex, w, slo.name)
            out += decode_tier(ex, w, slo.name)
            out.append(_twins(ex, w, slo.name, "router", "round-robin", "kv",
                              "3. routing", "the KV router"))
            out.append(_twins(ex, w, slo.name, "offload", "none", "cpu",
                              "4. host offload", "CPU offload"))
    return out
