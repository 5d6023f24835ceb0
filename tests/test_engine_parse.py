"""Pre-flight asks the engine itself (stacks/preflight/engine_parse.py): each class of command
line the engine's own parsers refuse exits 2 with the stack field that produced the flag and the
parser's message; an image whose versions are not installed gets notes, never a pass; without
the parser environment one note (CI: an error); a repeated check is served from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from stack_variants import append, check, copy_shipped, edit, variant_config, write_stack

from stacks.config.loader import STACKS_DIR

F = "dynamo-bench:"
# (stack name, mutation of agg-a100, the field named, what the parser says)
CASES = {
    "pv-unknown-flag": (edit("serving.workers.0.extraArgs", ["--bogus-flag"]),
                        "serving.workers[0].extraArgs[0]",
                        "unrecognized arguments: --bogus-flag"),
    "pv-kv-fp9": (edit("serving.workers.0.extraArgs", ["--max-num-seqs", "64",
                                                       "--kv-cache-dtype", "fp9"]),
                  "serving.workers[0].extraArgs[2]",
                  "argument --kv-cache-dtype: invalid choice: 'fp9'"),
    "pv-abbrev": (edit("serving.workers.0.extraArgs", ["--enable-prefix-cachin"]),
                  "serving.workers[0].extraArgs[0]",
                  "unrecognized arguments: --enable-prefix-cachin"),
    # (an unknown Dynamo parser, serving.parsers.reasoning, is refused when the stack loads:
    # stacks.config.recipe_config; vLLM's engine parser name is only known to the release)
    "pv-engine-reasoning": (edit("serving.parsers", {"engineReasoning": "bogus"}),
                            "serving.parsers.engineReasoning",
                            "argument --reasoning-parser: 'bogus' is not a name this release "
                            "defines"),
    "pv-frontend-garbage": (append("serving.frontend.extraArgs", "aaaa"),
                            "serving.frontend.extraArgs[0]", "Unknown arguments specified"),
}
# the same, on a local stack (local-disagg): its mockers' and frontend's command lines through
# Dynamo 1.6.1's own dynamo.mocker and dynamo.frontend parsers
LOCAL_CASES = {
    "pv-local-mocker-garbage": (edit("serving.workers.1.extraArgs", ["--num-gpu-blockz", "9"]),
                                "serving.workers[1].extraArgs[0]",
                                "unrecognized arguments: --num-gpu-blockz 9"),
    "pv-local-mocker-type": (edit("serving.workers.0.extraArgs", ["--speedup-ratio", "fast"]),
                             "serving.workers[0].extraArgs[0]",
                             "argument --speedup-ratio: invalid float value: 'fast'"),
    "pv-local-frontend-garbage": (append("serving.frontend.extraArgs", "--bogus"),
                                  "serving.frontend.extraArgs[0]",
                                  "Unknown arguments specified"),
}
ALL = {**{n: ("agg-a100", *c) for n, c in CASES.items()},
       **{n: ("local-disagg", *c) for n, c in LOCAL_CASES.items()}}


def _variants(stacks_dir: Path) -> Path:
    copy_shipped(stacks_dir)
    for name, (base, mutate, _, _) in ALL.items():
        config = variant_config(base, lambda c: None)
        config["serving"].setdefault("frontend", {}).setdefault("extraArgs", [])
        for w in config["serving"]["workers"]:
            w.setdefault("extraArgs", [])
        mutate(config)
        write_stack(stacks_dir, name, config)
    return stacks_dir


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    """Every refusal case (and the shipped stacks) checked once, in one parser process."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    mp.setenv("DYNAMO_BENCH_PARSE_CACHE", str(tmp_path_factory.mktemp("parse-cache")))
    stacks_dir = _variants(tmp_path_factory.mktemp("stacks"))
    code, out = check(stacks_dir, *ALL)
    yield stacks_dir, code, out
    mp.undo()


@pytest.mark.parsers
@pytest.mark.parametrize("name", ALL)
def test_each_class_is_refused_with_the_field_and_the_parsers_message(parsed, name, monkeypatch):
    stacks_dir, code, out = parsed
    assert code == 2
    _, _, field, said = ALL[name]
    # checked alone, from the cache (no parser process: the environment is hidden)
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    monkeypatch.setenv("DYNAMO_BENCH_PARSERS_VENV", "/nonexistent")
    code, out = check(stacks_dir, name)
    assert code == 2, out
    assert f"{F}{field}: " in out and "refused by the engine's" in out, out
    assert said in out, out
    assert "were not consulted" not in out


@pytest.mark.parsers
def test_every_shipped_stack_passes_and_recipe_images_are_only_unverified(monkeypatch, tmp_path):
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    monkeypatch.setenv("DYNAMO_BENCH_PARSE_CACHE", str(tmp_path))
    code, out = check(STACKS_DIR, "agg-a100", "disagg-a100-kv-offload", "disagg-b200-solar2",
                      "local-disagg", "local-recipe-motif3")
    assert code == 0, out
    flat = " ".join(out.split())
    # the Solar image is Dynamo 1.4.1's build: parsed by 1.4.1 / vLLM 0.26.0, which has
    # --calculate-kv-scales (vllm/engine/arg_utils.py, vLLM 0.26.0; 0.31.0 has it no more)
    assert "--calculate-kv-scales" not in flat, out
    # its model's own parser names (solar_open2, the recipe build's) stay unverified, named
    # with the release that parsed them
    assert ("serving.parsers.toolCall: unverified for image nvcr.io/nvidia/ai-dynamo/"
            "vllm-runtime:1.4.1-solar-open2-250b-post.1") in flat, out
    assert "(parsed with dynamo 1.4.1 / vllm 0.26.0, whose name check refuses it" in flat, out
    assert "parsed with dynamo 1.6.1" not in flat, out
    # the parser environments are not compiled at install (Makefile, parser_env): the parse
    # wrote the bytecode of what it imported, here vLLM's engine arguments in both releases
    from stacks.preflight.engine_releases import RELEASES
    for release in (r for r in RELEASES if r.dynamo in ("1.6.1", "1.4.1")):
        (args,) = release.venv().glob("lib/python3*/site-packages/vllm/engine/arg_utils.py")
        assert list((args.parent / "__pycache__").glob("arg_utils.*.pyc")), release.venv()


def test_without_the_parser_environment_one_note_and_in_ci_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    monkeypatch.setenv("DYNAMO_BENCH_PARSE_CACHE", str(tmp_path))
    monkeypatch.setenv("DYNAMO_BENCH_PARSERS_VENV", str(tmp_path / "none"))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("DYNAMO_BENCH_CI", raising=False)   # .ci/run sets it too
    code, out = check(STACKS_DIR, "agg-a100", "disagg-a100")
    assert code == 0, out
    assert out.count("were not consulted") == 1 and "make parsers" in out
    monkeypatch.setenv("CI", "true")
    code, out = check(STACKS_DIR, "agg-a100")
    assert code == 2
    assert "CI must consult them" in out
