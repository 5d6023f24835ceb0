"""PNG plots of the report (matplotlib, Agg backend). Each returns the file it wrote, or None
when the runs hold no data for it (the report then says "not measured").

Every title starts with the rehearsal label when a local (mocker) run is in it. A failed,
interrupted or client-bound step is drawn as a red cross, named in the legend and never on the
Pareto front; a p99 from fewer than 100 samples is named so in the legend."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from reports.goodput import Slo  # noqa: E402
from reports.measures import too_few  # noqa: E402
from reports.stackinfo import StackInfo  # noqa: E402

DPI = 110
FLAGGED = dict(marker="X", color="red", ms=11, ls="none", mfc="none", mew=1.8)


def rehearsal_tag(infos: dict[str, StackInfo]) -> str:
    """Title prefix: which of the plotted stacks are rehearsals on the local mocker."""
    local = sorted(s for s, i in infos.items() if i.rehearsal)
    if not local:
        return ""
    which = "" if len(local) == len(infos) else f" ({', '.join(local)})"
    return f"REHEARSAL on the local mocker{which}, not GPU timings\n"


def _usable(frame: pd.DataFrame) -> pd.Series:
    return frame["usable"].astype(bool) if "usable" in frame else pd.Series(True, frame.index)


def _mark_flagged(ax: plt.Axes, frame: pd.DataFrame, x: str, y: str) -> None:
    bad = frame[~_usable(frame)].dropna(subset=[x, y])
    if not bad.empty:
        ax.plot(bad[x], bad[y], label="left out: failed / interrupted / client-bound step",
                **FLAGGED)
        for _, r in bad.iterrows():   # which stack, and why: the flag's first word
            why = str(r.get("step_flag") or "").split(":")[0]
            ax.annotate(f"{r['stack']} {why}", (r[x], r[y]), textcoords="offset points",
                        xytext=(6, -10), fontsize=7, color="red")


def _p99_label(stack: str, frame: pd.DataFrame) -> str:
    n = frame["percentile_samples"] if "percentile_samples" in frame else pd.Series(dtype=float)
    small = any(too_few(v, 99) for v in n)
    return f"{stack} p99" + (" (< 100 samples)" if small else "")


def _decorate(ax: plt.Axes, xlabel: str, ylabel: str, title: str, legend: int = 8) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend)


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def pareto_front(points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Points not dominated by another with more `x` (throughput) and less `y` (latency)."""
    pts = points.dropna(subset=[x, y]).sort_values([x, y], ascending=[False, True])
    front, best_y = [], np.inf
    for _, p in pts.iterrows():
        if p[y] < best_y:
            front.append(p)
            best_y = p[y]
    return pd.DataFrame(front).sort_values(x) if front else pts.iloc[0:0]


