"""The A/B statistics against published values, the tests they invert, and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from testbed.probes.ab import stats

# -- proportions: Newcombe (1998), Statistics in Medicine 17, tables of worked examples ------


@pytest.mark.parametrize(
    ("x", "n", "lo", "hi"),
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombe_1998(x: int, n: int, lo: float, hi: float) -> None:
    est = stats.wilson(x, n, 0.95)
    assert est.value == pytest.approx(x / n)
    assert est.lo == pytest.approx(lo, abs=5e-5)
    assert est.hi == pytest.approx(hi, abs=5e-5)


@pytest.mark.parametrize(
    ("x1", "n1", "x2", "n2", "lo", "hi"),
    [
        (56, 70, 48, 80, 0.0524, 0.3339),
        (9, 10, 3, 10, 0.1705, 0.8090),
        (6, 7, 2, 7, 0.0582, 0.8062),
        (5, 56, 0, 29, -0.0381, 0.1926),
        (0, 10, 0, 20, -0.1611, 0.2775),
        (0, 10, 0, 10, -0.2775, 0.2775),
        (10, 10, 0, 20, 0.6791, 1.0),
        (10, 10, 0, 10, 0.6075, 1.0),
    ],
)
def test_newcombe_difference_matches_method_10(
    x1: int, n1: int, x2: int, n2: int, lo: float, hi: float
) -> None:
    est = stats.newcombe_difference(x1, n1, x2, n2, 0.95)
    assert est.value == pytest.approx(x1 / n1 - x2 / n2)
    assert est.lo == pytest.approx(lo, abs=5e-5)
    assert est.hi == pytest.approx(hi, abs=5e-5)


def test_empty_samples_give_no_interval() -> None:
    assert stats.wilson(0, 0).value is None
    assert stats.newcombe_difference(0, 0, 1, 5).value is None
    assert stats.binomial_margin_tests(0, 0, 0.9) == (1.0, 1.0)
    assert stats.farrington_manning(0, 0, 0, 5, 0.05) == (1.0, 1.0)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 500), data=st.data(), confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_wilson_contains_the_estimate_and_widens_with_confidence(
    n: int, data: st.DataObject, confidence: float
) -> None:
    x = data.draw(st.integers(0, n))
    est = stats.wilson(x, n, confidence)
    wider = stats.wilson(x, n, 0.999)
    assert est.lo is not None
    assert est.hi is not None
    assert wider.lo is not None
    assert wider.hi is not None
    assert 0 <= est.lo <= x / n <= est.hi <= 1
    assert wider.lo <= est.lo
    assert est.hi <= wider.hi


def test_binomial_margin_tests_known_values() -> None:
    # 60 agreements out of 60 against 0.95: P(X >= 60 | p = 0.95) = 0.95 ** 60.
    above, below = stats.binomial_margin_tests(60, 60, 0.95)
    assert above == pytest.approx(0.95**60)
    assert below == 1.0
    above, below = stats.binomial_margin_tests(40, 60, 0.95)
    assert below < 1e-10
    assert above == pytest.approx(1.0)


def test_farrington_manning_at_zero_margin_is_the_pooled_z_test() -> None:
    x1, n1, x2, n2 = 12, 80, 5, 90
    pooled = (x1 + x2) / (n1 + n2)
    z = (x1 / n1 - x2 / n2) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    below, above = stats.farrington_manning(x1, n1, x2, n2, 0.0)
    assert above == pytest.approx(sps.norm.sf(z))
    assert below == pytest.approx(sps.norm.cdf(z))


@settings(max_examples=150, deadline=None)
@given(
    n1=st.integers(5, 200),
    n2=st.integers(5, 200),
    data=st.data(),
    delta=st.floats(-0.3, 0.3),
)
def test_restricted_mle_maximises_the_constrained_likelihood(
    n1: int, n2: int, data: st.DataObject, delta: float
) -> None:
    x1, x2 = data.draw(st.integers(0, n1)), data.draw(st.integers(0, n2))
    r1, r2 = stats.restricted_mle(x1, n1, x2, n2, delta)
    assert r1 - r2 == pytest.approx(delta, abs=1e-9)

    def loglik(p1: float, p2: float) -> float:
        def term(x: int, n: int, p: float) -> float:
            p = min(max(p, 1e-12), 1 - 1e-12)
            return x * math.log(p) + (n - x) * math.log(1 - p)

        return term(x1, n1, p1) + term(x2, n2, p2)

    best = loglik(r1, r2)
    grid = np.linspace(max(0.0, delta), min(1.0, 1 + delta), 401)
    # the closed form is good to ~1e-8 in p (acos near 1); allow that much likelihood
    assert all(loglik(p1, p1 - delta) <= best + 1e-7 * (n1 + n2) for p1 in grid)


# -- latency: Hodges–Lehmann intervals invert the rank tests ---------------------------------


def test_hodges_lehmann_point_estimates() -> None:
    # Walsh averages of 1, 2, 3: 1, 1.5, 2, 2, 2.5, 3 -> median 2.
    assert stats.hodges_lehmann_paired([1, 2, 3]).value == 2.0
    # Differences x_i - y_j of (5, 7) and (1, 2): 4, 3, 6, 5 -> median 4.5.
    assert stats.hodges_lehmann_shift([5, 7], [1, 2]).value == 4.5
    assert stats.hodges_lehmann_paired([]).value is None


def test_paired_interval_inverts_the_signed_rank_test() -> None:
    rng = np.random.default_rng(7)
    d = rng.normal(0.4, 1.0, size=40)
    est = stats.hodges_lehmann_paired(d, 0.95)
    assert est.lo is not None
    assert est.hi is not None
    assert est.lo < est.value < est.hi

    def p_at(mu: float) -> float:
        return float(sps.wilcoxon(d - mu, method="approx", correction=False).pvalue)

    eps = 1e-9
    assert p_at(est.lo + eps) >= 0.05 > p_at(est.lo - 1e-3)
    assert p_at(est.hi - eps) >= 0.05 > p_at(est.hi + 1e-3)


def test_shift_interval_inverts_the_mann_whitney_test() -> None:
    rng = np.random.default_rng(8)
    x, y = rng.normal(1.0, 1.0, size=30), rng.normal(0.0, 1.0, size=35)
    est = stats.hodges_lehmann_shift(x, y, 0.95)
    assert est.lo is not None
    assert est.hi is not None

    def p_at(mu: float) -> float:
        return float(sps.mannwhitneyu(x - mu, y, method="asymptotic", use_continuity=False).pvalue)

    assert p_at(est.lo + 1e-9) >= 0.05 > p_at(est.lo - 1e-3)
    assert p_at(est.hi - 1e-9) >= 0.05 > p_at(est.hi + 1e-3)


def test_ratio_of_an_exact_multiple_is_exact() -> None:
    stable = np.random.default_rng(1).lognormal(3.0, 0.4, size=50)
    est = stats.ratio_of_medians(stable, 1.3 * stable, paired=True, seed=3)
    assert est.value == pytest.approx(1.3)
    assert est.lo == pytest.approx(1.3)
    assert est.hi == pytest.approx(1.3)


def test_ratio_bootstrap_is_seeded_and_needs_data() -> None:
    rng = np.random.default_rng(2)
    s, c = rng.lognormal(3, 0.3, 60), rng.lognormal(3.1, 0.3, 60)
    assert stats.ratio_of_medians(s, c, paired=False, seed=5) == stats.ratio_of_medians(
        s, c, paired=False, seed=5
    )
    assert stats.ratio_of_medians([], c, paired=False).value is None
    assert stats.ratio_of_medians([0.0, 0.0], [1.0, 2.0], paired=True).value is None


def test_ratio_leaves_out_resamples_without_a_stable_median() -> None:
    """A stable side that is mostly zeros: some resamples have a median of 0 and no ratio.
    They are left out of the percentiles, and no warning escapes (warnings are errors here)."""
    stable = np.array([0.0] * 4 + [10.0] * 6)
    canary = np.full(10, 12.0)
    est = stats.ratio_of_medians(stable, canary, paired=True, resamples=500, seed=1)
    assert est.value == pytest.approx(1.2)
    assert est.lo == pytest.approx(1.2)
    assert est.hi is not None
    # resamples with five zeros have a stable median of 5: ratio 2.4; six or more: none
    assert est.hi == pytest.approx(2.4)


@pytest.mark.parametrize("paired", [True, False])
def test_ratio_interval_covers_the_true_ratio(paired: bool) -> None:
    """Lognormal latencies with a true median ratio of 1.2: the 90 % interval covers it in
    about 90 % of 200 simulated experiments (a wrong interval misses badly). Paired samples
    share a per-prompt effect; unpaired ones (split mode) are independent."""
    rng = np.random.default_rng(11)
    covered = 0
    for rep in range(200):
        prompt_effect = rng.normal(0, 0.5, size=60)
        other = prompt_effect if paired else rng.normal(0, 0.5, size=60)
        s = np.exp(3 + prompt_effect + rng.normal(0, 0.2, size=60))
        c = np.exp(3 + math.log(1.2) + other + rng.normal(0, 0.2, size=60))
        est = stats.ratio_of_medians(s, c, paired=paired, confidence=0.9, resamples=400, seed=rep)
        assert est.lo is not None
        assert est.hi is not None
        covered += est.lo <= 1.2 <= est.hi
    assert 0.8 <= covered / 200 <= 0.98


def test_rank_tests_answer_degenerate_samples_without_warnings() -> None:
    assert stats.wilcoxon_p([]) is None
    assert stats.wilcoxon_p([0.0, 0.0, 0.0]) == 1.0
    assert stats.mannwhitney_p([], [1.0]) is None
    assert stats.mannwhitney_p([2.0, 2.0], [2.0]) == 1.0
    assert stats.wilcoxon_p([0.0, 1.0, 2.0, 2.0, 3.0] * 8) is not None  # zeros and ties


def test_one_sided_tests_point_the_right_way() -> None:
    d = np.linspace(0.5, 1.5, 30)  # canary slower on every pair
    assert stats.wilcoxon_p(d, "greater") < 1e-6  # type: ignore[operator]
    assert stats.wilcoxon_p(d, "less") > 0.99  # type: ignore[operator]
    assert stats.mannwhitney_p(d + 1, d, "greater") < 1e-6  # type: ignore[operator]


def test_probability_of_superiority() -> None:
    assert stats.prob_superiority([3, 4], [1, 2]) == 1.0
    assert stats.prob_superiority([1, 2], [1, 2]) == 0.5
    assert stats.prob_superiority([1, 2], [3, 4]) == 0.0
    assert stats.prob_superiority([], [1]) is None
