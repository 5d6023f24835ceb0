"""The campaign record `runs/campaigns/<base>/<run-id>/campaign.json`, always valid on disk.

It holds the plan the campaign was started with (slot order, kept workers, prompt epochs, the
forecast), each slot's progress (pending -> deployed -> ran -> torn down, or handed over to the
next slot), the current size of every GPU group, and a timeline of every action with its start
and end (monotonic seconds and wall time): what `timeline.py` measures billed and loaded
GPU-hours from. A re-run with the same run id resumes from it: finished slots are never redone.
Writes are atomic (temp file + rename) and serialised: slots on disjoint groups run in threads.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workloads.manifest import now, write_json_atomic

PENDING, DEPLOYED, RAN, DONE = "pending", "deployed", "ran", "done"
HANDED_OVER = "handed over"        # torn down with its workers left to the next slot
FAILED, INTERRUPTED, COMPLETE = "failed", "interrupted", "complete"


def _chosen(plan: dict) -> tuple:
    """What a resumed campaign must share with the record: variants, their --only, scale."""
    return [(s["name"], s.get("only")) for s in plan["slots"]], plan["scale"]


class CampaignState:
    def __init__(self, path: Path, data: dict):
        self.path, self.data = path, data
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: Path, plan: dict) -> CampaignState:
        """A new record for `plan` ({"base", "run_id", "scale", "slots": [...], "forecast"}),
        or the existing one when it was made for the same slots, --only and scale."""
        if path.exists():
            data = json.loads(path.read_text())
            if _chosen(data["plan"]) != _chosen(plan):
                was = [s["name"] for s in data["plan"]["slots"]]
                raise ValueError(f"campaign {path.parent.name} was planned with other "
                                 f"variants, --only or scale ({was}, {data['plan']['scale']}): "
                                 "resume it with those, or use a new --run-id")
            data["resumed"] = data.get("resumed", 0) + 1
        else:
            data = {"plan": plan, "created": now(), "resumed": 0, "status": "running",
                    "slots": {s["name"]: {"status": PENDING, "attempts": []}
                              for s in plan["slots"]},
                    "sizes": {}, "events": []}
        state = cls(path, data)
        state.save()
        return state

    def save(self) -> None:
        with self._lock:
            write_json_atomic(self.path, self.data)

    def slot(self, name: str) -> dict:
        return self.data["slots"][name]

    def status(self, name: str) -> str:
        return self.slot(name)["status"]

    def update_slot(self, name: str, **fields: Any) -> None:
        with self._lock:
            self.slot(name).update(fields)
            self.save()

    def event(self, kind: str, t: float, **fields: Any) -> dict:
        """Append one timeline entry (`t`: the campaign clock's monotonic seconds)."""
        with self._lock:
            entry = {"kind": kind, "t": round(t, 3), "wall": now(), **fields}
            self.data["events"].append(entry)
            self.save()
            return entry

    def billing_open(self) -> dict[str, int]:
        """Per group, the nodes billing now (the sum of the record's billing changes)."""
        out: dict[str, int] = {}
        with self._lock:
            for e in self.data["events"]:
                if e["kind"] == "billing":
                    out[e["group"]] = out.get(e["group"], 0) + e["delta"]
        return out

    @contextmanager
    def action(self, kind: str, clock, **fields: Any):
        """Time an action: its entry gets `start`/`end` and whatever the body adds to it."""
        entry: dict = {"kind": kind, "start": round(clock.now(), 3), "wall": now(), **fields}
        try:
            yield entry
            entry.setdefault("status", "ok")
        except BaseException as exc:
            entry["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            entry["error"] = f"{type(exc).__name__}: {exc}"[:500]
            raise
        finally:
            entry["end"] = round(clock.now(), 3)
            entry["end_wall"] = now()
            with self._lock:
                self.data["events"].append(entry)
                self.save()

    def set_sizes(self, sizes: dict[str, int]) -> None:
        with self._lock:
            self.data["sizes"] = dict(sizes)
            self.save()

    def finish(self, status: str, measured: dict | None = None) -> None:
        with self._lock:
            self.data["status"] = status
            self.data["ended"] = now()
            if measured is not None:
                self.data["measured"] = measured
            self.save()
