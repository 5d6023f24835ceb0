"""Which Dynamo release's own parsers judge a command line: the ONE place that maps an image to
a release and a release to its parser environment (pure).

Each release here has a parser environment of its own (`make parsers`), pinned as its wheels'
METADATA says (pip download --no-deps ai-dynamo==X, Requires-Dist): ai-dynamo 1.6.1 ->
vllm==0.31.0, 1.5.0 -> vllm==0.28.0, 1.4.1 -> vllm==0.26.0 (the `vllm` extra, each with
ai-dynamo-runtime==X; requirements-parsers*.txt).

An NGC Dynamo image's tag starts with the Dynamo release it is built on: `1.6.1` is the release
itself, `1.4.1-solar-open2-250b-post.1` a model build on it (ai-dynamo/dynamo GitHub release
notes "Dynamo v1.4.1-solar-open2-250b-post.1": "Base Branch: release/1.4.1", "vLLM:
v0.26.0"; "Dynamo v1.4.1-a.x-k2-post.1": "Dynamo v1.4.1 runtime with vLLM 0.26.0"). Such a
build adds flags and parser names of its own, so what its base release refuses stays
unverified for that image (a note), never a refusal; what it accepts passes.

A model build need not carry its base release's vLLM: K-EXAONE's build is Dynamo 1.4.1 with
vLLM 0.28.0. `IMAGE_BUILDS` records what each build the stacks use carries, with the upstream
page that says so, and such a build is parsed by the environment whose vLLM it carries (vLLM's
parser and engine config are most of a worker's command line); a build that is not listed is
parsed by the release its tag names.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_ENV = "DYNAMO_BENCH_PARSERS_VENV"


@dataclass(frozen=True)
class ParserRelease:
    dynamo: str
    vllm: str
    requirements: str     # the pins, a file at the repository root
    venv_suffix: str      # "" for .venv-parsers, "-1.4.1" for .venv-parsers-1.4.1

    @property
    def label(self) -> str:
        return f"dynamo {self.dynamo} / vllm {self.vllm}"

    def venv(self) -> Path:
        """Its environment; DYNAMO_BENCH_PARSERS_VENV moves the 1.6.1 one, the others follow
        with their suffix (so a missing override hides them all)."""
        return Path(str(os.environ.get(VENV_ENV, ROOT / ".venv-parsers")) + self.venv_suffix)


# Newest first. The local engine (.venv-engine, the Makefile's `engine` target: ai-dynamo==1.6.1)
# runs the newest.
RELEASES = (ParserRelease("1.6.1", "0.31.0", "requirements-parsers.txt", ""),
            ParserRelease("1.5.0", "0.28.0", "requirements-parsers-1.5.0.txt", "-1.5.0"),
            ParserRelease("1.4.1", "0.26.0", "requirements-parsers-1.4.1.txt", "-1.4.1"))
NEWEST = RELEASES[0]
LOCAL_ENGINE = NEWEST
_TAG_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:$|-)")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def image_tag(image: str) -> str:
    """The tag of `registry/repo:tag[@sha256:...]` ("" without one)."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].partition(":")[2]


def tag_release(image: str) -> str | None:
    """The Dynamo release an image's tag names: `1.4.1` for `...:1.4.1-solar-...`, None for a
    tag that does not start with X.Y.Z (or no tag)."""
    m = _TAG_RELEASE.match(image_tag(image))
    return ".".join(m.groups()) if m else None


def nearest(wanted: str) -> ParserRelease:
    """The release of that number, else the newest one older than it, else the oldest."""
    older = [r for r in RELEASES if _version(r.dynamo) <= _version(wanted)]
    return older[0] if older else RELEASES[-1]


@dataclass(frozen=True)
class ImageBuild:
    """A model build of Dynamo's runtime: what it carries, and where upstream says so."""

    tag: str              # the tag without a digest, e.g. 1.4.1-k-exaone-2.0-750b-post.1
    dynamo: str
    vllm: str
    source: str


