"""`pulumi preview` / `pulumi up` refuse what the image's own parsers refuse: the Pulumi program
(__main__.py) consults the engine's parsers as `stacks check` does (the same cached step,
stacks.preflight.run.consult_engine), under the project's Pulumi mocks here; without the parser
environments it warns once (under CI it refuses); the campaign refuses before deploying."""

from __future__ import annotations

import sys
from pathlib import Path

import pulumi
import pytest
from pulumi_harness import raw_config, run_config
from stack_variants import copy_shipped, variant_config, write_stack

from stacks.config.loader import StackError
from stacks.preflight import run as preflight_run
from stacks.preflight.engine_releases import NEWEST, RELEASES
from workloads.campaign.run import CampaignRefused, _validated

IMAGE_161 = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"


def _on_161(raw: dict) -> dict:
    """disagg-b200-solar2 moved to Dynamo's own 1.6.1 runtime (vLLM 0.31.0), which has no
    --calculate-kv-scales any more (the recipe's 1.4.1 build, vLLM 0.26.0, has it)."""
    raw["serving"] = {**raw["serving"], "image": IMAGE_161, "dynamoVersion": "1.6.1"}
    # Dynamo's own runtime runs as its -efa build (stacks/conventions/kv_path.py), so the
    # recipe's EFA donor goes: pre-flight would refuse it before the parser is asked.
    raw["serving"].pop("efaUserspaceImage", None)
    return raw


@pytest.mark.parsers
def test_the_program_refuses_what_the_images_parser_refuses(monkeypatch, tmp_path):
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    monkeypatch.setenv("DYNAMO_BENCH_PARSE_CACHE", str(tmp_path))
    result = run_config("solar-161", _on_161(raw_config("disagg-b200-solar2")))
    assert isinstance(result.error, StackError), result.error
    said = str(result.error)
    assert "unrecognized arguments: --calculate-kv-scales" in said, said
    assert "refused by the engine's parser (dynamo 1.6.1 / vllm 0.31.0)" in said, said
    assert result.resources == []        # nothing was created


@pytest.fixture
def no_parsers(monkeypatch, tmp_path):
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    monkeypatch.setenv("DYNAMO_BENCH_PARSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DYNAMO_BENCH_PARSERS_VENV", str(tmp_path / "none"))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("DYNAMO_BENCH_CI", raising=False)
    monkeypatch.setattr(preflight_run, "_SAID", set())
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warned.append(msg))
    return warned


def test_without_the_parsers_the_program_warns_once(no_parsers):
    for name in ("v1", "v2"):      # two programs in one process (a campaign's renders)
        result = run_config(name, raw_config("agg-a100"))
        assert result.error is None, result.error
    assert len(no_parsers) == 1 and "were not consulted" in no_parsers[0], no_parsers
    assert "make parsers" in no_parsers[0]


@pytest.mark.parametrize("ci", [("CI", "true"), ("DYNAMO_BENCH_CI", "1")])
def test_without_the_parsers_under_ci_the_program_refuses(no_parsers, monkeypatch, ci):
    monkeypatch.setenv(*ci)
    result = run_config("v-ci", raw_config("agg-a100"))
    assert isinstance(result.error, StackError), result.error
    assert "under CI the parsers must be consulted" in str(result.error)
    assert result.resources == [] and no_parsers == []


STUB = """#!{python}
import json, sys
jobs = json.load(sys.stdin)
refuse = {refuse!r}
print(json.dumps({{"results": {{j["key"]: (
    {{"ok": False, "refusals": [{{"stage": "parse",
                                  "message": "error: unrecognized arguments: " + refuse}}]}}
    if refuse in j["argv"] else {{"ok": True, "refusals": []}}) for j in jobs}}}}))
"""


def test_the_campaign_refuses_before_it_deploys(monkeypatch, tmp_path):
    """A stub per release: 1.6.1's refuses --calculate-kv-scales, as vLLM 0.31.0 does."""
    base = tmp_path / "p"
    for r in RELEASES:
        python = Path(f"{base}{r.venv_suffix}") / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(STUB.format(python=sys.executable, refuse="--calculate-kv-scales"
                                      if r == NEWEST else "--never-passed"))
        python.chmod(0o755)
    monkeypatch.setenv("DYNAMO_BENCH_PARSERS_VENV", str(base))
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    monkeypatch.setenv("DYNAMO_BENCH_PARSE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "stacks").mkdir()
    stacks_dir = copy_shipped(tmp_path / "stacks")
    write_stack(stacks_dir, "solar-161", variant_config("disagg-b200-solar2", _on_161))
    assert _validated(["disagg-b200-solar2"], stacks_dir)      # its own 1.4.1 build passes
    with pytest.raises(CampaignRefused, match="unrecognized arguments: --calculate-kv-scales"):
        _validated(["disagg-b200-solar2", "solar-161"], stacks_dir)
