"""Bootstrap statistics: equal to numpy with unit weights, equal to explicit resampling,
seeded, and intervals that cover what they should."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.results.stats import Sample, Statistic, differences, evaluate, interval, resample

PCTS = [Statistic("percentile", q=q) for q in (0, 50, 90, 99, 99.9, 100)]


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=200))
@settings(max_examples=60, deadline=None)
def test_unit_weights_equal_numpy(values: list[float]) -> None:
    sample = Sample.of(values)
    got = evaluate(sample, [*PCTS, Statistic("mean")])[:, 0]
    want = [*np.percentile(values, [0, 50, 90, 99, 99.9, 100]), np.mean(values)]
    assert got == pytest.approx(want, rel=1e-9, abs=1e-6)


def test_weights_equal_explicit_resampling_of_clusters() -> None:
    rng = np.random.default_rng(7)
    groups = [list(rng.exponential(size=rng.integers(0, 6))) for _ in range(200)]
    sample = Sample.grouped(groups)
    for _ in range(20):
        drawn = rng.integers(0, len(groups), len(groups))
        counts = np.bincount(drawn, minlength=len(groups))
        expanded = np.concatenate([groups[i] for i in drawn])
        got = evaluate(
            sample,
            [Statistic("percentile", q=90), Statistic("mean")],
            counts[None, :],
        )
        assert got[:, 0] == pytest.approx([np.percentile(expanded, 90), expanded.mean()])


def test_rate_is_sum_per_second() -> None:
    sample = Sample.of([1, 0, 1, 1])
    assert evaluate(sample, [Statistic("rate", seconds=2.0)])[0, 0] == pytest.approx(1.5)
    assert evaluate(Sample.of([]), [Statistic("rate", seconds=2.0)])[0, 0] == 0.0
    assert math.isnan(evaluate(Sample.of([]), [Statistic("mean")])[0, 0])


def test_seeded_and_reproducible() -> None:
    sample = Sample.of(np.random.default_rng(1).lognormal(size=300))
    a = resample(sample, [Statistic("percentile", q=99)], 200, seed=3)
    b = resample(sample, [Statistic("percentile", q=99)], 200, seed=3)
    c = resample(sample, [Statistic("percentile", q=99)], 200, seed=4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_interval_covers_the_true_median_most_of_the_time() -> None:
    rng = np.random.default_rng(11)
    covered = 0
    trials = 60
    for seed in range(trials):
        data = rng.exponential(scale=10.0, size=150)
        iv = interval(Sample.of(data), Statistic("percentile", q=50), resamples=400, seed=seed)
        covered += iv.low <= 10.0 * math.log(2) <= iv.high
    assert covered / trials > 0.85  # nominal 95 %


def test_difference_detects_a_shift_and_not_a_copy() -> None:
    rng = np.random.default_rng(5)
    base = rng.lognormal(mean=3.0, sigma=0.3, size=400)
    slower = base * 1.3
    stats = [Statistic("percentile", q=50), Statistic("percentile", q=99)]
    shifted = differences(Sample.of(base), Sample.of(slower), stats, resamples=500)
    assert shifted[0].relative is not None
    assert shifted[0].relative.estimate == pytest.approx(0.3)
    assert shifted[0].relative.low > 0.15  # significant slowdown
    same = differences(Sample.of(base), Sample.of(base), stats, resamples=500)
    assert same[0].delta.estimate == 0.0
    assert same[0].relative is not None
    assert same[0].relative.low < 0 < same[0].relative.high


def test_empty_clusters_and_empty_samples() -> None:
    sample = Sample.grouped([[], [], [1.0]])
    draws = resample(sample, [Statistic("percentile", q=50)], 300, seed=0)
    assert np.isnan(draws).any()  # resamples without the only non-empty request
    iv = interval(Sample.of([]), Statistic("percentile", q=50), resamples=10)
    assert math.isnan(iv.estimate)
    assert iv.resamples == 0


def test_noise_band_is_a_prediction_interval() -> None:
    from testbed.results.stats import noise_band

    assert noise_band([]) is None
    assert noise_band([10.0]) is None  # one run says nothing about noise
    assert noise_band([10.0, 10.0]) == (10.0, 10.0)
    few = noise_band([9.0, 11.0])
    many = noise_band([9.0, 11.0] * 10)
    assert few is not None
    assert many is not None
    assert few[0] < many[0] < 10.0 < many[1] < few[1]  # more runs, tighter band
    # a 4th run from the same distribution lands inside the band of 3 about 95 % of the time
    rng = np.random.default_rng(3)
    inside = 0
    for _ in range(400):
        data = rng.normal(100.0, 5.0, size=4)
        band = noise_band(list(data[:3]))
        assert band is not None
        inside += band[0] <= data[3] <= band[1]
    assert 0.9 < inside / 400 <= 1.0
