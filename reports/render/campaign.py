"""A campaign's forecast against what it measured: `python -m reports campaign <dir>`.

Reads `runs/campaigns/<base>/<run-id>/campaign.json` (workloads/campaign/state.py): the plan
made before anything ran (stacks/plan/schedule.py and the forecast of stacks/plan/campaign_cost.py)
and the timeline measured after the fact (workloads/campaign/timeline.py), and writes into
`<out>/<name>/`:
- campaign_groups.csv: per node group, billed and loaded GPU-hours and their ratio, forecast
  beside measured;
- campaign_slots.csv: per variant, the order it ran in, kept workers (and the evidence: the
  worker pods' uids or the mockers' process ids before and after), prompt epoch, cold restarts
  skipped, wall and load window, forecast beside measured, run status;
- campaign.md: both tables and what they cover. A local campaign's figures are the mocker's,
  labelled REHEARSAL: its forecast is the same step estimates with the mocker's start, its
  GPU-hours those of the hardware the mockers imitate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from reports.render.markdown import md_table


def load(path: Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "campaign.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a campaign record (runs/campaigns/<base>/<id>/)")
    return json.loads(path.read_text())


def group_table(data: dict) -> pd.DataFrame:
    plan, measured = data["plan"], data.get("measured") or {"groups": {}}
    rows = []
    for g, info in plan["groups"].items():
        m = measured["groups"].get(g, {})
        fb, fl = info.get("billed_gpu_hours"), info.get("loaded_gpu_hours")
        rows.append({"group": g, "instance_type": info.get("instance_type"),
                     "forecast_billed_gpu_h": fb, "forecast_loaded_gpu_h": fl,
                     "forecast_ratio": round(fb / fl, 3) if fb and fl else None,
                     "measured_billed_gpu_h": m.get("billed_gpu_hours"),
                     "measured_loaded_gpu_h": m.get("loaded_gpu_hours"),
                     "measured_ratio": m.get("billed_over_loaded")})
    return pd.DataFrame(rows)


def slot_table(data: dict) -> pd.DataFrame:
    plan, measured = data["plan"], data.get("measured") or {"slots": {}}
    rows = []
    for i, s in enumerate(plan["slots"], 1):
        st, m, f = data["slots"][s["name"]], measured["slots"].get(s["name"], {}), s["forecast"]
        kept = st.get("kept_workers") or {}
        rows.append({"order": i, "stack": s["name"],
                     "workers": f"kept from {s['kept_from']}" if s["kept_from"] else "new",
                     "workers_really_kept": kept.get("kept") if kept else None,
                     "kept_evidence": json.dumps({"before": kept.get("before"),
                                                  "after": kept.get("after")})
                     if kept else "",
                     "prompt_epochs": ",".join(map(str, st.get("epochs", []))),
                     "cold_restarts_skipped": f.get("skipped_restarts"),
                     "forecast_wall_s": f.get("wall_s"), "measured_wall_s": m.get("wall_s"),
                     "forecast_load_window_s": f.get("load_window_s"),
                     "measured_load_window_s": m.get("load_window_s"),
                     "status": st["status"], "run_status": st.get("run_status")})
    return pd.DataFrame(rows)


def write(data: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    groups, slots = group_table(data), slot_table(data)
    groups.to_csv(out_dir / "campaign_groups.csv", index=False)
    slots.to_csv(out_dir / "campaign_slots.csv", index=False)
    plan = data["plan"]
    local = plan["kind"] == "local"
    label = "REHEARSAL on the local mocker: " if local else ""
    total = (data.get("measured") or {}).get("total", {})
    f = plan.get("forecast") or {}
    lines = [f"# {label}Campaign {plan['base']} ({plan['scale']} scale): {data['status']}", "",
             "Billed GPU-hours: every GPU node from the moment the campaign asked for it until "
             "the cluster no longer listed it (locally: the hardware the mockers imitate, while "
             "they run)."
             " Under load: each variant's GPUs during its steps. Forecast: `python -m stacks "
             "plan` of the same schedule, made before anything ran." + (
                 " Locally the forecast is the same step estimates with the mocker's start "
                 "(about a second, no model load); nothing bills, so it has no dollars."
                 if local else ""), "",
             "Total: forecast " + (f"{f['billed_over_loaded']}x ("
                                   + (f"${f['cost_usd']:,.2f}, " if "cost_usd" in f else "")
                                   + f"{f['billed_gpu_hours']} / {f['loaded_gpu_hours']} "
                                   "GPU-hours)" if f else "n/a")
             + ", measured " + (f"{total['billed_over_loaded']}x "
                                f"({total['billed_gpu_hours']:.4f} / "
                                f"{total['loaded_gpu_hours']:.4f} GPU-hours)."
                                if total.get("billed_over_loaded") else "n/a."),
             "", "## Node groups", "", md_table(groups), "",
             "## Variants, in the order they ran", "", md_table(slots), ""]
    path = out_dir / "campaign.md"
    path.write_text("\n".join(lines))
    return path
