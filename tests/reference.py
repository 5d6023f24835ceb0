"""Upstream reference data for the tests, from one folder, each file checked against its pin.

The folder is `DYNAMO_BENCH_REFERENCE`, or `../shared/reference` beside the checkout when that
is unset; `tests/reference.toml` pins every file by sha256 with its upstream repository, path
and commit. `reference_file(name)` is how a test reads one:
- the file is there with its pinned sha256: its path;
- the file is missing: the test skips with one line naming the folder and `make reference`;
  under CI (`CI=true` or `DYNAMO_BENCH_CI`) it fails instead, because CI always has the folder;
- the file is there with another sha256: the test fails (wrong reference data is worse than
  none, so no setting turns that into a skip).

`python tests/reference.py fetch [--dest DIR]` (`make reference`) downloads every pinned file
that has a `url` into the folder, writing a file only once its sha256 matches the pin, and
names the others with how to get them (a pin's `remake`: the commands that build it again from
its sources, for the Helm chart archives made with `helm package`);
`python tests/reference.py check` says which files the folder has.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import sys
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ENV = "DYNAMO_BENCH_REFERENCE"
REPO = Path(__file__).resolve().parents[1]
DEFAULT_DIR = REPO.parent / "shared" / "reference"
PINS_FILE = Path(__file__).resolve().with_name("reference.toml")


@dataclass(frozen=True)
class Pin:
    name: str          # path inside the reference folder
    what: str
    sha256: str
    repository: str
    path: str          # in the repository
    ref: str           # the commit it was taken at
    licence: str
    url: str | None = None   # where `make reference` fetches it; None: not a verbatim file
    remake: str | None = None  # how it is made again from its sources, when it is built

    @property
    def source(self) -> str:
        return f"{self.repository}/{self.path}@{self.ref[:12]}"


@functools.cache
def pins() -> dict[str, Pin]:
    data = tomllib.loads(PINS_FILE.read_text())
    return {f["name"]: Pin(**f) for f in data["file"]}


def reference_dir() -> Path:
    value = os.environ.get(ENV)
    return Path(value).expanduser().resolve() if value else DEFAULT_DIR


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true" or bool(os.environ.get("DYNAMO_BENCH_CI"))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ReferenceMismatch(AssertionError):
    """A reference file that is there but is not the pinned one."""


@functools.cache
def _checked(path: Path, pinned: str, mtime_ns: int, size: int) -> None:
    got = sha256_of(path)
    if got != pinned:
        raise ReferenceMismatch(f"{path} has sha256 {got}, not the pinned {pinned} "
                                f"(tests/reference.toml): restore the upstream file "
                                f"(make reference) or point {ENV} at a folder that has it")


def missing_message(name: str, folder: Path) -> str:
    where = f"{ENV}={folder}" if os.environ.get(ENV) else f"{folder} ({ENV} unset)"
    pin = pins()[name]
    how = ("run `make reference` to fetch the pinned upstream files" if pin.url else
           "copy it from a checkout that has it (not fetchable: see tests/reference.toml"
           + (", which says how it is re-made)" if pin.remake else ")"))
    return f"reference data {name} not in {where}: {how}, or set {ENV}"


def reference_file(name: str) -> Path:
    """The pinned reference file `name`, verified; skips (fails under CI) when it is missing."""
    pin = pins()[name]            # KeyError: a test asked for a file nobody pinned
    folder = reference_dir()
    path = folder / name
    if not path.is_file():
        message = missing_message(name, folder)
        if in_ci():
            pytest.fail(message + " (CI must have the reference folder)", pytrace=False)
        pytest.skip(message)
    st = path.stat()
    _checked(path, pin.sha256, st.st_mtime_ns, st.st_size)
    return path


def fetch(dest: Path, opener=urllib.request.urlopen) -> list[str]:
    """Download every pinned file with a url that `dest` lacks, verified; a line per file."""
    lines = []
    for pin in pins().values():
        target = dest / pin.name
        if target.is_file() and sha256_of(target) == pin.sha256:
            lines.append(f"ok       {pin.name}")
            continue
        if pin.url is None:
            made = f"; or re-make it: {pin.remake}" if pin.remake else ""
            lines.append(f"manual   {pin.name}: not a verbatim upstream file ({pin.source}); "
                         f"copy it from a checkout that has it{made}")
            continue
        with opener(pin.url, timeout=120) as response:
            data = response.read()
        got = hashlib.sha256(data).hexdigest()
        if got != pin.sha256:
            raise SystemExit(f"{pin.url} has sha256 {got}, not the pinned {pin.sha256}: "
                             "nothing written for it")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(data)
        partial.replace(target)
        lines.append(f"fetched  {pin.name} ({len(data):,} bytes, {pin.source})")
    return lines


def status(folder: Path) -> list[str]:
    out = []
    for pin in pins().values():
        path = folder / pin.name
        state = ("missing" if not path.is_file() else
                 "ok" if sha256_of(path) == pin.sha256 else "WRONG sha256")
        out.append(f"{state:<13}{pin.name}  ({pin.source})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     prog="python tests/reference.py")
    parser.add_argument("command", choices=("fetch", "check"),
                        help="fetch: download the pinned files; check: list what the folder has")
    parser.add_argument("--dest", type=Path, default=None,
                        help=f"the reference folder (default: ${ENV}, else {DEFAULT_DIR})")
    args = parser.parse_args(argv)
    folder = (args.dest or reference_dir()).resolve()
    print(f"reference folder: {folder}")
    lines = fetch(folder) if args.command == "fetch" else status(folder)
    print("\n".join(lines))
    return 1 if any(x.startswith(("missing", "WRONG")) for x in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
