"""The public traces shipped in stacks/catalog/traces/, their reuse upper bound, and trace sources.

- the shipped (gzip) files are byte for byte the upstream files of the reference folder
  (tests/reference.py) and match the published sha256; a tampered copy is refused;
- the reuse upper bound (a block reusable when its id appeared in an earlier request) of both
  traces equals an independent count (pandas, not the project's code) and the figures the
  shipped README gives (36.6 % and 64.0 %);
- the format facts the block mapping relies on hold on both files;
- a user's file: bad rows, a wrong checksum, a missing file are errors naming the field;
- windows, and the traceReplay config rules (fields of the other kind of source are refused);
- pre-flight reports a trace's problems before anything is created.
"""

from __future__ import annotations

import gzip
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from engine_support import write_stack
from pydantic import ValidationError
from reference import pins, reference_file

from stacks.catalog import trace_files
from stacks.catalog.trace_files import (
    PUBLIC_TRACES,
    TRACES_DIR,
    TraceError,
    load_trace,
    parse_rows,
    window,
)
from stacks.config.workload_config import TraceReplay, WorkloadsConfig
from stacks.preflight.run import check_stack
from workloads.trace_replay import block_reuse_bound

# The upstream files in the reference folder (tests/reference.py, pinned in tests/reference.toml).
REFERENCE_FILES = {"mooncake-conversation": "traces/mooncake_conversation_trace.jsonl",
                   "mooncake-synthetic": "traces/mooncake_synthetic_trace.jsonl"}


def public(name: str, **kw) -> TraceReplay:
    return TraceReplay.model_validate({"enabled": True, "source": name, **kw})


def readme_bound(name: str) -> float:
    """The 'block reuse, infinite cache' column of the shipped traces' README, as a fraction."""
    readme = (TRACES_DIR / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith(f"| `{name}`"))
    return float(re.findall(r"\| ([\d.]+) % \|", line)[0]) / 100


@pytest.mark.parametrize("name", sorted(PUBLIC_TRACES))
def test_shipped_trace_is_the_reference_file_and_matches_its_published_checksum(name) -> None:
    trace = load_trace(public(name))
    shipped = gzip.decompress((TRACES_DIR / PUBLIC_TRACES[name].file).read_bytes())
    assert shipped == reference_file(REFERENCE_FILES[name]).read_bytes()
    assert trace.sha256 == PUBLIC_TRACES[name].sha256 == pins()[REFERENCE_FILES[name]].sha256
    pin = pins()[REFERENCE_FILES[name]]
    assert (pin.repository, pin.ref) == (trace_files.UPSTREAM_REPO, trace_files.UPSTREAM_COMMIT)
    assert pin.path == PUBLIC_TRACES[name].upstream_path
    assert PUBLIC_TRACES[name].sha256 in (TRACES_DIR / "README.md").read_text()
    assert len(trace.rows) == PUBLIC_TRACES[name].requests
    assert trace.record()["verified"] == "published sha256"
    # shipped with its licence, under the 2 MB per-file limit
    assert "Apache License" in (TRACES_DIR / "LICENSE-APACHE").read_text()
    assert (TRACES_DIR / PUBLIC_TRACES[name].file).stat().st_size < 2_000_000


@pytest.mark.parametrize("name", sorted(PUBLIC_TRACES))
def test_reuse_upper_bound_equals_an_independent_count_and_the_readme(name) -> None:
    rows = load_trace(public(name)).rows
    # independent: every (request, block id) pair, a block counted as reusable when its id
    # occurs in an earlier request (ids never repeat within one request: checked below)
    blocks = pd.DataFrame({"request": range(len(rows)),
                           "id": [r["hash_ids"] for r in rows]}).explode("id")
    independent = blocks["id"].duplicated().mean()
    assert block_reuse_bound(list(rows)) == pytest.approx(independent, abs=1e-12)
    assert round(independent * 100, 1) == round(readme_bound(name) * 100, 1)
    assert round(independent * 100, 1) == {"mooncake-conversation": 36.6,
                                           "mooncake-synthetic": 64.0}[name]


