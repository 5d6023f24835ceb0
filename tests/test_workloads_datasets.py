"""Seeded datasets: exact prefix shares, distribution shapes (KS), byte stability, multi-turn."""

from __future__ import annotations

import hashlib

import pytest
from scipy import stats

from workloads import datasets as ds


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_prefix_rows_share_exactly_the_asked_fraction(share):
    rows = ds.prefix_share_rows(40, 2048, 64, 512, share, id_base=1000)
    assert ds.shared_prefix_fraction(rows) == share
    # Past the shared prefix every block is new: no accidental extra hits.
    shared = round(share * 4)
    tails = [h for r in rows for h in r["hash_ids"][shared:]]
    assert len(tails) == len(set(tails))
    assert all(r["input_length"] == 2048 and len(r["hash_ids"]) == 4 for r in rows)


def test_prefix_share_that_is_not_whole_blocks_is_refused():
    with pytest.raises(ValueError, match="not a whole number of blocks"):
        ds.prefix_share_rows(4, 2048, 64, 512, 0.3, id_base=0)
    with pytest.raises(ValueError, match="whole number of 512-token blocks"):
        ds.prefix_blocks(1000, 512, 0.5)


def test_steps_with_different_id_bases_share_no_block():
    a = ds.prefix_share_rows(16, 2048, 64, 512, 0.5, id_base=10_000)
    b = ds.prefix_share_rows(16, 2048, 64, 512, 0.5, id_base=20_000)
    ids_a = {h for r in a for h in r["hash_ids"]}
    assert ids_a.isdisjoint(h for r in b for h in r["hash_ids"])


def test_unique_rows_share_nothing_and_keep_lengths():
    rows = ds.unique_rows(50, 1024, 512, 512, id_base=7)
    ids = [h for r in rows for h in r["hash_ids"]]
    assert len(ids) == len(set(ids)) == 100
    assert {(r["input_length"], r["output_length"]) for r in rows} == {(1024, 512)}
    assert len({r["session_id"] for r in rows}) == 50


@pytest.mark.parametrize("kind", ["uniform", "zipf", "lognormal"])
@pytest.mark.parametrize("lo,hi", [(128, 4096), (64, 2048)])
def test_length_distributions_match_their_truncated_target(kind, lo, hi):
    dist = ds.LengthDistribution(kind, lo, hi, zipf_exponent=1.5, lognormal_sigma=0.8)
    sample = dist.sample(2000, seed=42)
    assert min(sample) >= lo and max(sample) <= hi
    # KS against the target CDF; discrete kinds make KS conservative, so p stays high.
    result = stats.kstest(sample, lambda x: [dist.cdf(v) for v in x])
    assert result.pvalue > 0.01, (kind, result)


@pytest.mark.parametrize("kind,other", [("uniform", "lognormal"), ("zipf", "uniform"),
                                        ("lognormal", "zipf")])
def test_ks_tells_the_distributions_apart(kind, other):
    """The shape test can fail: a sample of one kind is rejected against another's CDF."""
    sample = ds.LengthDistribution(kind, 128, 4096).sample(2000, seed=1)
    target = ds.LengthDistribution(other, 128, 4096)
    assert stats.kstest(sample, lambda x: [target.cdf(v) for v in x]).pvalue < 1e-6


