"""PNG plots of the report (matplotlib, Agg backend). Each returns the file it wrote, or None
when the runs hold no data for it (the report then says "not measured")."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from reports.goodput import Slo  # noqa: E402

DPI = 110


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


def pareto(sweep: pd.DataFrame, slo: Slo, path: Path) -> Path | None:
    pts = sweep.dropna(subset=["output_tok_s_per_gpu", "ttft_p50_ms"])
    if pts.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5))
    xmax = pts["output_tok_s_per_gpu"].max() * 1.15
    ax.axhspan(0, slo.ttft_ms, color="tab:green", alpha=0.08,
               label=f"SLO region: TTFT p50 < {slo.ttft_ms:g} ms")
    for stack, s in pts.groupby("stack"):
        ax.plot(s["output_tok_s_per_gpu"], s["ttft_p50_ms"], "o-", alpha=0.8, label=stack)
        for _, r in s.iterrows():
            ax.annotate(f"c{int(r['concurrency'])}", (r["output_tok_s_per_gpu"], r["ttft_p50_ms"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
    front = pareto_front(pts, "output_tok_s_per_gpu", "ttft_p50_ms")
    # best TTFT reachable at >= a given throughput: each front point holds to its left
    ax.step(front["output_tok_s_per_gpu"], front["ttft_p50_ms"], "k--", where="pre",
            lw=1.2, label="Pareto front")
    ax.plot(front["output_tok_s_per_gpu"], front["ttft_p50_ms"], "ks", mfc="none", ms=9)
    ax.set_xlim(0, xmax)
    ax.set_ylim(0, max(pts["ttft_p50_ms"].max() * 1.2, 1))
    _decorate(ax, "output tok/s per GPU", "TTFT p50 (ms)",
              "Throughput vs latency across stacks and concurrencies")
    return _save(fig, path)


def latency_vs_concurrency(sweep: pd.DataFrame, path: Path) -> Path | None:
    if sweep.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric, title in ((axes[0], "ttft", "TTFT"), (axes[1], "itl", "ITL")):
        for stack, s in sweep.sort_values("concurrency").groupby("stack"):
            line, = ax.plot(s["concurrency"], s[f"{metric}_p50_ms"], "o-", label=f"{stack} p50")
            ax.plot(s["concurrency"], s[f"{metric}_p99_ms"], "x:", color=line.get_color(),
                    label=f"{stack} p99")
            lo, hi = s.get(f"{metric}_p50_ms_min"), s.get(f"{metric}_p50_ms_max")
            if lo is not None and hi is not None:
                ax.fill_between(s["concurrency"], lo, hi, color=line.get_color(), alpha=0.15)
        ax.set_xscale("log", base=2)
        _decorate(ax, "concurrency", f"{title} (ms)",
                  f"{title} vs concurrency (band: min-max over repeats)", legend=7)
    return _save(fig, path)


def ttft_per_turn(mt: pd.DataFrame, path: Path) -> Path | None:
    turns = mt[mt["turn"] != "all"] if not mt.empty else mt
    if turns.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for stack, s in turns.groupby("stack"):
        t = s["turn"].astype(int)
        line, = ax.plot(t, s["ttft_p50_ms"], "o-", label=f"{stack} p50")
        ax.plot(t, s["ttft_p99_ms"], "x:", color=line.get_color(), label=f"{stack} p99")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    _decorate(ax, "turn (0 = first)", "TTFT (ms)", "TTFT per turn of multi-turn conversations")
    return _save(fig, path)


def prefix_share(pc: pd.DataFrame, path: Path) -> Path | None:
    if pc.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for stack, s in pc.sort_values("prefix_share").groupby("stack"):
        axes[0].plot(s["prefix_share"] * 100, s["ttft_p50_ms"], "o-", label=stack)
        axes[1].plot(s["prefix_share"] * 100, s["server_hit_rate"] * 100, "o-", label=stack)
    axes[1].plot([0, 100], [0, 100], "k:", lw=1, label="hit rate = share")
    _decorate(axes[0], "prefix share of the input (%)", "TTFT p50 (ms)",
              "TTFT vs input prefix share")
    _decorate(axes[1], "prefix share of the input (%)", "measured server hit rate (%)",
              "Server-measured prefix hit rate vs asked share")
    return _save(fig, path)


def length_distributions(requests: pd.DataFrame, path: Path) -> Path | None:
    r = requests[requests["workload"] == "sequence_distributions"]
    if r.empty:
        return None
    dists = sorted(r["variant"].unique())
    fig, axes = plt.subplots(2, len(dists), figsize=(4.5 * len(dists), 6.5), squeeze=False)
    for j, dist in enumerate(dists):
        d = r[r["variant"] == dist]
        for i, (asked, got, name) in enumerate((("requested_isl", "isl", "ISL"),
                                                ("requested_osl", "osl", "OSL"))):
            ax = axes[i][j]
            vals = pd.concat([d[asked], d[got]]).dropna()
            bins = np.linspace(vals.min(), vals.max(), 20) if len(vals) else 10
            ax.hist(d[asked].dropna(), bins=bins, alpha=0.5, label="requested")
            ax.hist(d[got].dropna(), bins=bins, alpha=0.5, label="actual (server count)")
            ax.set_title(f"{dist}: {name}")
            ax.set_xlabel("tokens")
            ax.legend(fontsize=7)
    fig.suptitle("Length distributions, requested vs actual (all stacks pooled)")
    return _save(fig, path)
