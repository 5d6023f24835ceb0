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
         "requirements-parsers-1.4.1.txt", "requirements-uv.txt")
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
    (version,) = set(re.findall(r"ENGINE_VENV\)/bin/python --no-deps ai-dynamo==(\S+)",
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


def test_parser_environments_are_hard_links_into_one_cache_on_their_filesystem():
    """The three parser envs are the same wheels but vLLM and Dynamo: uv installs each wheel's
    files as hard links into its cache, which make keeps in the checkout (on the envs' own
    filesystem, where a link cannot fall back to a copy), so what they share is on disk once."""
    makefile = (ROOT / "Makefile").read_text()
    (template,) = re.findall(r"^define parser_env\n(.*?)^endef", makefile, re.M | re.S)
    installs = re.findall(r"\$\$\(UV_INSTALL(?:_NO_BYTECODE)?\) [^\n]*", template)
    assert installs and any("--no-deps -r $(2)" in line for line in installs)
    assert "bin/pip install" not in template
    (install,) = re.findall(r"^UV_INSTALL = (.*?)\n\n", makefile, re.M | re.S)
    assert "--link-mode hardlink" in install
    assert re.search(r"^export UV_CACHE_DIR \?= \$\(CURDIR\)/\S+$", makefile, re.M)
    assert re.search(r"pip uninstall [^\n]*\btriton\b", template)


def test_the_parser_environments_are_compiled_by_their_first_parse_not_at_install(
        monkeypatch, tmp_path):
    """Compiling every file of .venv-parsers (20,762) took 44 s of CPU, and 16 s for each older
    env, inside `make test`'s pytest. The parse's child imports 3,966 of them and, started
    without the host's PYTHONDONTWRITEBYTECODE (these machines set it), writes their bytecode
    itself the first time (tests/test_engine_parse.py sees it written)."""
    from stacks.preflight.engine_parse import base_env

    makefile = (ROOT / "Makefile").read_text()
    (template,) = re.findall(r"^define parser_env\n(.*?)^endef", makefile, re.M | re.S)
    assert "compileall" not in template
    assert all("UV_INSTALL_NO_BYTECODE" in line
               for line in re.findall(r"\$\$\(UV_INSTALL[^\n]*", template))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = base_env(tmp_path / "venv", tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env and "PYTHONPATH" not in env


@pytest.mark.parsers
def test_the_parser_environments_hold_one_copy_of_the_files_they_share():
    """On disk, not in the Makefile: a file of a wheel all three install (torch 2.13.0+cpu) is
    one inode in the three environments."""
    from stacks.preflight.engine_releases import RELEASES

    files = [next(r.venv().glob("lib/python3*/site-packages/torch/__init__.py"))
             for r in RELEASES]
    assert len(files) == 3
    assert len({(f.stat().st_dev, f.stat().st_ino) for f in files}) == 1, files
