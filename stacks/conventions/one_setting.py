"""Which stacks are one setting apart (pure): the report's ablation check
(reports/comparisons/ablation.py) compares such pairs on the signal their setting should move, and
the plan (stacks/plan/resolution.py) says beforehand what difference each pair's sample can resolve.

Pairs are two stack configs, as a run manifest records them (`model_dump(mode="json",
by_alias=True)`, plus the `scale` the run used), that differ in exactly one of the settings
below and in nothing else that shapes the measurement (model, cluster, storage, workloads and
the scale they ran at, the rest of serving; names, tags, cost and monitoring aside).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Any

# The keys of `serving` each setting owns; a pair may differ in one setting's keys only.
SETTINGS = {"router": ("router",), "topology": ("topology", "transfer", "workers"),
            "offload": ("kvOffload",)}
NOT_COMPARED = ("name", "tags", "cost", "monitoring")


@dataclass(frozen=True)
class Pair:
    setting: str
    baseline: str       # round-robin / aggregated / no offload
    changed: str


def _is_baseline(setting: str, serving: dict[str, Any]) -> bool:
    if setting == "router":
        return serving.get("router") != "kv"
    if setting == "topology":
        return serving.get("topology") == "aggregated"
    return (serving.get("kvOffload") or {}).get("kind", "none") == "none"


def setting_between(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The one setting two recorded stack configs differ in; None if none or several, or if
    they differ anywhere else that shapes the measurement."""
    keys = (set(a) | set(b)) - set(NOT_COMPARED) - {"serving"}
    if any(a.get(k) != b.get(k) for k in keys):
        return None
    sa, sb = a.get("serving") or {}, b.get("serving") or {}
    differ = {k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k)}
    owners = {s for s, owned in SETTINGS.items() if differ & set(owned)}
    if len(owners) != 1 or differ - set(SETTINGS[next(iter(owners))]):
        return None
    return owners.pop()


def pairs(configs: dict[str, dict[str, Any]]) -> list[Pair]:
    """Every pair of stacks (by name) one setting apart, the baseline first."""
    out = []
    for a, b in permutations(sorted(configs), 2):
        setting = setting_between(configs[a], configs[b])
        if setting and _is_baseline(setting, configs[a]["serving"]) \
                and not _is_baseline(setting, configs[b]["serving"]):
            out.append(Pair(setting, a, b))
    return out
