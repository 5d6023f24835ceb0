"""Which Dynamo release's parsers judge a command line (stacks/preflight/engine_releases.py), and
that consult() sends each line to that release's environment (stub environments: no ai-dynamo
needed), keys its cache by the release, and names the release in every note."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stacks.config.loader import load_stack
from stacks.preflight import engine_parse
from stacks.preflight.engine_releases import (
    NEWEST,
    RELEASES,
    carried,
    image_build,
    judged_as_release,
    nearest,
    parser_release,
    tag_release,
)

SOLAR = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-solar-open2-250b-post.1@sha256:"
         "42fd3ed0607aa19b7d4c1b0a8f8aaaefefc8ec6292294ea2b5e6757353891f49")
MOTIF = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0-motif-3-dev.1@sha256:"
         "76e2612108f820640ff1d5a00542b41c909a0e6a473ed02b700c817b34f65878")
KEXAONE = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-k-exaone-2.0-750b-post.1@sha256:"
           "671b3f6ed5b94a572ae976cd59344bf26b27121618344a97d978d09737e6c7a2")
BY_RELEASE = {r.dynamo: r for r in RELEASES}


def test_a_recipe_build_is_parsed_by_the_release_it_is_built_on():
    assert tag_release(SOLAR) == "1.4.1"
    assert parser_release(SOLAR, "1.4.1").dynamo == "1.4.1"
    assert parser_release(SOLAR, "1.4.1").vllm == "0.26.0"
    assert parser_release(MOTIF, "1.5.0").vllm == "0.28.0"
    assert parser_release("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1", "1.6.1") == NEWEST
    # the frontend image K-EXAONE pins by digest: its tag still names the release
    assert tag_release("nvcr.io/nvidia/ai-dynamo/dynamo-frontend:1.4.1@sha256:" + "7" * 64) \
        == "1.4.1"


def test_a_build_is_parsed_by_the_environment_of_the_vllm_it_carries():
    # K-EXAONE's build is Dynamo 1.4.1 with vLLM 0.28.0 (its release notes): the 1.5.0 pair
    build = image_build(KEXAONE)
    assert build is not None and (build.dynamo, build.vllm) == ("1.4.1", "0.28.0")
    assert "Bumps the vLLM runtime from 0.26.0 to v0.28.0" in build.source
    release = parser_release(KEXAONE, "1.4.1")
    assert (release.dynamo, release.vllm) == ("1.5.0", "0.28.0")
    assert carried(KEXAONE, release) == "the image carries dynamo 1.4.1 / vllm 0.28.0"
    # the shipped K-EXAONE stacks name that image; their notes say what parsed them
    for name in ("agg-b200-kexaone", "disagg-b200-kexaone", "baseline-b200-kexaone"):
        serving = load_stack(name).serving
        assert serving is not None
        assert parser_release(serving.image, serving.dynamo_version).vllm == "0.28.0"
    # a build that carries its base's own vLLM says nothing more
    assert carried(SOLAR, parser_release(SOLAR, "1.4.1")) == ""


def test_motif_is_pinned_to_the_tag_and_digest_upstream_publishes():
    build = image_build(MOTIF)
    assert build is not None and build.tag == "1.5.0-motif-3-dev.1"
    assert "76e2612108f820640ff1d5a00542b41c909a0e6a473ed02b700c817b34f65878" in build.source
    for name in ("agg-b200-motif3", "disagg-b200-motif3", "baseline-b200-motif3",
                 "local-recipe-motif3"):
        serving = load_stack(name).serving
        assert serving is not None and serving.image == MOTIF, name


def test_a_release_without_an_environment_is_parsed_by_the_nearest_older_one():
    assert nearest("1.4.2").dynamo == "1.4.1"
    assert nearest("1.5.1").dynamo == "1.5.0"
    assert nearest("1.7.0").dynamo == "1.6.1"
    assert nearest("1.0.0").dynamo == "1.4.1"          # older than all: the oldest
    # no release in the tag: the stack's dynamoVersion
    assert parser_release("registry.example/vllm:my-build", "1.5.0").dynamo == "1.5.0"


def test_only_the_release_itself_turns_a_refusal_into_a_problem():
    r141 = BY_RELEASE["1.4.1"]
    assert judged_as_release("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1", "1.4.1", r141)
    assert not judged_as_release(SOLAR.split("@")[0], "1.4.1", r141)   # a model build
    assert not judged_as_release("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1@sha256:"
                                 + "0" * 64, "1.4.1", r141)            # the digest decides
    assert not judged_as_release("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1", "1.6.1", r141)


STUB = """#!{python}
import json, sys
jobs = json.load(sys.stdin)
with open({log!r}, "a") as f:
    f.write(json.dumps([j["argv"] for j in jobs]) + "\\n")
