"""Statistics for reports and comparisons: pure functions, standard library only.

- Wilson score interval for a pass rate (good at small n and at 0 % / 100 %, unlike the normal
  approximation).
- McNemar's exact test for paired pass/fail outcomes (two models on the same cases): only the
  discordant pairs carry information; under "no difference" each is a fair coin, so the p-value is
  a two-sided binomial test on them.
- pass@k (the unbiased estimator of Chen et al. 2021) and pass^k (all k attempts pass, estimated
  as C(c, k) / C(n, k)): what an unattended agent loop needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist


def wilson_interval(passed: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval (low, high) of passed/total; (0.0, 1.0) when total is 0."""
    if total <= 0:
        return 0.0, 1.0
    if not 0 <= passed <= total:
        raise ValueError(f"passed must be within 0..{total}, got {passed}")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = passed / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_two_sided(k: int, n: int) -> float:
    """Exact two-sided p-value of k successes in n fair-coin trials (sum of outcomes at most as
    likely as k; 1.0 when n is 0)."""
    if n <= 0:
        return 1.0
    probs = [math.comb(n, i) / 2 ** n for i in range(n + 1)]
    observed = probs[k]
    # A small tolerance so outcomes equally likely as the observed one are all counted.
    return min(1.0, sum(p for p in probs if p <= observed * (1 + 1e-9)))


@dataclass(frozen=True)
class McNemar:
    """Paired comparison of A and B on the same cases."""

    both_pass: int
    only_a: int  # A passed, B failed
    only_b: int  # B passed, A failed
    both_fail: int
    p_value: float

    @property
    def n(self) -> int:
        return self.both_pass + self.only_a + self.only_b + self.both_fail

    def verdict(self, alpha: float = 0.05, a: str = "A", b: str = "B") -> str:
        """"A is better", "B is better" or "indistinguishable at this sample size"."""
        if self.p_value < alpha and self.only_a != self.only_b:
            return f"{a} is better" if self.only_a > self.only_b else f"{b} is better"
        return "indistinguishable at this sample size"


def mcnemar_exact(pairs: list[tuple[bool, bool]]) -> McNemar:
    """McNemar's exact test on (A passed, B passed) pairs."""
    both = sum(1 for a, b in pairs if a and b)
    only_a = sum(1 for a, b in pairs if a and not b)
    only_b = sum(1 for a, b in pairs if b and not a)
    neither = len(pairs) - both - only_a - only_b
    return McNemar(both, only_a, only_b, neither, binomial_two_sided(min(only_a, only_b), only_a + only_b))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k attempts passes, from n attempts with c passes
    (unbiased: 1 - C(n-c, k) / C(n, k))."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that all k attempts pass, from n attempts with c passes: C(c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return math.comb(c, k) / math.comb(n, k)


def rate_text(passed: int, total: int) -> str:
    """``89% (54/61)``: the rate with its raw counts (``-`` when there is nothing to count)."""
    if total <= 0:
        return "-"
    return f"{round(100 * passed / total)}% ({passed}/{total})"


def interval_text(passed: int, total: int, confidence: float = 0.95) -> str:
    """``[78%, 95%]``: the Wilson interval in whole percent."""
    if total <= 0:
        return "-"
    low, high = wilson_interval(passed, total, confidence)
    return f"[{round(100 * low)}%, {round(100 * high)}%]"
