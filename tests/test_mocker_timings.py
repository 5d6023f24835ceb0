"""Which timings the local mockers run on, and what the run record and reports say of them."""

from __future__ import annotations

from pathlib import Path

from stacks.config.loader import load_stack
from stacks.predict.mocker_table import MockerTable
from workloads.targets import mocker_timings
from workloads.targets.local import mocker_argv, worker_specs
from workloads.targets.mocker_timings import GENERIC_LABEL, from_tables, generic, label

PY = Path("/engine/bin/python")


def _table(role: str, sha: str = "ab" * 32) -> MockerTable:
    return MockerTable(role, Path(f"/tables/{role}.npz"), {
        "sha256": sha, "aiconfigurator": "0.12.0", "aiconfigurator_core": "0.12.0",
        "system": "a100_sxm_40gb", "backend": "vllm", "backend_version": "0.14.0",
        "tp": 4, "how": "per-step engine", "file": f"{role}.npz"})


def test_a_table_is_recorded_with_its_hash_versions_and_how_and_labelled_so():
    t = from_tables([_table("worker")])
    (row,) = t.record["tables"]
    assert row["sha256"] == "ab" * 32 and row["aiconfigurator"] == "0.12.0"
    assert row["system"] == "a100_sxm_40gb" and row["backend_version"] == "0.14.0"
    assert row["how"] and t.record["source"] == "aiconfigurator"
    assert t.record["label"] == ("SIMULATED (mocker, timings from AIConfigurator 0.12.0 "
                                 "a100_sxm_40gb/vllm 0.14.0, table sha256 abababababab)")


def test_disaggregated_tables_are_labelled_per_role():
    text = label(from_tables([_table("prefill"), _table("decode", "cd" * 32)]).record)
    assert "prefill: timings" in text and "decode: timings" in text and "cdcdcdcdcdcd" in text


def test_no_table_says_generic_timings_and_why():
    g = generic("Qwen/X is not in the database")
    assert g.record["label"] == GENERIC_LABEL == "SIMULATED (mocker generic timings)"
    assert g.record["reason"] == "Qwen/X is not in the database" and g.tables == {}


def test_the_mocker_runs_on_its_roles_table_and_keeps_preflights_kv_blocks():
    stack = load_stack("local-disagg")
    specs = worker_specs(stack, [1000] * len(stack.serving.workers))
    t = from_tables([_table("prefill"), _table("decode")])
    for spec in specs:
        argv = mocker_argv(PY, stack, spec, Path("/snap"), t)
        assert argv[argv.index("--planner-profile-data") + 1] == f"/tables/{spec.role.value}.npz"
        assert argv[argv.index("--num-gpu-blocks-override") + 1] == "1000"
    assert "--planner-profile-data" not in mocker_argv(PY, stack, specs[0], Path("/snap"),
                                                       generic("none"))


def test_without_the_predictor_the_mockers_fall_back_and_the_record_says_so(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("DYNAMO_BENCH_PREDICTOR", str(tmp_path / "no-python"))
    monkeypatch.setenv("DYNAMO_BENCH_PREDICT_CACHE", "")
    t = mocker_timings.resolve(load_stack("local-agg"), tmp_path)
    assert t.tables == {} and t.record["label"] == GENERIC_LABEL
    assert "make predictor" in t.record["reason"]


def test_a_table_on_suspect_rows_labels_its_figures_upper_bounds():
    t = _table("worker")
    bound = MockerTable("worker", t.path, {**t.record, "upper_bound": "UPPER BOUND: ..."})
    assert "upper bounds" in label(from_tables([bound]).record)
    assert "upper bounds" not in label(from_tables([t]).record)
