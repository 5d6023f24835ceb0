"""The B200 recipes' published tok/s/GPU figures: reference rows for sla.csv and compare.

These are figures a source published, not measurements of this project, and every table that
shows them says so (`PUBLISHED_LABEL`). They are kept here, in one place, as typed data; where
they come from is in `source` and how far they were checked in `status` (research brief
/work/briefs/b200-models.md, sections 2.4, 3.4, 4.4 and 5.4):
- `ART`: the seed article (NVIDIA Korea blog on the four recipes), which gives the baseline ->
  optimized pairs: A.X K2 44.3 -> 76.5, K-EXAONE 55.0 -> 87.0, Solar 151.6 -> 216.9, Motif 3
  86.95 -> 319.26 (3P1D) with agg 293.96;
- the recipe READMEs / docs in ai-dynamo/dynamo, which give the same optimized figures with
  their concurrency, per-user speed (each with its own definition) and TTFT.
All on the 15 % subset of the "8k/1k, 70 % KV reuse" Mooncake chat trace (1,805 requests,
mean ISL 37.4k), SLA >= 50 tok/s per user and p50 TTFT < 5 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from stacks.catalog.model_catalog import AX_K2, K_EXAONE, MOTIF_3, SOLAR_OPEN2

PUBLISHED_LABEL = "published figure, not a measurement"
UserSpeed = Literal["mean", "p50", "e2e"]
Kind = Literal["baseline", "aggregated", "disaggregated"]

ART = "seed article (NVIDIA Korea blog, design brief 'Second source')"
_DYN = "ai-dynamo/dynamo"
TRACE_NOMINAL_REUSE = 0.70


@dataclass(frozen=True)
class PublishedFigure:
    model: str                     # the checkpoint id, as the stacks' model.id
    kind: Kind
    layout: str
    gpus: int | None               # None: the source does not say
    concurrency: int | None
    tok_s_per_gpu: float
    source: str
    status: str                    # VERIFIED in a primary source, or "seed article only"
    user_tok_s: float | None = None
    user_speed: UserSpeed | None = None
    ttft_p50_ms: float | None = None
    speculative: str = "not stated"
    excluded_over_context: int | None = None
    measured_reuse: float | None = None


PUBLISHED: tuple[PublishedFigure, ...] = (
    PublishedFigure(AX_K2, "baseline", "baseline (layout not stated)", 8, None, 44.3, ART,
                    "seed article only"),
    PublishedFigure(AX_K2, "aggregated", "2 x TP4, KV router", 8, 16, 76.49,
                    f"{_DYN} recipes/ax-k2/README.md (seed article: 76.5)", "VERIFIED",
                    55.83, "mean", 525.0, "synthetic acceptance length 2.12 (EAGLE3 x3)", 0),
    PublishedFigure(AX_K2, "disaggregated", "2 prefill TP4 + 1 decode TP4", 12, 16, 61.97,
                    f"{_DYN} recipes/ax-k2/README.md", "VERIFIED", 83.0, "mean", 3879.0,
                    "synthetic acceptance length 2.12 (EAGLE3 x3)"),
    PublishedFigure(K_EXAONE, "baseline", "baseline (layout not stated)", 4, None, 55.0, ART,
                    "seed article only"),
    PublishedFigure(K_EXAONE, "aggregated", "1 x TP4", 4, 7, 87.0,
                    f"{_DYN} recipes/k-exaone-2.0/README.md, docs k-exaone-2.mdx", "VERIFIED",
                    51.4, "e2e", 291.0, "real (MTP x2)", 38, 0.088),
    PublishedFigure(K_EXAONE, "disaggregated", "1 prefill TP4 + 1 decode TP4", 8, 7, 55.0,
                    f"{_DYN} recipes/k-exaone-2.0/README.md", "VERIFIED", 70.6, "e2e", 1018.0,
                    "real (MTP x2)", 38),
    PublishedFigure(SOLAR_OPEN2, "baseline", "baseline (layout not stated)", 4, None, 151.6,
                    ART, "seed article only"),
    PublishedFigure(SOLAR_OPEN2, "aggregated", "2 x TP2, KV router", 4, 20, 216.88,
                    f"{_DYN} docs solar-open2-250b.mdx (seed article: 216.9)", "VERIFIED",
                    52.02, "p50", 308.0, "none (not supported on this checkpoint)"),
    PublishedFigure(SOLAR_OPEN2, "disaggregated", "1 prefill TP4 + 2 decode TP2, round-robin",
                    8, 44, 206.20, f"{_DYN} docs solar-open2-250b.mdx", "VERIFIED", 51.69,
                    "p50", 2277.0, "none (not supported on this checkpoint)"),
    PublishedFigure(MOTIF_3, "baseline", "baseline (layout not stated)", None, None, 86.95,
                    ART, "seed article only"),
    PublishedFigure(MOTIF_3, "aggregated", "1 x TP2 + expert parallel", 2, 11, 293.96,
                    f"{_DYN} docs motif-3.mdx; seed article", "VERIFIED", 66.27, "p50",
                    388.18, "synthetic acceptance length 2.13 (MTP x2)", 35),
    PublishedFigure(MOTIF_3, "disaggregated", "3 prefill TP2 + 1 decode TP2, KV router", 8,
                    None, 319.26, ART, "seed article only (not in the recipe files)"),
)


def published_for(models: set[str]) -> list[PublishedFigure]:
    return [p for p in PUBLISHED if p.model in models]


def published_figure(model: str, kind: str) -> PublishedFigure | None:
    """The model's published figure of `kind` (a Kind; a stack's topology may also be "none",
    which has none)."""
    return next((p for p in PUBLISHED if p.model == model and p.kind == kind), None)


def model_user_speed(model: str) -> UserSpeed | None:
    """The per-user speed definition the model's optimized figure was published with, so a
    measurement of that model is judged like-for-like (A.X K2 mean, K-EXAONE end-to-end, Solar
    Open 2 and Motif 3 p50); None for a model without published figures."""
    kinds = [p.user_speed for p in PUBLISHED if p.model == model and p.user_speed]
    return kinds[0] if kinds else None
