"""The replay process's pipe (workloads/sim/replay.py): what the parent writes reaches the child
whole, and every answer the child's standard-library json can write is read back, NaN and
Infinity included (the parent reads with orjson, which refuses them). A stand-in child in
place of the engine's replay_child.py: no engine needed."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from workloads.sim import replay

# Echoes each job back (as the child's json writes it) beside a summary holding NaN and Infinity
STAND_IN = '''
import json, sys
for line in sys.stdin:
    jobs = json.loads(line)["jobs"]
    answers = [{"runs": [{"requests": [], "summary": {"median_ttft_ms": float("nan"),
                                                      "p99_itl_ms": float("inf")},
                          "wall_s": 0.0}], "echo": job} for job in jobs]
    sys.stdout.write(json.dumps({"versions": {"ai-dynamo": "stand-in"},
                                 "answers": answers}) + "\\n")
    sys.stdout.flush()
'''


@pytest.fixture
def replayer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    child = tmp_path / "child.py"
    child.write_text(STAND_IN)
    monkeypatch.setattr(replay, "CHILD", child)
    monkeypatch.setattr(replay, "require_engine", lambda: Path(sys.executable))
    r = replay.Replayer()
    yield r
    r.close()


def test_a_nan_or_infinity_in_the_childs_answer_is_read_not_refused(replayer):
    (answer,) = replayer([{"trace": [], "runs": 1}])
    summary = answer["runs"][0]["summary"]
    assert math.isnan(summary["median_ttft_ms"])
    assert summary["p99_itl_ms"] == math.inf
    assert replayer.versions == {"ai-dynamo": "stand-in"}


def test_the_jobs_reach_the_child_whole(replayer):
    job = {"trace": [{"session_id": "s-1", "timestamp": 0.1 + 0.2, "hash_ids": [0, 2**40],
                      "delay": None, "input_length": 1024}],
           "trace_block_size": 16, "router_mode": "kv_router", "max_sim_time_ms": None,
           "roles": {"worker": {"argv": ["--block-size", "16"], "count": 3}}, "runs": 3}
    first, second = replayer([job, {**job, "runs": 1}])
    assert first["echo"] == job                      # 0.30000000000000004 kept to the last bit
    assert second["echo"]["runs"] == 1
