"""Tokens and cost: pure sums over server usage, priced with the provider's prices per million.

Counting rules (docs/results-format.md, "Tokens and cost"):

* ``input`` is the server's ``prompt_tokens``, ``output`` its ``completion_tokens``, and
  ``reasoning`` is ``completion_tokens_details.reasoning_tokens``: the part of ``output`` the model
  spent thinking. ``output`` already includes ``reasoning`` (OpenAI's definition), so the cost never
  adds ``reasoning`` on top.
* Sums run over every request of a case (tool steps, the thinking-off re-ask, re-sends after a 429);
  a count no request reported stays ``None`` rather than becoming a made-up 0.
* Cost = (input x input price + output x output price) / 1e6, USD. It is ``None`` when the provider
  has no prices (both must be set; 0 is a price) or no token count is known; an unknown count adds
  nothing to a sum of known ones.
"""

from __future__ import annotations

from typing import Any, Iterable

TOKEN_KEYS = ("input", "output", "reasoning")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def empty_tokens() -> dict[str, int | None]:
    return {key: None for key in TOKEN_KEYS}


def usage_tokens(usage: Any) -> dict[str, int | None]:
    """``{"input", "output", "reasoning"}`` from one OpenAI-style ``usage`` object (or None)."""
    if not isinstance(usage, dict):
        return empty_tokens()
    details = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    return {"input": _int(usage.get("prompt_tokens")), "output": _int(usage.get("completion_tokens")),
            "reasoning": _int(details.get("reasoning_tokens"))}


def sum_tokens(items: Iterable[dict[str, Any] | None]) -> dict[str, int | None]:
    """Field-wise sum of token dicts; a field stays None only when no item knew it."""
    total = empty_tokens()
    for item in items:
        for key in TOKEN_KEYS:
            value = _int((item or {}).get(key))
            if value is not None:
                total[key] = (total[key] or 0) + value
    return total


def sum_usages(usages: Iterable[Any]) -> dict[str, int | None]:
    """Tokens of several requests, each given by its server ``usage``."""
    return sum_tokens(usage_tokens(u) for u in usages)


def provider_prices(provider: Any) -> dict[str, float | None]:
    """The prices a provider config carries, in the shape stored in the run's fingerprint."""
    return {"input_per_mtok": getattr(provider, "price_input_per_mtok", None),
            "output_per_mtok": getattr(provider, "price_output_per_mtok", None)}


def record_prices(fingerprint: dict[str, Any], providers: Iterable[Any]) -> None:
    """Store the prices in force for each provider in the run's fingerprint (``prices``), so every
    cost in run.json can be recomputed from the stored tokens. A resumed run records the config's
    prices at resume time (the latest win)."""
    prices = fingerprint.setdefault("prices", {})
    for provider in providers:
        prices[provider.name] = provider_prices(provider)


def cost_usd(tokens: dict[str, Any] | None, prices: dict[str, Any] | None) -> float | None:
    """Dollars for ``tokens`` at ``prices`` ({input_per_mtok, output_per_mtok}), or None."""
    if not prices or prices.get("input_per_mtok") is None or prices.get("output_per_mtok") is None:
        return None
    tokens = tokens or {}
    given, taken = _int(tokens.get("input")), _int(tokens.get("output"))
    if given is None and taken is None:
        return None
    return ((given or 0) * float(prices["input_per_mtok"]) + (taken or 0) * float(prices["output_per_mtok"])) / 1e6


def sum_costs(costs: Iterable[float | None]) -> float | None:
    """Sum of the known costs; None when none is known."""
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


def speed_tokens(requests: Iterable[dict[str, Any]]) -> dict[str, int | None]:
    """Tokens of speed requests (warm-up and baseline included: they were sent and billed), from
    the counts each request record carries (``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``)."""
    return sum_tokens({"input": r.get("prompt_tokens"), "output": r.get("completion_tokens"),
                       "reasoning": r.get("reasoning_tokens")} for r in requests)


def judge_tokens(case: dict[str, Any]) -> dict[str, int | None] | None:
    """Tokens of the judge requests of one case (``details.judge.usage``: every judge attempt,
    in the tokens shape or as a server usage object), or None when no judge was asked."""
    judge = (case.get("details") or {}).get("judge")
    usage = judge.get("usage") if isinstance(judge, dict) else None
    if not isinstance(usage, dict):
        return None
    if any(key in usage for key in TOKEN_KEYS):
        return sum_tokens([usage])
    return usage_tokens(usage)


def judge_provider(case: dict[str, Any]) -> str | None:
    """The provider name of the judge that judged a case (``provider``, else 'PROVIDER/model')."""
    judge = (case.get("details") or {}).get("judge")
    if not isinstance(judge, dict):
        return None
    if isinstance(judge.get("provider"), str):
        return judge["provider"]
    for key in ("judge", "model"):
        label = judge.get(key)
        if isinstance(label, str) and "/" in label:
            return label.split("/", 1)[0]
    return None


def record_tokens(case: dict[str, Any]) -> dict[str, int | None]:
    """A case record's ``tokens``; for records written without it, the final ``usage`` plus its
    earlier ``attempts``' usage."""
    if isinstance(case.get("tokens"), dict):
        return sum_tokens([case["tokens"]])
    attempts = [a.get("usage") for a in case.get("attempts") or [] if isinstance(a, dict)]
    return sum_usages([case.get("usage"), *attempts])


def model_usage(cases: list[dict[str, Any]], speed_requests: list[dict[str, Any]],
                prices: dict[str, Any] | None, all_prices: dict[str, Any]) -> dict[str, Any]:
    """The token and cost fields of one model in run.json (``models[i]``).

    ``cases`` are ALL the model's case records, superseded ones included: a row asked again by
    ``forgetui recover`` cost its first tokens too. A ``forgetui judge`` record (``rejudged``)
    copies the model's tokens from the row it replaces, so only its judge tokens count.
    ``prices`` are the model's provider's from the fingerprint; ``all_prices`` all of them (the
    judge's provider is found from each judge verdict).
    """
    asked = [c for c in cases if not c.get("rejudged")]
    case_tokens = sum_tokens(record_tokens(c) for c in asked)
    speed = speed_tokens(speed_requests)
    tokens = sum_tokens([case_tokens, speed])
    judged = [(c, judge_tokens(c)) for c in cases]
    judged = [(c, t) for c, t in judged if t is not None]
    return {
        "tokens": tokens,
        "case_tokens": case_tokens,
        "speed_tokens": speed,
        "cost_usd": cost_usd(tokens, prices),
        "prices": prices,
        "rate_limited": sum(int(c.get("rate_limited") or 0) for c in asked),
        "judge_tokens": sum_tokens(t for _, t in judged),
        "judge_cost_usd": sum_costs(cost_usd(t, all_prices.get(judge_provider(c) or "")) for c, t in judged),
    }


def run_usage(models: list[dict[str, Any]]) -> dict[str, Any]:
    """Run totals (``totals`` in run.json) from the models' token and cost fields."""
    return {
        "tokens": sum_tokens(m.get("tokens") for m in models),
        "cost_usd": sum_costs(m.get("cost_usd") for m in models),
        "judge_tokens": sum_tokens(m.get("judge_tokens") for m in models),
        "judge_cost_usd": sum_costs(m.get("judge_cost_usd") for m in models),
        "rate_limited": sum(int(m.get("rate_limited") or 0) for m in models),
    }
