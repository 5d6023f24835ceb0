"""Billed vs loaded GPU-hours of a campaign, measured after the fact (pure).

Billed, per node group: the campaign record's billing changes integrated over wall time. On a
cluster a node bills from the moment the campaign asks for it (the `scale` action's start)
until the Kubernetes API no longer lists it (engine.py); locally a mocker set bills, as the
hardware it imitates, from its start to its stop, and kept mockers bill on without a gap.
Loaded, per node group: every run's step phases (the runner's `step:<id>` start and end, all
attempts) times the GPUs the slot's workers use on that group: the same definition as the
forecast's "under load" (stacks/plan/campaign_cost.py), so the two ratios compare.
"""

from __future__ import annotations

from datetime import datetime


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _end(data: dict) -> float:
    walls = [e.get("end_wall") or e["wall"] for e in data["events"]]
    if data.get("ended"):
        walls.append(data["ended"])
    return max(map(_t, walls)) if walls else 0.0


def billed_node_seconds(data: dict) -> dict[str, float]:
    """Per group: nodes billed times seconds, from the billing changes."""
    end = _end(data)
    out: dict[str, float] = {}
    for group in {e["group"] for e in data["events"] if e["kind"] == "billing"}:
        changes = sorted((_t(e["wall"]), e["delta"]) for e in data["events"]
                         if e["kind"] == "billing" and e["group"] == group)
        total, nodes, last = 0.0, 0, None
        for t, delta in changes:
            if last is not None:
                total += nodes * (t - last)
            nodes, last = nodes + delta, t
        if last is not None and nodes:   # still up when the record ends
            total += nodes * (end - last)
        out[group] = total
    return out


def step_seconds(manifest: dict) -> float:
    """Seconds the run's steps sent load (every attempt's step phases that started)."""
    return sum(_t(p["end"]) - _t(p["start"]) for a in manifest.get("attempts", [])
               for p in a.get("phases", [])
               if p["name"].startswith("step:") and p.get("end"))


def measure(data: dict, manifests: dict[str, dict]) -> dict:
    """What the campaign record and its runs' manifests show, per group and in total."""
    plan = data["plan"]
    billed = billed_node_seconds(data)
    loaded: dict[str, float] = {}
    slots = {}
    for s in plan["slots"]:
        m = manifests.get(s["name"])
        window = step_seconds(m) if m else 0.0
        for g, gpus in s["gpus"].items():
            loaded[g] = loaded.get(g, 0.0) + gpus * window
        acts = [e for e in data["events"] if e.get("slot") == s["name"] and "end_wall" in e]
        first = min((_t(e["wall"]) for e in acts), default=None)
        last = max((_t(e["end_wall"]) for e in acts), default=None)
        st = data["slots"][s["name"]]
        slots[s["name"]] = {
            # both or neither: the same actions' starts and ends
            "wall_s": round(last - first, 3) if first is not None and last is not None
            else None,
            "load_window_s": round(window, 3), "status": st["status"],
            "run_status": st.get("run_status"), "kept_workers": st.get("kept_workers")}
    groups = {}
    for g, info in plan["groups"].items():
        b = billed.get(g, 0.0) * info["gpus_per_node"] / 3600
        lo = loaded.get(g, 0.0) / 3600
        groups[g] = {"billed_gpu_hours": round(b, 6), "loaded_gpu_hours": round(lo, 6),
                     "billed_over_loaded": round(b / lo, 3) if lo else None}
    total_b = sum(v["billed_gpu_hours"] for v in groups.values())
    total_l = sum(v["loaded_gpu_hours"] for v in groups.values())
    return {"groups": groups, "slots": slots,
            "total": {"billed_gpu_hours": round(total_b, 6),
                      "loaded_gpu_hours": round(total_l, 6),
                      "billed_over_loaded": round(total_b / total_l, 3) if total_l else None}}
