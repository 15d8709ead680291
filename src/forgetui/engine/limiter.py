"""Parallel ability cases per provider, and HTTP 429 handling that loses no rows.

* ``effective_concurrency``: a provider's ``concurrency`` when configured, else 1 for local server
  kinds (and for any server on a loopback or private address) and 4 for hosted APIs.
* ``AdaptiveLimiter``: one per provider for the whole run (a hosted API limits the key, not the
  model). FIFO slots whose number halves on a 429 (down to 1; once per episode: requests sent
  before a cut do not cut again) and grows by one after ``raise_after`` clean answers in a row, up
  to the configured value. A Retry-After (or, without one, the backoff) pauses new sends to the
  provider.
* ``LimitedClient`` wraps the run's ``StreamClient`` for one target. When a case request still
  ends rate-limited after the client's own retries, it gives its slot back, waits, and sends the
  request again, within a budget per row (``MAX_ATTEMPTS`` rate-limited sends or ``MAX_WAIT_S``
  seconds since the row's first 429); after that the row is an ``error`` with the reason.
* A row's state (its slot, its 429 count, every result it got) lives in a context variable that
  the gate sets for the case's task, so ``cases_run`` needs no extra plumbing: ``account_case``
  reads it to write ``tokens``, ``cost_usd`` and ``rate_limited`` into the case record.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import ipaddress
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from .client import ChatRequest, StreamProgress, StreamResult
from .costs import cost_usd, provider_prices, record_tokens, sum_usages
from .events import Notice

#: Server kinds that run on the user's own hardware: one stream at a time unless configured.
LOCAL_KINDS = frozenset({"llamacpp", "llamacpp-python", "ollama", "lmstudio", "vllm", "sglang"})
LOCAL_DEFAULT = 1
HOSTED_DEFAULT = 4
#: Per row: rate-limited sends allowed, and seconds since the row's first 429, before giving up.
MAX_ATTEMPTS = 8
MAX_WAIT_S = 300.0
#: Clean answers in a row before a lowered concurrency grows by one.
RAISE_AFTER = 8

_STATUS_TEXT = {429: "429 Too Many Requests", 503: "503 Service Unavailable"}


def is_private_url(base_url: str) -> bool:
    """True for loopback, private, link-local and single-label / .local hosts (never resolves DNS)."""
    host = (urlsplit(base_url).hostname or "").lower()
    if not host or host == "localhost" or host.endswith((".localhost", ".local", ".lan", ".internal", ".home.arpa")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host  # "gpu-box": a machine on the local network
    return ip.is_loopback or ip.is_private or ip.is_link_local


def effective_concurrency(provider: Any, kind: str | None) -> int:
    """Parallel case requests for a provider: its ``concurrency`` if set, else by server kind.

    Local server kinds get 1 (parallel streams on one GPU slow each other and may exceed the
    server's slots). The generic ``openai`` kind (or an undetected one) is hosted, 4, unless its
    address is loopback or private: such a server is a local one forgetui could not identify.
    """
    configured = getattr(provider, "concurrency", None)
    if configured:
        return int(configured)
    kind = kind or getattr(provider, "kind", None)
    if kind in LOCAL_KINDS or is_private_url(provider.base_url):
        return LOCAL_DEFAULT
    return HOSTED_DEFAULT


def is_rate_limited(result: StreamResult) -> bool:
    """The request ended on HTTP 429, or on 503 with a Retry-After (the client's retries spent)."""
    return result.outcome == "http_error" and (
        result.http_status == 429 or (result.http_status == 503 and result.retry_after_s is not None))


def backoff_s(attempt: int) -> float:
    """0.5, 1, 2, 4, 8 s (capped), minus up to 25 % jitter so rows do not return in step."""
    return min(0.5 * 2 ** (attempt - 1), 8.0) * (1 - 0.25 * random.random())


class AdaptiveLimiter:
    """FIFO concurrency slots for one provider whose number adapts to 429 answers."""

    def __init__(self, name: str, limit: int, emit: Callable[[Any], None] | None = None,
                 raise_after: int = RAISE_AFTER, info: dict[str, Any] | None = None) -> None:
        self.name = name
        self.ceiling = self.limit = max(1, limit)
        self.raise_after = raise_after
        self.emit = emit or (lambda event: None)
        self.in_flight = 0
        #: Bumped on every change of the limit; a 429 of a request sent before it cuts nothing.
        self.generation = 0
        #: Where the run records this limiter (fingerprint ``concurrency``); kept up to date.
        self.info = info if info is not None else {}
        self.info.update({"effective": self.limit, "lowest": self.limit, "lowered": 0})
        self._clean = 0
        self._paused_until = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def _free(self) -> bool:
        return self.in_flight < self.limit and time.monotonic() >= self._paused_until

    def _dispatch(self) -> None:
        while self._waiters and self._free():
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)
        remaining = self._paused_until - time.monotonic()
        if self._waiters and remaining > 0 and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(remaining, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._dispatch()

    async def acquire(self, front: bool = False) -> None:
        """Wait for a slot (first in, first served; ``front`` for a row that gave its slot back)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._waiters.appendleft if front else self._waiters.append)(fut)
        self._dispatch()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted just as we were cancelled: give it back
            elif fut in self._waiters:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._dispatch()

    def on_success(self) -> None:
        """A clean answer: after ``raise_after`` in a row, a lowered limit grows by one."""
        self._clean += 1
        if self.limit < self.ceiling and self._clean >= self.raise_after:
            old, self.limit, self._clean = self.limit, self.limit + 1, 0
            self.generation += 1
            self.info["effective"] = self.limit
            self.emit(Notice("info", f"{self.name}: {self.raise_after} answers without a rate limit, "
                                     f"concurrency {old} -> {self.limit}"))
            self._dispatch()

    def on_pressure(self) -> None:
        """An answer that came only after a 429: not clean, so the limit does not grow on it."""
        self._clean = 0

    def on_rate_limited(self, generation: int, status: int | None, delay_s: float) -> None:
        """A request sent under ``generation`` was rate-limited: pause new sends for ``delay_s``,
        and halve the limit unless an earlier answer of the same episode did already."""
        self._clean = 0
        self._paused_until = max(self._paused_until, time.monotonic() + delay_s)
        if generation != self.generation or self.limit <= 1:
            return
        old, self.limit = self.limit, max(1, self.limit // 2)
        self.generation += 1
        self.info.update(effective=self.limit, lowest=min(self.info["lowest"], self.limit),
                         lowered=self.info["lowered"] + 1)
        what = _STATUS_TEXT.get(status or 0, f"HTTP {status}")
        self.emit(Notice("warning", f"{self.name}: {what}, concurrency {old} -> {self.limit}"))

    async def __aenter__(self) -> "RowState":
        """Hold a slot for one case (in the case's own task) and start its row state."""
        await self.acquire()
        row = RowState(self, holding=True)
        _ROW.set(row)
        return row

    async def __aexit__(self, *exc: object) -> None:
        row = _ROW.get(None)
        if row is not None and row.limiter is self and row.holding:
            row.holding = False
            self.release()


@dataclass
class RowState:
    """One case row: its slot, its rate-limit counts and every result its requests got."""

    limiter: AdaptiveLimiter | None
    holding: bool = False
    rate_limited: int = 0  # 429 (or 503 + Retry-After) answers met, client retries included
    limited_sends: int = 0  # sends of this row that ended rate-limited
    first_limited: float | None = None
    results: list[StreamResult] = field(default_factory=list)


_ROW: contextvars.ContextVar[RowState] = contextvars.ContextVar("forgetui_case_row")


class LimitedClient:
    """The run's ``StreamClient`` for one target's cases: rate-limited requests are sent again.

    Requests for another model (a judge, say) pass straight through, uncounted.
    Everything else (``http``, ``limits``) is the wrapped client's.
    """

    def __init__(self, inner: Any, limiter: AdaptiveLimiter, base_url: str, model_id: str,
                 max_attempts: int = MAX_ATTEMPTS, max_wait_s: float = MAX_WAIT_S) -> None:
        self.inner = inner
        self.limiter = limiter
        self.base_url = base_url
        self.model_id = model_id
        self.max_attempts = max_attempts
        self.max_wait_s = max_wait_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def gate(self) -> AdaptiveLimiter:
        """``async with client.gate:`` holds one slot for one case."""
        return self.limiter

    async def chat_stream(self, request: ChatRequest, progress: StreamProgress | None = None) -> StreamResult:
        if request.model != self.model_id:  # (dialects may move base_url: Ollama, LM Studio native)
            return await self.inner.chat_stream(request, progress)
        row = _ROW.get(None)
        if row is None or row.limiter is not self.limiter:
            row = RowState(self.limiter)  # not inside a gate: no slot to give back while waiting
        while True:
            generation = self.limiter.generation
            result = await self.inner.chat_stream(request, progress)
            row.results.append(result)
            row.rate_limited += result.rate_limited
            if not is_rate_limited(result):
                if result.rate_limited:
                    self.limiter.on_pressure()  # the client's own retries got through a 429
                elif result.outcome == "finished":
                    self.limiter.on_success()
                return result
            row.limited_sends += 1
            now = time.monotonic()
            row.first_limited = row.first_limited if row.first_limited is not None else now
            delay = result.retry_after_s if result.retry_after_s is not None else backoff_s(row.limited_sends)
            self.limiter.on_rate_limited(generation, result.http_status, delay)
            spent = now - row.first_limited
            if row.limited_sends >= self.max_attempts or spent + delay > self.max_wait_s:
                result.error = (f"{result.error}; rate limited {row.rate_limited} time(s) over {spent:.0f} s, "
                                f"gave up (budget {self.max_attempts} attempts or {self.max_wait_s:g} s)")
                return result
            await self._wait(row, delay, progress)

    async def _wait(self, row: RowState, delay_s: float, progress: StreamProgress | None) -> None:
        """Give the slot back, wait out the back-off, and take a slot again ahead of new rows."""
        holding = row.holding
        if holding:
            row.holding = False
            self.limiter.release()
        if progress is not None:
            progress.state = "waiting"
        await asyncio.sleep(delay_s)
        if holding:
            await self.limiter.acquire(front=True)
            row.holding = True


class ProviderLimiters:
    """One ``AdaptiveLimiter`` per provider for a run; each is described in ``info_out``
    (the fingerprint's ``concurrency``: configured, effective, lowest, lowered)."""

    def __init__(self, emit: Callable[[Any], None], info_out: dict[str, Any] | None = None) -> None:
        self.emit = emit
        self.info_out = info_out if info_out is not None else {}
        self._by_provider: dict[str, AdaptiveLimiter] = {}

    def limiter(self, provider: Any, kind: str | None) -> AdaptiveLimiter:
        if provider.name not in self._by_provider:
            info = self.info_out.setdefault(provider.name, {})
            info["configured"] = provider.concurrency
            self._by_provider[provider.name] = AdaptiveLimiter(
                provider.name, effective_concurrency(provider, kind), self.emit, info=info)
        return self._by_provider[provider.name]

    def client(self, client: Any, target: Any, dialect: Any) -> LimitedClient:
        """``client`` limited by the target's provider limiter."""
        limiter = self.limiter(target.provider, getattr(dialect, "kind", None))
        return LimitedClient(client, limiter, target.provider.base_url, target.model_id)


def limited_client(client: Any, target: Any, dialect: Any, emit: Callable[[Any], None]) -> LimitedClient:
    """``client`` as a LimitedClient for ``target`` (already one: unchanged; else with its own limiter)."""
    if isinstance(client, LimitedClient):
        return client
    return ProviderLimiters(emit).client(client, target, dialect)


def account_case(record: dict[str, Any], provider: Any) -> None:
    """Write ``tokens``, ``cost_usd`` and ``rate_limited`` into a case record before it is stored.

    Tokens sum every request the row sent to the model (tool steps, re-asks, re-sends after a 429),
    read after the dialect finalised each one; outside a gate, the record's own usage fields.
    """
    case = record["case"]
    row = _ROW.get(None)
    if row is not None and row.results:
        case["tokens"] = sum_usages(r.acc.usage for r in row.results)
    else:
        case["tokens"] = record_tokens(case)
    case["cost_usd"] = cost_usd(case["tokens"], provider_prices(provider))
    case["rate_limited"] = row.rate_limited if row is not None else 0
