"""The datasets' exact shares and shapes, row by row (workloads.datasets): which block ids a
row carries, where a shared prefix ends, how a trace reaches its reuse, what fitting the
context limit drops or clips. Expected rows are written out by hand. (`make mutate`: group
`datasets`.)"""

from __future__ import annotations

import hashlib
import math
import random
from statistics import NormalDist

import pytest

from workloads import datasets as ds


def test_stable_seed_and_block_counts():
    # sha256("a" 0x1f "1"), first 8 bytes big-endian, shifted to 63 bits
    digest = hashlib.sha256(b"a\x1f1").digest()
    assert ds.stable_seed("a", 1) == int.from_bytes(digest[:8], "big") >> 1 \
        == 4742018630964328543
    assert ds.stable_seed("a", 1) != ds.stable_seed("a1")
    assert [ds.blocks_for(n, 512) for n in (0, 1, 512, 513, 1024, 1025)] == [1, 1, 1, 2, 2, 3]


def test_prefix_blocks_are_exact_or_refused():
    assert [ds.prefix_blocks(2048, 512, s) for s in (0.0, 0.25, 0.5, 0.75, 1.0)] == \
        [0, 1, 2, 3, 4]
    assert ds.prefix_blocks(1536, 512, 1 / 3) == 1
    with pytest.raises(ValueError) as err:
        ds.prefix_blocks(1000, 512, 0.5)
    assert str(err.value) == "isl 1000 is not a whole number of 512-token blocks"
    with pytest.raises(ValueError) as err:
        ds.prefix_blocks(2048, 512, 0.3)
    assert str(err.value) == ("share 0.3 of 4 blocks (2048/512) is not a whole number of "
                              "blocks: change the share, isl or blockSize")


def test_prefix_share_rows_by_hand():
    assert ds.prefix_share_rows(3, 1536, 8, 512, 2 / 3, id_base=10) == [
        {"session_id": "req-000000", "input_length": 1536, "output_length": 8,
         "hash_ids": [10, 11, 12]},
        {"session_id": "req-000001", "input_length": 1536, "output_length": 8,
         "hash_ids": [10, 11, 13]},
        {"session_id": "req-000002", "input_length": 1536, "output_length": 8,
         "hash_ids": [10, 11, 14]}]
    assert [r["hash_ids"] for r in ds.prefix_share_rows(2, 1024, 8, 512, 0.0, 0)] == \
        [[0, 1], [2, 3]]
    assert [r["hash_ids"] for r in ds.prefix_share_rows(2, 1024, 8, 512, 1.0, 0)] == \
        [[0, 1], [0, 1]]


def test_unique_rows_by_hand():
    assert ds.unique_rows(2, 1000, 16, 512, id_base=5) == [
        {"session_id": "req-000000", "input_length": 1000, "output_length": 16,
         "hash_ids": [5, 6]},
        {"session_id": "req-000001", "input_length": 1000, "output_length": 16,
         "hash_ids": [7, 8]}]


@pytest.mark.parametrize("ids, fraction", [
    ([[1, 2, 3], [1, 2, 3]], 1.0),
    ([[1, 2, 3], [1, 9, 3]], 1 / 3),
    ([[1, 2, 3], [1, 2]], 2 / 3),            # a shorter row ends the common prefix
    ([[1, 2], [1, 2, 3]], 1.0),
    ([[1, 2, 3], [1, 2, 7], [1, 8, 3]], 1 / 3),
    ([[4, 5]], 1.0),
    ([[4, 5], [6, 5]], 0.0),
])
def test_shared_prefix_fraction(ids, fraction):
    assert ds.shared_prefix_fraction([{"hash_ids": h} for h in ids]) == pytest.approx(fraction)


def test_length_distribution_bounds_and_refusals():
    with pytest.raises(ValueError) as err:
        ds.LengthDistribution("normal", 1, 2)
    assert str(err.value) == "unknown distribution 'normal' (uniform, zipf, lognormal)"
    for lo, hi in ((0, 5), (6, 5)):
        with pytest.raises(ValueError) as err:
            ds.LengthDistribution("uniform", lo, hi)
        assert str(err.value) == f"length range [{lo}, {hi}] is empty or below 1"
    one = ds.LengthDistribution("uniform", 1, 1)
    assert one.sample(3, seed=1) == [1, 1, 1]
    d = ds.LengthDistribution("lognormal", 100, 400)
    assert d.lognormal_mu == pytest.approx(math.log(200))     # the geometric middle
    assert (d.zipf_exponent, d.lognormal_sigma) == (1.5, 0.8)