def test_length_rows_keep_requested_lengths_and_are_byte_stable():
    isl = ds.LengthDistribution("lognormal", 128, 4096)
    osl = ds.LengthDistribution("lognormal", 64, 2048)
    a = ds.jsonl_bytes(ds.length_rows(isl, osl, 64, seed=5, block_size=512, id_base=0))
    b = ds.jsonl_bytes(ds.length_rows(isl, osl, 64, seed=5, block_size=512, id_base=0))
    c = ds.jsonl_bytes(ds.length_rows(isl, osl, 64, seed=6, block_size=512, id_base=0))
    assert a == b and a != c
    rows = ds.length_rows(isl, osl, 64, seed=5, block_size=512, id_base=0)
    assert rows[0]["input_length"] == isl.sample(64, ds.stable_seed(5, "isl"))[0]
    for r in rows:  # each row carries as many blocks as its requested input needs
        assert len(r["hash_ids"]) == -(-r["input_length"] // 512)


def test_dataset_bytes_are_pinned():
    """Same seed, same bytes on any machine: a change here changes every run's datasets."""
    dist = ds.LengthDistribution("zipf", 128, 4096)
    rows = ds.length_rows(dist, ds.LengthDistribution("zipf", 64, 2048), 16, seed=20261130,
                          block_size=512, id_base=0)
    digest = hashlib.sha256(ds.jsonl_bytes(rows)).hexdigest()
    assert digest == PINNED_ZIPF_SHA256


PINNED_ZIPF_SHA256 = "a3aa642f4a2a69de8c7a955d887b6adba106bf817faf760d7d2b10d43aa51634"


def test_multi_turn_rows_are_sessions_of_fresh_turns():
    rows = ds.multi_turn_rows(3, 5, 512, 256, 512, id_base=0, turn_delay_ms=250)
    assert len(rows) == 15
    sessions = [r["session_id"] for r in rows]
    assert sessions == [s for s in sorted(set(sessions)) for _ in range(5)]
    assert [("delay" in r) for r in rows[:5]] == [False, True, True, True, True]
    assert all(r["delay"] == 250 for r in rows if "delay" in r)  # sigma 0: fixed pauses
    ids = [h for r in rows for h in r["hash_ids"]]
    assert len(ids) == len(set(ids))  # history comes from AIPerf, not from reused blocks


def test_think_times_differ_per_conversation_and_keep_their_mean():
    """Random pauses break the lockstep; each conversation's come from its own seed, so
    adding conversations leaves the earlier ones' pauses as they were."""
    rows = ds.multi_turn_rows(200, 5, 64, 8, 64, id_base=0, turn_delay_ms=400,
                              turn_delay_sigma=0.6, seed=7)
    delays = [r["delay"] for r in rows if "delay" in r]
    assert len(set(delays)) > 700 and min(delays) > 0
    assert abs(sum(delays) / len(delays) - 400) < 25          # lognormal with mean 400 ms
    by_conv = {}
    for r in rows:
        by_conv.setdefault(r["session_id"], []).append(r.get("delay"))
    assert by_conv["conv-00000"] != by_conv["conv-00001"]
    fewer = ds.multi_turn_rows(2, 5, 64, 8, 64, id_base=0, turn_delay_ms=400,
                               turn_delay_sigma=0.6, seed=7)
    assert [r.get("delay") for r in fewer] == by_conv["conv-00000"] + by_conv["conv-00001"]
    again = ds.multi_turn_rows(200, 5, 64, 8, 64, id_base=0, turn_delay_ms=400,
                               turn_delay_sigma=0.6, seed=7)
    assert ds.jsonl_bytes(again) == ds.jsonl_bytes(rows)
    assert ds.think_times(3, 400, 0.6, seed=1) != ds.think_times(3, 400, 0.6, seed=2)


@pytest.mark.parametrize("n,isl,reuse", [(200, 8192, 0.7), (24, 2048, 0.7), (400, 8192, 0.3)])
def test_trace_reuse_lands_near_the_target(n, isl, reuse):
    rows = ds.trace_rows(n, isl, 1024, reuse, 512, seed=3, id_base=0)
    assert len(rows) == n and all(r["input_length"] == isl for r in rows)
    assert abs(ds.block_reuse(rows) - reuse) < 0.06


def test_write_jsonl_hashes_the_bytes(tmp_path):
    rows = ds.unique_rows(3, 512, 8, 512, id_base=0)
    f = ds.write_jsonl(rows, tmp_path / "d" / "x.jsonl")
    assert f.rows == 3
    assert f.sha256 == hashlib.sha256((tmp_path / "d" / "x.jsonl").read_bytes()).hexdigest()
