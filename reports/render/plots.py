"""PNG plots of the report (matplotlib, Agg backend). Each returns the file it wrote, or None
when the runs hold no data for it (the report then says "not measured").

Every title starts with the rehearsal label when a local (mocker) run is in it. A failed,
interrupted or client-bound step is drawn as a red cross, named in the legend and never on the
Pareto front; a p99 from fewer than 100 samples is named so in the legend. Every axis names its
unit; legends sit right of the data and point labels never overlap (reports/render/plot_labels.py);
SLO limits are lines, never a shaded region. The Pareto plot follows the field's convention:
output throughput per GPU (up) against per-user throughput and against TTFT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from reports.records.measures import too_few  # noqa: E402
from reports.records.stackinfo import StackInfo, rehearsal_timings  # noqa: E402
from reports.render.plot_labels import Label, legend_outside, place, settle  # noqa: E402
from reports.tables.goodput import Slo  # noqa: E402

DPI = 110
FLAGGED: dict[str, Any] = dict(marker="X", color="red", ms=11, ls="none", mfc="none", mew=1.8)


def rehearsal_tag(infos: dict[str, StackInfo]) -> str:
    """Title prefix: which of the plotted stacks are rehearsals on the local mocker, and the
    timings each ran on (stackinfo.rehearsal_timings: the words the whole report uses); the
    stacks are named only when not all are rehearsals on the same timings."""
    local = [s for s, i in infos.items() if i.rehearsal]
    if not local:
        return ""
    shorts = rehearsal_timings(infos, named=False)
    one = len(local) == len(infos) and "; " not in shorts
    word = " / ".join(sorted({infos[s].unmeasured for s in local}, reverse=True))
    return (f"{word}, {shorts}\n" if one else f"{word} ({rehearsal_timings(infos)})\n")


def _usable(frame: pd.DataFrame) -> pd.Series:
    return frame["usable"].astype(bool) if "usable" in frame else pd.Series(True, frame.index)


CONCURRENCY = "concurrency (requests in flight)"
TOK_S_GPU = "output throughput per GPU (tokens/s/GPU)"


def _mark_flagged(ax: plt.Axes, frame: pd.DataFrame, x: str, y: str) -> list[Label]:
    """Red crosses for the steps left out; their labels (stack and the flag's first word) to
    place once the layout is final."""
    bad = frame[~_usable(frame)].dropna(subset=[x, y])
    if bad.empty:
        return []
    ax.plot(bad[x], bad[y], label="left out: failed / interrupted / client-bound step",
            **FLAGGED)
    return [Label(r[x], r[y], f"{r['stack']} {str(r.get('step_flag') or '').split(':')[0]}",
                  "red") for _, r in bad.iterrows()]


def _p99_label(stack: object, frame: pd.DataFrame) -> str:  # stack: a group key, its name
    n = frame["percentile_samples"] if "percentile_samples" in frame else pd.Series(dtype=float)
    small = any(too_few(v, 99) for v in n)
    return f"{stack} p99" + (" (< 100 samples)" if small else "")


def _decorate(ax: plt.Axes, xlabel: str, ylabel: str, title: str, legend: int = 8) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend)


def _axes(xlabel: str, ylabel: str, title: str, ax: plt.Axes) -> None:
    """Labels, title and grid; the legend right of the axes."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(ax)


def _figure(ncols: int, width: float, height: float = 4.6):
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), layout="constrained",
                             squeeze=False)
    return fig, list(axes[0])


def _place_all(fig: plt.Figure, labels: dict[plt.Axes, list[Label]]) -> None:
    settle(fig)
    for ax, lbs in labels.items():
        place(ax, lbs)


def _save(fig: plt.Figure, path: Path) -> Path:
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _concurrency_axis(ax: plt.Axes, values: pd.Series) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted({int(v) for v in values.dropna()})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def pareto_front(points: pd.DataFrame, x: str, y: str, x_higher: bool = True,
                 y_higher: bool = False) -> pd.DataFrame:
    """Points no other point beats on both axes (`x_higher` / `y_higher`: more is better on
    that axis; default: more `x` throughput, less `y` latency), sorted by x."""
    pts = points.dropna(subset=[x, y]).sort_values([x, y], ascending=[not x_higher, y_higher])
    front, best = [], -np.inf
    for _, p in pts.iterrows():
        value = p[y] if y_higher else -p[y]
        if value > best:
            front.append(p)
            best = value
    return pd.DataFrame(front).sort_values(x) if front else pts.iloc[0:0]