refuse = {refuse!r}
print(json.dumps({{"results": {{j["key"]: (
    {{"ok": False, "stage": "parse", "message": "error: unrecognized arguments: " + refuse}}
    if refuse in j["argv"] else {{"ok": True, "stage": "parse"}}) for j in jobs}}}}))
"""


def _stub_envs(tmp: Path) -> Path:
    """A stub environment per release under tmp/p (+suffix): it logs the argvs it was given and
    refuses --calculate-kv-scales only where vLLM lacks it (0.31.0, the 1.6.1 pair)."""
    base = tmp / "p"
    for r in RELEASES:
        venv = Path(f"{base}{r.venv_suffix}")
        (venv / "bin").mkdir(parents=True)
        python = venv / "bin" / "python"
        refuse = "--calculate-kv-scales" if r == NEWEST else "--never-passed"
        python.write_text(STUB.format(python=sys.executable, log=str(venv / "jobs.log"),
                                      refuse=refuse))
        python.chmod(0o755)
    return base


def _argvs(venv: Path) -> list[list[str]]:
    log = venv / "jobs.log"
    return [a for line in log.read_text().splitlines() for a in json.loads(line)] \
        if log.exists() else []


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    base = _stub_envs(tmp_path)
    monkeypatch.setenv("DYNAMO_BENCH_PARSERS_VENV", str(base))
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    return base


def test_each_image_is_parsed_by_its_releases_environment(stubs, tmp_path):
    solar, qwen = load_stack("disagg-b200-solar2"), load_stack("agg-a100")
    out = engine_parse.consult([solar, qwen], cache=tmp_path / "cache")
    models = {r.dynamo: {a[a.index("--model") + 1] for a in _argvs(
        Path(f"{stubs}{r.venv_suffix}")) if "--model" in a} for r in RELEASES}
    assert models["1.4.1"] == {solar.model.id}
    assert models["1.6.1"] == {qwen.model.id}
    assert models["1.5.0"] == set()
    # vLLM 0.26.0 (the 1.4.1 pair) takes Solar's --calculate-kv-scales: no note, no problem
    assert out.notes.get(solar.name) is None and out.problems == {}, out


def test_a_refusal_by_the_nearest_release_is_a_note_naming_it(stubs, tmp_path, monkeypatch):
    # the same Solar image, pretended to be a 1.6.1 build: 1.6.1's stub refuses the flag
    solar = load_stack("disagg-b200-solar2")
    assert solar.serving is not None
    image = solar.serving.image.replace(":1.4.1-", ":1.6.1-")
    solar = solar.model_copy(update={"serving": solar.serving.model_copy(
        update={"image": image, "dynamo_version": "1.6.1"})})
    out = engine_parse.consult([solar], cache=tmp_path / "cache")
    notes = out.notes[solar.name]
    assert out.problems == {}
    assert all("parsed with dynamo 1.6.1 / vllm 0.31.0" in n for n in notes), notes
    assert any("--calculate-kv-scales" in n and "unverified for image" in n for n in notes)


def test_the_cache_key_holds_the_release(stubs):
    line = engine_parse.command_lines(load_stack("disagg-b200-solar2"))[1]
    other = engine_parse.CommandLine(**{**line.__dict__, "release": NEWEST})
    assert line.release.dynamo == "1.4.1"
    assert engine_parse.cache_key(line) != engine_parse.cache_key(other)


def test_a_missing_older_environment_is_named_in_the_one_note(stubs, tmp_path):
    import shutil
    shutil.rmtree(f"{stubs}-1.4.1")
    solar, qwen = load_stack("disagg-b200-solar2"), load_stack("agg-a100")
    out = engine_parse.consult([solar, qwen], cache=tmp_path / "cache")
    assert out.skipped == "missing" and [r.dynamo for r in out.missing] == ["1.4.1"]
    assert _argvs(Path(str(stubs)))  # the 1.6.1 lines were still parsed
    note = engine_parse.not_consulted_note(out.skipped, out.missing)
    assert "dynamo 1.4.1 / vllm 0.26.0" in note and f"{stubs}-1.4.1" in note