def test_cdfs_by_hand():
    u = ds.LengthDistribution("uniform", 10, 13)               # 4 values
    assert [u.cdf(x) for x in (9.9, 10, 10.5, 11, 12, 12.99, 13, 99)] == \
        [0.0, 0.25, 0.25, 0.5, 0.75, 0.75, 1.0, 1.0]
    z = ds.LengthDistribution("zipf", 1, 3, zipf_exponent=1.0)  # weights 1, 1/2, 1/3 of 11/6
    assert z.cdf(1) == pytest.approx(6 / 11) and z.cdf(2.5) == pytest.approx(9 / 11)
    assert z.cdf(3) == 1.0 and z.cdf(0.5) == 0.0
    ln = ds.LengthDistribution("lognormal", 100, 400)
    assert ln.cdf(200) == pytest.approx(0.5)                   # symmetric in log space
    assert ln.cdf(100) == pytest.approx(0.0) and 0 < ln.cdf(150) < 0.5


def test_inverse_cdf_sampling_by_hand():
    seed = 11
    rng = random.Random(seed)
    draws = [rng.random() for _ in range(200)]
    u = ds.LengthDistribution("uniform", 10, 13)
    assert u.sample(200, seed) == [10 + math.floor(r * 4) for r in draws]
    z = ds.LengthDistribution("zipf", 1, 2, zipf_exponent=1.0)  # cumulative 2/3, 1
    assert z.sample(200, seed) == [1 if r <= 2 / 3 else 2 for r in draws]
    ln = ds.LengthDistribution("lognormal", 100, 400)
    sample = ln.sample(200, seed)
    assert min(sample) >= 100 and max(sample) <= 400
    assert sample == ln.sample(200, seed) and sample != ln.sample(200, seed + 1)
    # the draw's quantile maps monotonically to a length
    order = sorted(range(200), key=lambda i: draws[i])
    assert [sample[i] for i in order] == sorted(sample)


def test_length_rows_continue_the_ids():
    fixed = ds.LengthDistribution("uniform", 600, 600)
    rows = ds.length_rows(fixed, ds.LengthDistribution("uniform", 7, 7), 3, seed=1,
                          block_size=512, id_base=100)
    assert rows == [{"session_id": f"req-{i:06d}", "input_length": 600, "output_length": 7,
                     "hash_ids": [100 + 2 * i, 101 + 2 * i]} for i in range(3)]


def test_multi_turn_rows_by_hand():
    assert ds.multi_turn_rows(2, 2, 600, 8, 512, id_base=3, turn_delay_ms=250.0) == [
        {"session_id": "conv-00000", "input_length": 600, "output_length": 8,
         "hash_ids": [3, 4]},
        {"session_id": "conv-00000", "input_length": 600, "output_length": 8,
         "hash_ids": [5, 6], "delay": 250.0},
        {"session_id": "conv-00001", "input_length": 600, "output_length": 8,
         "hash_ids": [7, 8]},
        {"session_id": "conv-00001", "input_length": 600, "output_length": 8,
         "hash_ids": [9, 10], "delay": 250.0}]
    assert ds.multi_turn_rows(1, 2, 512, 8, 512, id_base=0)[1]["delay"] == 0.0


def test_think_times_by_hand():
    # inverse-CDF sampling: draw r, pause = exp(mu + sigma * Phi^-1(r)), mu = ln(400) - 0.6^2 / 2
    # (mean exactly 400 ms), rounded to 0.1 ms
    rng, mu = random.Random(5), math.log(400) - 0.18
    expected = [round(math.exp(mu + 0.6 * NormalDist().inv_cdf(rng.random())), 1)
                for _ in range(4)]
    assert ds.think_times(4, 400, 0.6, seed=5) == expected
    assert len(set(expected)) == 4 and any(round(x) != x for x in expected)
    rng = random.Random(5)
    assert ds.think_times(2, 400, 1.0, seed=5) == [
        round(math.exp(math.log(400) - 0.5 + NormalDist().inv_cdf(rng.random())), 1)
        for _ in range(2)]
    assert ds.think_times(3, 250, 0.0, seed=5) == [250.0, 250.0, 250.0]
    assert ds.think_times(3, 0, 0.6, seed=5) == [0.0, 0.0, 0.0]   # no think time, any shape