def _slo_line(ax: plt.Axes, limit: float | None, data_max: float, text: str) -> float:
    """A dashed line at an SLO limit on the x axis; a limit far right of every point is named
    in the legend instead of squeezing the points into a corner. The x axis' right end."""
    right = max(data_max * 1.15, 1.0)
    if limit is None:
        return right
    if limit <= 1.5 * data_max:
        ax.axvline(limit, color="tab:green", ls="--", lw=1.2, label=text)
        return max(right, limit * 1.1)
    ax.plot([], [], color="tab:green", ls="--", lw=1.2,
            label=f"{text}: beyond the axis, every point inside")
    return right


def pareto(sweep: pd.DataFrame, slo: Slo, path: Path, tag: str = "") -> Path | None:
    y = "output_tok_s_per_gpu"
    every = sweep.dropna(subset=[y])
    if every.empty:
        return None
    pts = every[_usable(every)]
    fig, axes = _figure(2, 12.5)
    labels: dict[plt.Axes, list[Label]] = {}
    panels = (("output_tok_s_per_user_p50", "per-user output throughput p50 (tokens/s/user)",
               True, slo.min_tok_s_per_user, f"SLO: >= {slo.min_tok_s_per_user or 0:g} "
               "tokens/s/user", "against per-user throughput"),
              ("ttft_p50_ms", "TTFT p50 (ms)", False, slo.ttft_ms,
               f"SLO: TTFT < {slo.ttft_ms:g} ms", "against time to first token"))
    for ax, (x, xlabel, x_higher, limit, slo_text, what) in zip(axes, panels, strict=True):
        labels[ax] = []
        for stack, s in pts.dropna(subset=[x]).sort_values("concurrency").groupby("stack"):
            ax.plot(s[x], s[y], "o-", alpha=0.8, label=stack)
            labels[ax] += [Label(r[x], r[y], f"c{int(r['concurrency'])}")
                           for _, r in s.iterrows()]
        labels[ax] += _mark_flagged(ax, every, x, y)
        front = pareto_front(pts, x, y, x_higher=x_higher, y_higher=True)
        ax.plot(front[x], front[y], "k--", lw=1.2, label="Pareto front (usable steps)")
        ax.plot(front[x], front[y], "ks", mfc="none", ms=9)
        data_max = every[x].max() if every[x].notna().any() else 1.0
        ax.set_xlim(0, _slo_line(ax, limit, data_max, slo_text))
        ax.set_ylim(0, max(every[y].max() * 1.2, 1))
        _axes(xlabel, TOK_S_GPU, f"{tag}Throughput per GPU {what}", ax)
    _place_all(fig, labels)
    return _save(fig, path)