@pytest.mark.parametrize("name", sorted(PUBLIC_TRACES))
def test_the_format_facts_the_block_mapping_relies_on(name) -> None:
    rows = load_trace(public(name)).rows
    size, position, before = {}, {}, {}
    for r in rows:
        ids, isl = r["hash_ids"], r["input_length"]
        assert len(ids) == math.ceil(isl / 512) and len(set(ids)) == len(ids)
        for i, h in enumerate(ids):
            # one size, one position, and always the same ids before it (a prefix block)
            assert size.setdefault(h, min(512, isl - 512 * i)) == min(512, isl - 512 * i)
            assert position.setdefault(h, i) == i
            assert before.setdefault(h, ids[i - 1] if i else None) == (ids[i - 1] if i else None)
    assert all(a["timestamp"] <= b["timestamp"] for a, b in zip(rows, rows[1:], strict=False))


def test_a_tampered_public_trace_is_refused(tmp_path, monkeypatch) -> None:
    name = "mooncake-synthetic"
    copy = tmp_path / PUBLIC_TRACES[name].file
    data = gzip.decompress((TRACES_DIR / PUBLIC_TRACES[name].file).read_bytes())
    copy.write_bytes(gzip.compress(data.replace(b'"output_length": 1', b'"output_length": 2',
                                                1)))
    monkeypatch.setattr(trace_files, "TRACES_DIR", tmp_path)
    with pytest.raises(TraceError) as err:
        load_trace(public(name))
    assert err.value.field == "source" and "published sha256" in err.value.message
    copy.unlink()
    with pytest.raises(TraceError, match="does not exist"):
        load_trace(public(name))


def _user(tmp_path: Path, text: str, name: str = "mine.jsonl", **kw) -> TraceReplay:
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    return public("file", file=str(path), **kw)


ROW = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [7, 8]}\n'


@pytest.mark.parametrize(("text", "what"), [
    ('{"timestamp": 0, "input_length": 600, "output_length": 5}\n', "missing ['hash_ids']"),
    (ROW.replace('"hash_ids"', '"session_id": "a", "hash_ids"'), "unknown field(s)"),
    (ROW.replace("[7, 8]", "[7, 8, 9]"), "3 hash ids of 512 tokens for 600 input tokens"),
    (ROW.replace('"output_length": 5', '"output_length": 0'), "output_length 0"),
    (ROW.replace('"timestamp": 0', '"timestamp": -1'), "timestamp -1"),
    (ROW.replace('"timestamp": 0', '"timestamp": 9') + ROW, "line 2: timestamp 0 is before"),
    ("not json\n", "line 1: not JSON"),
    ("\n", "no rows"),
])
def test_a_bad_user_trace_is_refused_naming_the_line(tmp_path, text, what) -> None:
    with pytest.raises(TraceError) as err:
        load_trace(_user(tmp_path, text))
    assert err.value.field == "file" and what in err.value.message
    assert "-> fix:" in str(err.value)


def test_a_user_trace_gzip_or_plain_with_its_checksum(tmp_path) -> None:
    rows = ROW + ROW.replace('"timestamp": 0', '"timestamp": 5')
    plain = load_trace(_user(tmp_path, rows))
    packed = load_trace(_user(tmp_path, rows, name="mine.jsonl.gz", sha256=plain.sha256))
    assert packed.sha256 == plain.sha256 and packed.rows == plain.rows == parse_rows(
        rows.encode())
    assert packed.record()["verified"] == "traceReplay.sha256"
    assert plain.record()["verified"].startswith("not checked")
    with pytest.raises(TraceError) as err:
        load_trace(_user(tmp_path, rows, sha256="0" * 64))
    assert err.value.field == "sha256"
    with pytest.raises(TraceError) as err:
        load_trace(public("file", file=str(tmp_path / "absent.jsonl")))
    assert err.value.field == "file" and "does not exist" in err.value.message
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(TraceError, match="not a valid gzip"):
        load_trace(public("file", file=str(tmp_path / "bad.jsonl.gz")))


def test_window_is_a_time_range_then_its_first_requests() -> None:
    rows = [{"timestamp": t} for t in (0, 500, 999, 1000, 1500, 4000)]
    assert window(rows, 0, None, None) == rows
    assert [r["timestamp"] for r in window(rows, 0.5, 1.0, None)] == [500, 999, 1000]
    assert [r["timestamp"] for r in window(rows, 0.5, 1.0, 2)] == [500, 999]
    assert [r["timestamp"] for r in window(rows, 1.0, None, None)] == [1000, 1500, 4000]
    assert window(rows, 5.0, 1.0, None) == []