def test_each_conversation_draws_its_pauses_from_its_own_seed():
    # the docstring's contract: conversation c's pauses come from stable_seed(seed,
    # "conversation", c), in turn order, one per turn after the first
    rows = ds.multi_turn_rows(2, 4, 64, 8, 64, id_base=0, turn_delay_ms=400,
                              turn_delay_sigma=0.6, seed=7)
    for c in (0, 1):
        own = ds.think_times(3, 400, 0.6, ds.stable_seed(7, "conversation", c))
        assert [r["delay"] for r in rows[4 * c + 1:4 * c + 4]] == own


def test_trace_rows_by_hand():
    # 8 rows -> 1 context (8 // 16, at least 1), whose first use is a miss: the share is
    # raised to 0.7 / (1 - 1/8) = 0.8 of 4 blocks -> round(3.2) = 3 shared blocks per row,
    # the context's ids 0..3, fresh ids from 4 on
    rows = ds.trace_rows(8, 2048, 64, 0.7, 512, seed=3, id_base=0)
    assert [r["hash_ids"] for r in rows] == [[0, 1, 2, 4 + i] for i in range(8)]
    assert [r["session_id"] for r in rows] == [f"req-{i:06d}" for i in range(8)]
    assert {(r["input_length"], r["output_length"]) for r in rows} == {(2048, 64)}
    assert ds.block_reuse(rows) == 21 / 32
    # full reuse is capped at every block of the context; one row has no first-use loss
    assert [r["hash_ids"] for r in ds.trace_rows(2, 1024, 8, 1.0, 512, 3, 0)] == [[0, 1],
                                                                                  [0, 1]]
    assert ds.trace_rows(1, 2048, 8, 0.5, 512, 3, 0)[0]["hash_ids"] == [0, 1, 4, 5]
    # 32 rows -> 2 contexts of 4 ids each (0..3, 4..7), fresh ids from 8
    many = ds.trace_rows(32, 2048, 8, 0.5, 512, seed=3, id_base=0)
    heads = {tuple(r["hash_ids"][:2]) for r in many}
    assert heads <= {(0, 1), (4, 5)} and len(heads) == 2
    assert min(h for r in many for h in r["hash_ids"][2:]) == 8


def test_trace_rows_with_varying_lengths_share_whole_blocks_only():
    rows = ds.trace_rows(64, 2048, 8, 0.7, 512, seed=5, id_base=0, isl_sigma=0.6)
    lengths = [r["input_length"] for r in rows]
    assert len(set(lengths)) > 10
    assert lengths == ds.lognormal_lengths(64, 2048, 0.6, ds.stable_seed(5, "isl"))
    pool_blocks = max(ds.blocks_for(n, 512) for n in lengths)
    contexts = 64 // 16
    for r in rows:
        shared = [h for h in r["hash_ids"] if h < contexts * pool_blocks]
        assert len(shared) <= r["input_length"] // 512          # whole blocks only
        assert len(r["hash_ids"]) == ds.blocks_for(r["input_length"], 512)


def test_lognormal_lengths():
    assert ds.lognormal_lengths(3, 1000, 0.0, seed=1) == [1000, 1000, 1000]
    rng = random.Random(7)
    assert ds.lognormal_lengths(4, 1000, 0.5, seed=7) == [
        max(1, round(1000 * math.exp(0.5 * rng.gauss(0.0, 1.0)))) for _ in range(4)]
    assert min(ds.lognormal_lengths(200, 1, 3.0, seed=2)) == 1      # never below one token


def test_block_reuse_counts_ids_seen_in_earlier_rows():
    def rows(*ids):
        return [{"hash_ids": list(h)} for h in ids]
    assert ds.block_reuse([]) == 0.0
    assert ds.block_reuse(rows((1, 2), (2, 3))) == 1 / 4
    assert ds.block_reuse(rows((1, 1))) == 0.0          # a repeat within one row: no hit
    assert ds.block_reuse(rows((1,), (1,), (1,))) == 2 / 3


