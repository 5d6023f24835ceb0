"""Every requirements file pins every package to one version (`==`), so a clean clone installs
what the tests passed with; the engine file lists ai-dynamo's whole closure except ai-dynamo
itself, which the Makefile installs without dependencies at the same version as its runtime."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = ("requirements.txt", "requirements-test.txt", "requirements-engine.txt",
         "requirements-parsers.txt", "requirements-parsers-1.5.0.txt",
         "requirements-parsers-1.4.1.txt")
PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+$")


def requirement_lines(name: str) -> list[str]:
    lines = [line.split(" #")[0].strip() for line in (ROOT / name).read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("name", FILES)
def test_every_line_is_pinned(name):
    lines = requirement_lines(name)
    assert lines, name
    loose = [line for line in lines if not PINNED.match(line)]
    assert not loose, f"{name}: not pinned with ==: {loose}"
    names = [re.split(r"[\[=]", line)[0].lower().replace("_", "-") for line in lines]
    assert len(names) == len(set(names)), f"{name}: a package listed twice"


def test_engine_pins_ai_dynamo_apart_at_its_runtime_version():
    pins = dict(line.split("==") for line in requirement_lines("requirements-engine.txt"))
    assert "ai-dynamo" not in pins   # its build dependency is unreachable: --no-deps
    makefile = (ROOT / "Makefile").read_text()
    (version,) = set(re.findall(r"ENGINE_VENV\)/bin/pip install -q --no-deps ai-dynamo==(\S+)",
                                makefile))
    assert pins["ai-dynamo-runtime"] == version


def test_each_parser_environment_pins_its_releases_pair_and_make_builds_it():
    """stacks/preflight/engine_releases.py's releases are what the files pin and make builds."""
    from stacks.preflight.engine_releases import RELEASES

    makefile = (ROOT / "Makefile").read_text()
    (older,) = re.findall(r"^PARSERS_OLDER := (.*)$", makefile, re.M)
    built = {"1.6.1": "requirements-parsers.txt"} | {
        r: f"requirements-parsers-{r}.txt" for r in older.split()}
    assert "$(call parser_env,$(PARSERS_VENV),requirements-parsers.txt,1.6.1)" in makefile
    assert built == {r.dynamo: r.requirements for r in RELEASES}
    for r in RELEASES:
        pins = dict(line.split("==") for line in requirement_lines(r.requirements))
        assert "ai-dynamo" not in pins   # installed after, --no-deps, at the release
        assert (pins["ai-dynamo-runtime"], pins["vllm"]) == (r.dynamo, r.vllm), r


@pytest.mark.parametrize("name", [f for f in FILES if f.startswith("requirements-parsers")])
def test_parser_environments_carry_no_gpu_kernels(name):
    """Disk bounds CI: a fresh machine ran out of space building the third parser env while each
    carried Triton (1 GB of GPU compilers; vLLM's triton_utils parses without it). None pins it,
    or a CUDA torch (the nvidia-* wheels), or flashinfer."""
    names = {re.split(r"[\[=]", line)[0].lower() for line in requirement_lines(name)}
    assert not names & {"triton", "flashinfer-python", "nvidia-cudnn-cu12", "nvidia-nccl-cu12"}
    pins = dict(line.split("==") for line in requirement_lines(name))
    assert pins["torch"].endswith("+cpu")


def test_parser_environments_share_their_files_and_keep_no_pip_cache():
    """The three parser envs are the same wheels but vLLM and Dynamo: make links what they share
    (util-linux hardlink) and pip keeps no cache of the GB of wheels."""
    makefile = (ROOT / "Makefile").read_text()
    (template,) = re.findall(r"^define parser_env\n(.*?)^endef", makefile, re.M | re.S)
    installs = re.findall(r"bin/pip install [^\n]*", template)
    assert installs and all("--no-cache-dir" in line for line in installs)
    # a shell glob over every parser env: make's $(wildcard) reads the folder before the recipes
    # that make the other envs ran, and linked nothing on a clean clone
    assert re.search(r"hardlink -q -t \$\(PARSERS_VENV\)\*", template)
    assert "wildcard" not in template
    assert re.search(r"pip uninstall [^\n]*\btriton\b", template)
