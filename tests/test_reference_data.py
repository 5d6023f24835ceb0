"""The reference folder's rules (tests/reference.py): a missing file skips with one line naming
the folder and `make reference` (fails under CI), a file with another sha256 always fails, and
`make reference` writes a file only once its checksum matches the pin."""

from __future__ import annotations

import hashlib
import io

import pytest
import reference
from _pytest.outcomes import Failed, Skipped

NAME = "helm/dynamo-platform/Chart.yaml"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(reference.ENV, str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("DYNAMO_BENCH_CI", raising=False)
    return tmp_path


def test_every_pin_names_its_upstream_and_a_fetchable_pin_its_exact_commit():
    for pin in reference.pins().values():
        assert len(pin.sha256) == 64 and len(pin.ref) == 40, pin.name
        if pin.url is not None:
            assert pin.url == (f"https://raw.githubusercontent.com/{pin.repository}/{pin.ref}/"
                               f"{pin.path}"), pin.name


def test_a_missing_file_skips_naming_the_folder_and_the_command(folder):
    with pytest.raises(Skipped) as caught:
        reference.reference_file(NAME)
    message = str(caught.value)
    assert str(folder) in message and "make reference" in message and NAME in message
    assert "\n" not in message


def test_under_ci_a_missing_file_fails(folder, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="CI must have the reference folder"):
        reference.reference_file(NAME)


def test_a_file_with_another_checksum_fails_even_outside_ci(folder):
    (folder / NAME).parent.mkdir(parents=True)
    (folder / NAME).write_text("apiVersion: v2\nname: not-the-chart\n")
    with pytest.raises(reference.ReferenceMismatch, match="not the pinned"):
        reference.reference_file(NAME)


def test_the_pinned_file_is_returned(folder):
    data = b"the pinned bytes\n"
    pin = reference.Pin(name="x/file.txt", what="", sha256=hashlib.sha256(data).hexdigest(),
                        repository="o/r", path="file.txt", ref="0" * 40, licence="")
    reference.pins()["x/file.txt"] = pin
    try:
        (folder / "x").mkdir()
        (folder / "x" / "file.txt").write_bytes(data)
        assert reference.reference_file("x/file.txt") == folder / "x" / "file.txt"
    finally:
        del reference.pins()["x/file.txt"]


def test_fetch_writes_only_verified_files(tmp_path):
    """A download whose sha256 is the pin's is written (and not asked for again); one that is
    not is refused and leaves nothing behind."""
    good = b"chart bytes"
    pin = reference.pins()[NAME]
    planted = reference.Pin(**{**pin.__dict__, "sha256": hashlib.sha256(good).hexdigest()})
    saved = dict(reference.pins())
    reference.pins().clear()
    reference.pins()[NAME] = planted
    try:
        lines = reference.fetch(tmp_path, opener=lambda url, timeout: io.BytesIO(good))
        assert lines[0].startswith("fetched") and (tmp_path / NAME).read_bytes() == good
        assert reference.fetch(tmp_path, opener=None)[0].startswith("ok")  # nothing asked
        (tmp_path / NAME).unlink()
        with pytest.raises(SystemExit, match="not the pinned"):
            reference.fetch(tmp_path, opener=lambda url, timeout: io.BytesIO(b"tampered"))
        assert not (tmp_path / NAME).exists()
    finally:
        reference.pins().clear()
        reference.pins().update(saved)


def test_a_pin_that_cannot_be_fetched_is_listed_as_manual(tmp_path):
    model = reference.pins()["models/qwen3-30b-a3b.json"]
    assert model.url is None
    only = {model.name: model}
    saved = dict(reference.pins())
    reference.pins().clear()
    reference.pins().update(only)
    try:
        out = reference.fetch(tmp_path, opener=lambda url, timeout: pytest.fail("downloaded"))
        assert out[0].startswith("manual") and "copy it from a checkout" in out[0]
    finally:
        reference.pins().clear()
        reference.pins().update(saved)


def test_a_chart_archive_says_how_it_is_made_again(tmp_path):
    """The chart archives are `helm package` builds of upstream sources (nothing to download):
    each pin names the commit its `git archive` starts from, and `make reference` prints how."""
    charts = [p for p in reference.pins().values() if p.name.startswith("charts/")]
    assert {p.name for p in charts} == {
        "charts/kube-prometheus-stack-79.5.0.tgz", "charts/dcgm-exporter-4.8.2.tgz",
        "charts/nvidia-device-plugin-0.18.0.tgz", "charts/aws-efa-k8s-device-plugin-v0.5.29.tgz"}
    for pin in charts:
        assert pin.url is None and pin.remake, pin.name
        assert f"git archive {pin.ref}" in pin.remake and "helm package" in pin.remake, pin.name
    saved = dict(reference.pins())
    reference.pins().clear()
    reference.pins().update({p.name: p for p in charts})
    try:
        out = reference.fetch(tmp_path, opener=lambda url, timeout: pytest.fail("downloaded"))
        assert all(line.startswith("manual") and "re-make it: git archive" in line
                   for line in out)
    finally:
        reference.pins().clear()
        reference.pins().update(saved)