_RELEASES_PAGE = "ai-dynamo/dynamo GitHub release notes (github.com/ai-dynamo/dynamo/releases)"
IMAGE_BUILDS = (
    ImageBuild("1.4.1-a.x-k2-post.1", "1.4.1", "0.26.0",
               f"{_RELEASES_PAGE}, Dynamo v1.4.1-a.x-k2-post.1: \"Dynamo v1.4.1 runtime with "
               "vLLM 0.26.0\" (with A.X-K2 patches 0001-0004)"),
    ImageBuild("1.4.1-solar-open2-250b-post.1", "1.4.1", "0.26.0",
               f"{_RELEASES_PAGE}, Dynamo v1.4.1-solar-open2-250b-post.1: \"Base Branch: "
               "release/1.4.1\", \"vLLM: v0.26.0-ubuntu2404\""),
    ImageBuild("1.4.1-k-exaone-2.0-750b-post.1", "1.4.1", "0.28.0",
               f"{_RELEASES_PAGE}, Dynamo v1.4.1-k-exaone-2.0-750b-post.1: \"Base Branch: "
               "release/1.4.1\", \"vLLM: v0.28.0-ubuntu2404\", \"Bumps the vLLM runtime from "
               "0.26.0 to v0.28.0\"; \"Stock Dynamo 1.4.1 vLLM (0.26.0) cannot load this "
               "checkpoint\""),
    # No release notes: the recipe (ai-dynamo/dynamo recipes/motif-3, release/1.5.0 schema) and
    # its benchmark README name the tag and digest; Dynamo 1.5.0's own pin is vLLM 0.28.0
    # (ai-dynamo 1.5.0 METADATA; release notes v1.5.0: "vLLM v0.28.0"), and the image adds
    # "Motif-specific vLLM compatibility code" (docs/fern/.../motif-3.mdx): the vLLM it carries
    # is 0.28.0 plus that code, as far as upstream states.
    ImageBuild("1.5.0-motif-3-dev.1", "1.5.0", "0.28.0",
               "ai-dynamo/dynamo recipes/motif-3/perf/results/disagg-round-robin-b200-2026-10-08/"
               "README.md@3fada0a9: `vllm-runtime:1.5.0-motif-3-dev.1` at `sha256:76e2612108f8"
               "20640ff1d5a00542b41c909a0e6a473ed02b700c817b34f65878`; built on release/1.5.0 "
               "(vLLM 0.28.0) with Motif's vLLM compatibility code"),
)


def image_build(image: str) -> ImageBuild | None:
    """The listed model build an image is (its tag, digest or not), else None."""
    tag = image_tag(image)
    return next((b for b in IMAGE_BUILDS if b.tag == tag), None)


def parser_release(image: str, dynamo_version: str) -> ParserRelease:
    """The parsers for an image: a listed build's by the vLLM it carries (the same Dynamo
    release first), else its tag's release, or the stack's dynamoVersion when the tag names
    none, at the nearest release that has a parser environment."""
    build = image_build(image)
    if build is not None:
        same = [r for r in RELEASES if r.vllm == build.vllm]
        return next((r for r in same if r.dynamo == build.dynamo), None) or \
            (same[0] if same else nearest(build.dynamo))
    return nearest(tag_release(image) or dynamo_version)


def carried(image: str, release: ParserRelease) -> str:
    """What the parse of `image` by `release` stands on, for a note: "" when the environment is
    the image's own pair, else the build's own versions (its source: IMAGE_BUILDS)."""
    build = image_build(image)
    if build is None or (build.dynamo, build.vllm) == (release.dynamo, release.vllm):
        return ""
    return f"the image carries dynamo {build.dynamo} / vllm {build.vllm}"


def judged_as_release(image: str, dynamo_version: str, release: ParserRelease) -> bool:
    """Dynamo's own runtime at exactly `release`: the tag is X.Y.Z (no model-build suffix, no
    digest, which would run whatever it names) and the stack says that version. Only then is
    what the parsers refuse a refusal."""
    return ("@sha256:" not in image and image_tag(image) == dynamo_version == release.dynamo)