def test_fit_context_drops_and_clips_at_the_limit():
    rows = [{"input_length": i, "output_length": o, "session_id": n}
            for n, (i, o) in enumerate([(968, 5), (967, 10), (900, 68), (900, 69), (10, 5)])]
    kept, fit = ds.fit_context(rows, 1000)            # budget 1000 - 32 = 968
    assert [(r["session_id"], r["input_length"], r["output_length"]) for r in kept] == [
        (1, 967, 1), (2, 900, 68), (3, 900, 68), (4, 10, 5)]
    assert rows[3]["output_length"] == 69               # the caller's rows stay as they were
    assert fit == ds.ContextFit(max_model_len=1000, margin=32, requested_rows=5, dropped=1,
                                clipped=2)
    assert fit.as_dict() == {"max_model_len": 1000, "margin": 32, "requested_rows": 5,
                             "dropped": 1, "clipped": 2}
    assert ds.TEMPLATE_MARGIN == 32
    _, no_margin = ds.fit_context(rows, 968, margin=0)
    assert (no_margin.dropped, no_margin.clipped) == (1, 2)


def test_jsonl_bytes_and_files(tmp_path):
    assert ds.jsonl_bytes([{"b": [1, 2], "a": 1}, {"c": "x"}]) == \
        b'{"a":1,"b":[1,2]}\n{"c":"x"}\n'
    f = ds.write_jsonl([{"a": 1}], tmp_path / "new" / "dir" / "d.jsonl")
    assert f == ds.DatasetFile(tmp_path / "new" / "dir" / "d.jsonl",
                               hashlib.sha256(b'{"a":1}\n').hexdigest(), 1)


def test_trace_rows_details():
    # first-use compensation: 8 rows, 16 blocks, reuse 0.7 -> 0.8 x 16 = 12.8 -> 13 shared
    # (without it 0.7 x 16 = 11.2 -> 11)
    rows = ds.trace_rows(8, 8192, 8, 0.7, 512, seed=3, id_base=0)
    assert all(r["hash_ids"][:13] == list(range(13)) and r["hash_ids"][13] >= 16
               for r in rows)
    # a partial last block is a whole id at sigma 0: full reuse shares both blocks of 1000
    assert ds.trace_rows(2, 1000, 8, 1.0, 512, seed=3, id_base=0)[1]["hash_ids"] == [0, 1]
    # with varying lengths only whole blocks are shared, even at full reuse
    varied = ds.trace_rows(48, 1000, 8, 1.0, 512, seed=4, id_base=0, isl_sigma=0.5)
    pool_end = 3 * max(ds.blocks_for(r["input_length"], 512) for r in varied)  # 3 contexts
    for r in varied:
        shared = [h for h in r["hash_ids"] if h < pool_end]
        assert len(shared) == r["input_length"] // 512


def test_trace_contexts_follow_their_popularity():
    # 64 rows -> 4 contexts of 4 blocks (ids 0-15) chosen with weights 1, 1/2, 1/3, 1/4
    rows = ds.trace_rows(64, 2048, 8, 0.7, 512, seed=9, id_base=0)
    rng = random.Random(9)
    expected = [rng.choices(range(4), weights=[1, 1 / 2, 1 / 3, 1 / 4])[0] for _ in rows]
    assert [r["hash_ids"][0] // 4 for r in rows] == expected
    assert rows == ds.trace_rows(64, 2048, 8, 0.7, 512, seed=9, id_base=0)


def test_more_fit_and_file_edges(tmp_path):
    rows = [{"input_length": i, "output_length": 1} for i in (990, 980, 10)]
    kept, fit = ds.fit_context(rows, 1000)
    assert (len(kept), fit.dropped, fit.clipped) == (1, 2, 0)
    ds.write_jsonl([{"a": 1}], tmp_path / "d" / "one.jsonl")
    ds.write_jsonl([{"a": 2}], tmp_path / "d" / "two.jsonl")      # the folder exists already
    assert (tmp_path / "d" / "two.jsonl").read_bytes() == b'{"a":2}\n'
    varied = ds.lognormal_lengths(50, 1000, 1.0, seed=3)
    assert len(set(varied)) > 30                                  # sigma 1 is not sigma 0