def test_the_public_traces_windows_count_by_hand() -> None:
    cfg = public("mooncake-conversation", windowS=300)
    rows = load_trace(cfg).rows
    assert len(trace_files.window_rows(cfg)) == sum(r["timestamp"] < 300_000 for r in rows)
    assert len(trace_files.window_rows(cfg)) == 918   # the B200 stacks' window


@pytest.mark.parametrize(("raw", "loc"), [
    ({"source": "mooncake-conversation", "isl": 4096}, ("traceReplay", "isl")),
    ({"source": "mooncake-conversation", "reuse": 0.5}, ("traceReplay", "reuse")),
    ({"source": "synthetic", "speedUp": 2}, ("traceReplay", "speedUp")),
    ({"source": "synthetic", "windowS": 60}, ("traceReplay", "windowS")),
    ({"source": "file"}, ("traceReplay", "file")),
    ({"source": "mooncake-synthetic", "file": "x.jsonl"}, ("traceReplay", "file")),
    ({"source": "file", "file": "trace.csv"}, ("traceReplay", "file")),
    ({"source": "mooncake-synthetic", "sha256": "a" * 64}, ("traceReplay", "sha256")),
    ({"source": "mooncake-conversation", "quick": {"osl": 64}},
     ("traceReplay", "quick", "osl")),
    ({"source": "mooncake-conversation", "speedUp": 0}, ("traceReplay", "speedUp")),
])
def test_fields_of_the_other_kind_of_source_are_refused(raw, loc) -> None:
    with pytest.raises(ValidationError) as err:
        WorkloadsConfig.model_validate({"traceReplay": raw})
    assert err.value.errors()[0]["loc"] == loc


def test_a_replayed_trace_gets_its_own_quick_scale() -> None:
    cfg = public("mooncake-conversation", windowS=300, concurrencies=[4, 8])
    assert cfg.quick == {"maxRequests": 32}
    assert cfg.at_scale("quick").max_requests == 32
    assert cfg.at_scale("quick").window_s == 300
    # the generator keeps its own (shorter lengths)
    assert TraceReplay(enabled=True).at_scale("quick").isl == 2048


OTHERS = ("concurrencySweep", "multiTurn", "sequenceDistributions", "prefixCache")


def _replay_stack(tmp_path: Path, trace: dict, block: int = 64, max_model_len: int = 32768):
    name = write_stack(tmp_path, "trace-check", workers=[{"role": "worker", "replicas": 1,
                                                         "maxModelLen": max_model_len}],
                       router="kv", workloads={"traceReplay": {"enabled": True, **trace},
                                               **{w: {"enabled": False} for w in OTHERS}})
    doc = (tmp_path / f"Pulumi.{name}.yaml").read_text().replace("blockSize: 64",
                                                                  f"blockSize: {block}")
    (tmp_path / f"Pulumi.{name}.yaml").write_text(doc)
    return check_stack(name, tmp_path)


def test_preflight_reports_a_trace_s_problems_naming_the_field(tmp_path) -> None:
    ok = _replay_stack(tmp_path, {"source": "mooncake-conversation", "windowS": 60})
    assert ok.ok, [str(p) for p in ok.problems]
    fields = {p.field: str(p) for p in _replay_stack(
        tmp_path, {"source": "mooncake-conversation", "windowStartS": 4000}, block=48).problems}
    assert "do not divide the trace's 512-token blocks" in \
        fields["dynamo-bench:serving.mocker.blockSize"]
    assert "holds no request" in fields["dynamo-bench:workloads.traceReplay.windowStartS"]
    assert "holds no request" in fields["dynamo-bench:workloads.traceReplay.quick.windowStartS"]
    missing = _replay_stack(tmp_path, {"source": "file", "file": str(tmp_path / "no.jsonl")})
    assert [p.field for p in missing.problems] == ["dynamo-bench:workloads.traceReplay.file"]
    # the synthetic trace's first 3 requests are all longer than 2,048 tokens
    short = _replay_stack(tmp_path, {"source": "mooncake-synthetic", "quick": {"maxRequests": 3}},
                          max_model_len=2048)
    assert [p.field for p in short.problems] == \
        ["dynamo-bench:workloads.traceReplay.quick.windowS"]


def test_the_shipped_folder_holds_only_the_traces_and_their_notices() -> None:
    assert sorted(p.name for p in TRACES_DIR.iterdir()) == sorted(
        ["README.md", "LICENSE-APACHE", *(t.file for t in PUBLIC_TRACES.values())])
