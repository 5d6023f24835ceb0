"""Client saturation guard: was AIPerf itself the bottleneck of a step?

A background thread samples the CPU of the AIPerf process tree (psutil) while the step runs.
Afterwards `verdict` flags the step when the client could not hold the requested concurrency
(achieved < CONCURRENCY_FLOOR x requested, from the request timestamps) or when it used
nearly every core of the host (its own timing then includes CPU queueing). Both numbers are
kept in the manifest either way.

The same thread reads the host's CPU time (psutil.cpu_times: every process, the engine's and
anything else): the cores busy while the load ran, and those spent on processes of positive
nice, i.e. work the host ran at a lower priority beside the step (`make demo` simulates beside
its live campaign that way: SCHED_IDLE at nice 19). Both are kept with the step.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TypedDict

import psutil

SAMPLE_INTERVAL_S = 0.5
CONCURRENCY_FLOOR = 0.9
CPU_CEILING = 0.9        # fraction of the host's cores


@dataclass
class CpuSampler:
    pid: int
    interval_s: float = SAMPLE_INTERVAL_S
    # (wall-clock ns, cores in use) per sample; ns compare with AIPerf's request timestamps
    samples: list[tuple[int, float]] = field(default_factory=list)
    # (wall-clock ns, the host's busy CPU s, its positive-nice CPU s) per sample, cumulative
    host: list[tuple[int, float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._procs: dict[int, psutil.Process] = {}
        self._thread = threading.Thread(target=self._run, name="aiperf-cpu", daemon=True)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _tree(self) -> list[psutil.Process]:
        try:
            root = self._procs.get(self.pid) or psutil.Process(self.pid)
            current = [root, *root.children(recursive=True)]
        except psutil.Error:
            return []
        # Keep Process objects across samples: cpu_percent() measures since the last call.
        for p in current:
            self._procs.setdefault(p.pid, p)
        return [self._procs[p.pid] for p in current]

    def _run(self) -> None:
        for p in self._tree():
            _cpu(p)  # prime: the first cpu_percent() call always returns 0
        self.host.append(_host())
        while not self._stop.wait(self.interval_s):
            procs = self._tree()
            if not procs:
                break
            self.samples.append((time.time_ns(), sum(_cpu(p) for p in procs) / 100.0))
            self.host.append(_host())

    def summary(self, window_ns: tuple[int, int] | None = None) -> dict:
        """CPU while the load ran (`window_ns`: first request start, last request end) and
        over AIPerf's whole life (start-up and dataset synthesis included)."""
        def stats(values: list[float]) -> tuple[float | None, float | None]:
            if not values:
                return None, None
            return round(sum(values) / len(values), 3), round(max(values), 3)
        all_mean, _ = stats([c for _, c in self.samples])
        lo, hi = window_ns or (0, 2**63)
        mean, peak = stats([c for t, c in self.samples if lo <= t <= hi])
        return {"samples": len(self.samples), "mean_cores": mean, "max_cores": peak,
                "mean_cores_whole_process": all_mean, **host_cores(self.host, lo, hi)}


def host_cores(host: list[tuple[int, float, float]], lo: int, hi: int) -> dict[str, float]:
    """The host's busy cores and positive-nice cores between the first and the last sample
    inside [lo, hi] (pure; {} with fewer than two)."""
    inside = [h for h in host if lo <= h[0] <= hi]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return {}
    wall = (inside[-1][0] - inside[0][0]) / 1e9
    return {"host_busy_cores": round((inside[-1][1] - inside[0][1]) / wall, 3),
            "host_low_priority_cores": round((inside[-1][2] - inside[0][2]) / wall, 3)}


def _host() -> tuple[int, float, float]:
    """(now, the host's busy CPU s, its positive-nice CPU s), cumulative since boot. Linux
    counts guest time inside user and nice, and steal is another VM's: neither is this host's
    work."""
    t = psutil.cpu_times()
    not_busy = sum(getattr(t, k, 0.0) for k in ("idle", "iowait", "steal", "guest",
                                                "guest_nice"))
    return time.time_ns(), sum(t) - not_busy, getattr(t, "nice", 0.0)


def _cpu(p: psutil.Process) -> float:
    try:
        return p.cpu_percent(None)
    except psutil.Error:
        return 0.0


class Verdict(TypedDict):
    client_bound: bool
    reasons: list[str]


def verdict(requested: int, achieved: float | None, mean_cores: float | None,
            host_cores: int) -> Verdict:
    """{client_bound, reasons} for one step (pure)."""
    reasons = []
    if achieved is not None and achieved < CONCURRENCY_FLOOR * requested:
        reasons.append(f"achieved concurrency {achieved:.2f} < {CONCURRENCY_FLOOR:.0%} of "
                       f"requested {requested}")
    if mean_cores is not None and mean_cores >= CPU_CEILING * host_cores:
        reasons.append(f"AIPerf used {mean_cores:.2f} of {host_cores} cores on average")
    return {"client_bound": bool(reasons), "reasons": reasons}