def latency_vs_concurrency(sweep: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    if sweep.empty:
        return None
    fig, axes = _figure(2, 12.5)
    labels: dict[plt.Axes, list[Label]] = {}
    good = sweep[_usable(sweep)]
    for ax, metric, title in ((axes[0], "ttft", "TTFT"), (axes[1], "itl", "ITL")):
        for stack, s in good.sort_values("concurrency").groupby("stack"):
            line, = ax.plot(s["concurrency"], s[f"{metric}_p50_ms"], "o-", label=f"{stack} p50")
            ax.plot(s["concurrency"], s[f"{metric}_p99_ms"], "x:", color=line.get_color(),
                    label=_p99_label(stack, s))
            lo, hi = s.get(f"{metric}_p50_ms_min"), s.get(f"{metric}_p50_ms_max")
            if lo is not None and hi is not None:   # spread over repeats, at each point only
                ax.fill_between(s["concurrency"], lo, hi, color=line.get_color(), alpha=0.15)
        labels[ax] = _mark_flagged(ax, sweep, "concurrency", f"{metric}_p50_ms")
        _concurrency_axis(ax, sweep["concurrency"])
        _axes(CONCURRENCY, f"{title} (ms)",
              f"{tag}{title} vs concurrency (band: min-max over repeats)", ax)
    _place_all(fig, labels)
    return _save(fig, path)


def throughput_vs_concurrency(sweep: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    """Aggregate output tokens/s and per GPU against concurrency: where throughput stops
    growing with load."""
    if sweep.empty:
        return None
    fig, axes = _figure(2, 12.5)
    labels: dict[plt.Axes, list[Label]] = {}
    good = sweep[_usable(sweep)]
    for ax, col, ylabel, what in ((axes[0], "output_tok_s", "output throughput (tokens/s)",
                                   "Output throughput"),
                                  (axes[1], "output_tok_s_per_gpu", TOK_S_GPU,
                                   "Output throughput per GPU")):
        for stack, s in good.sort_values("concurrency").groupby("stack"):
            line, = ax.plot(s["concurrency"], s[col], "o-", label=stack)
            lo, hi = s.get(f"{col}_min"), s.get(f"{col}_max")
            if lo is not None and hi is not None:
                ax.fill_between(s["concurrency"], lo, hi, color=line.get_color(), alpha=0.15)
        labels[ax] = _mark_flagged(ax, sweep, "concurrency", col)
        _concurrency_axis(ax, sweep["concurrency"])
        ax.set_ylim(bottom=0)
        _axes(CONCURRENCY, ylabel, f"{tag}{what} vs concurrency", ax)
    _place_all(fig, labels)
    return _save(fig, path)


def ttft_per_turn(mt: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    turns = mt[mt["turn"] != "all"] if not mt.empty else mt
    if turns.empty:
        return None
    fig, (ax,) = _figure(1, 8.5)
    for stack, s in turns[_usable(turns)].groupby("stack"):
        t = s["turn"].astype(int)
        line, = ax.plot(t, s["ttft_p50_ms"], "o-", label=f"{stack} p50")
        ax.plot(t, s["ttft_p99_ms"], "x:", color=line.get_color(), label=_p99_label(stack, s))
    labels = _mark_flagged(ax, turns.assign(turn_n=turns["turn"].astype(int)), "turn_n",
                           "ttft_p50_ms")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    _axes("conversation turn (index, 0 = first)", "TTFT (ms)",
          tag + "TTFT per turn of multi-turn conversations", ax)
    _place_all(fig, {ax: labels})
    return _save(fig, path)


def prefix_share(pc: pd.DataFrame, path: Path, tag: str = "") -> Path | None:
    if pc.empty:
        return None
    fig, axes = _figure(2, 12.5)
    pcs = pc.assign(share_pct=pc["prefix_share"] * 100, hit_pct=pc["server_hit_rate"] * 100)
    for stack, s in pcs[_usable(pcs)].sort_values("prefix_share").groupby("stack"):
        axes[0].plot(s["share_pct"], s["ttft_p50_ms"], "o-", label=stack)
        axes[1].plot(s["share_pct"], s["hit_pct"], "o-", label=stack)
    labels = {axes[0]: _mark_flagged(axes[0], pcs, "share_pct", "ttft_p50_ms"),
              axes[1]: _mark_flagged(axes[1], pcs, "share_pct", "hit_pct")}
    axes[1].plot([0, 100], [0, 100], "k:", lw=1, label="hit rate = share")
    share = "prefix share of the input, asked (%)"
    _axes(share, "TTFT p50 (ms)", tag + "TTFT vs input prefix share", axes[0])
    _axes(share, "server-measured prefix hit rate (%)",
          tag + "Server-measured prefix hit rate vs asked share", axes[1])
    _place_all(fig, labels)
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
    fig, axes = plt.subplots(2, len(dists), figsize=(4.5 * len(dists), 7), squeeze=False,
                             layout="constrained")
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
            ax.set_title(f"{dist}: {name}", fontsize=10)
            ax.set_xlabel(f"{name} (tokens)")
            ax.set_ylabel("requests (count)")
            ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
            ax.legend(fontsize=7)
    fig.suptitle(tag.replace("\n", ": ") + "Length distributions, requested vs actual "
                 "(all stacks pooled)" + left_out, fontsize=10)
    return _save(fig, path)
