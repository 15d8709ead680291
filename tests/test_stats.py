"""Statistics checked against hand-computed values."""

from __future__ import annotations

import math

import pytest

from forgetui.report.stats import (binomial_two_sided, interval_text, mcnemar_exact, pass_at_k, pass_hat_k,
                                   rate_text, wilson_interval)


def test_wilson_interval_matches_hand_computed_values() -> None:
    # 54/61, z = 1.959964: centre = (p + z^2/2n) / (1 + z^2/n), half = z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)
    z = 1.959963984540054
    n, k = 61, 54
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(centre - half) and high == pytest.approx(centre + half)
    assert (round(low, 4), round(high, 4)) == (0.7816, 0.9433)  # by hand: 0.781558, 0.943290
    assert wilson_interval(0, 10) == (pytest.approx(0.0, abs=1e-12), pytest.approx(0.2775, abs=1e-4))
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def test_binomial_two_sided_exact() -> None:
    # 0 of 6: 2 * (1/64) = 0.03125; 1 of 8: 2 * (1 + 8) / 256 = 0.0703125; symmetric middle = 1.
    assert binomial_two_sided(0, 6) == pytest.approx(0.03125)
    assert binomial_two_sided(1, 8) == pytest.approx(0.0703125)
    assert binomial_two_sided(2, 4) == pytest.approx(1.0)
    assert binomial_two_sided(0, 0) == 1.0


def test_mcnemar_counts_only_discordant_pairs() -> None:
    pairs = [(True, True)] * 20 + [(True, False)] * 9 + [(False, True)] * 1 + [(False, False)] * 5
    result = mcnemar_exact(pairs)
    assert (result.both_pass, result.only_a, result.only_b, result.both_fail, result.n) == (20, 9, 1, 5, 35)
    assert result.p_value == pytest.approx(2 * (1 + 10) / 1024)  # 0.021484375
    assert result.verdict(a="qwen", b="llama") == "qwen is better"
    even = mcnemar_exact([(True, False)] * 3 + [(False, True)] * 2 + [(True, True)] * 30)
    assert even.verdict() == "indistinguishable at this sample size" and even.p_value == pytest.approx(1.0)
    assert mcnemar_exact([(False, True)] * 7).verdict() == "B is better"  # 2/128 = 0.0156


def test_pass_at_k_and_pass_hat_k() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert pass_at_k(5, 4, 2) == 1.0
    assert pass_hat_k(5, 2, 2) == pytest.approx(1 / 10)
    assert pass_hat_k(5, 5, 5) == 1.0 and pass_hat_k(5, 4, 5) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_text_forms() -> None:
    assert rate_text(54, 61) == "89% (54/61)"
    assert interval_text(54, 61) == "[78%, 94%]"
    assert rate_text(0, 0) == "-" and interval_text(0, 0) == "-"