def pareto(sweep: pd.DataFrame, slo: Slo, path: Path, tag: str = "") -> Path | None:
    every = sweep.dropna(subset=["output_tok_s_per_gpu", "ttft_p50_ms"])
    pts = every[_usable(every)]
    if every.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5))
    ax.axhspan(0, slo.ttft_ms, color="tab:green", alpha=0.08,
               label=f"SLO region: TTFT p50 < {slo.ttft_ms:g} ms")
    for stack, s in pts.groupby("stack"):
        ax.plot(s["output_tok_s_per_gpu"], s["ttft_p50_ms"], "o-", alpha=0.8, label=stack)
        for _, r in s.iterrows():
            ax.annotate(f"c{int(r['concurrency'])}", (r["output_tok_s_per_gpu"], r["ttft_p50_ms"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
    _mark_flagged(ax, every, "output_tok_s_per_gpu", "ttft_p50_ms")
    front = pareto_front(pts, "output_tok_s_per_gpu", "ttft_p50_ms")
    # best TTFT reachable at >= a given throughput: each front point holds to its left
    ax.step(front["output_tok_s_per_gpu"], front["ttft_p50_ms"], "k--", where="pre",
            lw=1.2, label="Pareto front (usable steps)")
    ax.plot(front["output_tok_s_per_gpu"], front["ttft_p50_ms"], "ks", mfc="none", ms=9)
    ax.set_xlim(0, every["output_tok_s_per_gpu"].max() * 1.15)
    ax.set_ylim(0, max(every["ttft_p50_ms"].max() * 1.2, 1))
    _decorate(ax, "output tok/s per GPU", "TTFT p50 (ms)",
              tag + "Throughput vs latency across stacks and concurrencies")
    return _save(fig, path)


def latency_vs_concurrency(sweep: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    if sweep.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    good = sweep[_usable(sweep)]
    for ax, metric, title in ((axes[0], "ttft", "TTFT"), (axes[1], "itl", "ITL")):
        for stack, s in good.sort_values("concurrency").groupby("stack"):
            line, = ax.plot(s["concurrency"], s[f"{metric}_p50_ms"], "o-", label=f"{stack} p50")
            ax.plot(s["concurrency"], s[f"{metric}_p99_ms"], "x:", color=line.get_color(),
                    label=_p99_label(stack, s))
            lo, hi = s.get(f"{metric}_p50_ms_min"), s.get(f"{metric}_p50_ms_max")
            if lo is not None and hi is not None:
                ax.fill_between(s["concurrency"], lo, hi, color=line.get_color(), alpha=0.15)
        _mark_flagged(ax, sweep, "concurrency", f"{metric}_p50_ms")
        ax.set_xscale("log", base=2)
        _decorate(ax, "concurrency", f"{title} (ms)",
                  f"{tag}{title} vs concurrency (band: min-max over repeats)", legend=7)
    return _save(fig, path)


def ttft_per_turn(mt: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    turns = mt[mt["turn"] != "all"] if not mt.empty else mt
    if turns.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for stack, s in turns[_usable(turns)].groupby("stack"):
        t = s["turn"].astype(int)
        line, = ax.plot(t, s["ttft_p50_ms"], "o-", label=f"{stack} p50")
        ax.plot(t, s["ttft_p99_ms"], "x:", color=line.get_color(), label=_p99_label(stack, s))
    _mark_flagged(ax, turns.assign(turn_n=turns["turn"].astype(int)), "turn_n", "ttft_p50_ms")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    _decorate(ax, "turn (0 = first)", "TTFT (ms)",
              tag + "TTFT per turn of multi-turn conversations")
    return _save(fig, path)


def prefix_share(pc: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    if pc.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    pcs = pc.assign(share_pct=pc["prefix_share"] * 100, hit_pct=pc["server_hit_rate"] * 100)
    for stack, s in pcs[_usable(pcs)].sort_values("prefix_share").groupby("stack"):
        axes[0].plot(s["share_pct"], s["ttft_p50_ms"], "o-", label=stack)
        axes[1].plot(s["share_pct"], s["hit_pct"], "o-", label=stack)
    _mark_flagged(axes[0], pcs, "share_pct", "ttft_p50_ms")
    _mark_flagged(axes[1], pcs, "share_pct", "hit_pct")
    axes[1].plot([0, 100], [0, 100], "k:", lw=1, label="hit rate = share")
    _decorate(axes[0], "prefix share of the input (%)", "TTFT p50 (ms)",
              tag + "TTFT vs input prefix share")
    _decorate(axes[1], "prefix share of the input (%)", "measured server hit rate (%)",
              tag + "Server-measured prefix hit rate vs asked share")
    return _save(fig, path)


def length_distributions(requests: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    every = requests[requests["workload"] == "sequence_distributions"]
    if every.empty:
        return None
    r = every[_usable(every)]
    flagged = sorted(set(every.loc[~_usable(every), "stack"] + " "
                         + every.loc[~_usable(every), "step"]))
    left_out = f"\nleft out (failed / client-bound steps): {', '.join(flagged)}" \
        if flagged else ""
    dists = sorted(r["variant"].unique()) or sorted(every["variant"].unique())
    fig, axes = plt.subplots(2, len(dists), figsize=(4.5 * len(dists), 6.5), squeeze=False)
    for j, dist in enumerate(dists):
        d = r[r["variant"] == dist]
        for i, (asked, got, name) in enumerate((("requested_isl", "isl", "ISL"),
                                                ("requested_osl", "osl", "OSL"))):
            ax = axes[i][j]
            vals = pd.concat([d[asked], d[got]]).dropna()
            bins = np.linspace(vals.min(), vals.max(), 20) if len(vals) else 10
            ax.hist(d[asked].dropna(), bins=bins, alpha=0.5, label="requested")
            done = d[d["completed"].astype(bool)]
            ax.hist(done[got].dropna(), bins=bins, alpha=0.5,
                    label="actual (server count, completed)")
            ax.set_title(f"{dist}: {name}")
            ax.set_xlabel("tokens")
            ax.legend(fontsize=7)
    fig.suptitle(tag.replace("\n", " ") + "Length distributions, requested vs actual "
                 "(all stacks pooled)" + left_out, fontsize=10)
    return _save(fig, path)
