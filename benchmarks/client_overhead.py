"""How far forgetui's client timings are from the truth, and what the client costs.

Starts the loopback fake server (tests/fakeserver.py) as a separate process that logs, with its own
clock, when each request arrived and when it sent every event. Then streams requests through
forgetui's StreamClient at 1, 16 and 64 concurrent streams and compares, per request:

* TTFT error: client TTFT - server TTFT (server: first token sent - request received), in ms.
  Also the same error for a naive clock started before ``client.stream()``, which is what the
  clock rule in DESIGN.md section 3 avoids.
* decode-rate error: client decode_tps / server decode rate - 1 (server rate from its own send
  times and exact per-event token counts), in %.
* client CPU seconds per 1,000 streamed tokens (process CPU time of this process only).

perf_counter_ns is CLOCK_MONOTONIC on Linux, system-wide, so both processes share one clock.

Run:  uv run python benchmarks/client_overhead.py          (about a minute)
      uv run python benchmarks/client_overhead.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from forgetui.engine.client import ChatRequest, ClientLimits, StreamClient  # noqa: E402
from forgetui.engine.metrics import NS, decode_rate, percentile  # noqa: E402


def start_server(log_file: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, str(ROOT / "tests" / "fakeserver.py"), "--model", "bench",
           "--ttft-s", str(args.ttft_ms / 1000), "--gap-s", str(args.gap_ms / 1000),
           "--tokens", str(args.tokens), "--max-lifetime-s", "900", "--log-file", str(log_file)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("FAKESERVER_URL="):
        proc.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return proc, line.strip().split("=", 1)[1]


async def run_level(client: StreamClient, url: str, streams: int, requests: int, tokens: int) -> tuple[list, float]:
    """Send ``requests`` requests, ``streams`` at a time; returns results and CPU seconds used."""
    sem = asyncio.Semaphore(streams)

    async def one(i: int):
        async with sem:
            req = ChatRequest(base_url=url, model="bench", max_tokens=tokens,
                              messages=[{"role": "user", "content": f"[{i}] benchmark prompt"}])
            return await client.chat_stream(req)

    cpu0 = time.process_time()
    results = await asyncio.gather(*(one(i) for i in range(requests)))
    return results, time.process_time() - cpu0


def compare(results: list, server_logs: dict[int, dict]) -> dict:
    ttft_err, naive_err, decode_err, tokens = [], [], [], 0
    failed = 0
    for res in results:
        acc = res.acc
        if not res.ok or acc.response_id is None:
            failed += 1
            continue
        log = server_logs[int(acc.response_id.rsplit("-", 1)[1])]
        tok_events = [e for e in log["events"] if e[1] in ("content", "reasoning")]
        s_first, s_last = tok_events[0][0], tok_events[-1][0]
        n = sum(e[2] for e in tok_events)
        tokens += n
        server_ttft = (s_first - log["received_ns"]) / NS
        ttft_err.append(((acc.t_first_token_ns - res.t_sent_ns) / NS - server_ttft) * 1000)
        naive_err.append(((acc.t_first_token_ns - res.t_call_ns) / NS - server_ttft) * 1000)
        server_decode = (n - tok_events[0][2]) / ((s_last - s_first) / NS)
        client_decode = decode_rate(acc.usage["completion_tokens"], acc.token_events,
                                    acc.t_first_token_ns, acc.t_last_token_ns)
        decode_err.append((client_decode / server_decode - 1) * 100)

    def stats(values: list[float]) -> dict:
        absolute = [abs(v) for v in values]
        return {"median": statistics.median(values), "p95_abs": percentile(absolute, 95),
                "max_abs": max(absolute)}

    return {"requests": len(results), "failed": failed, "tokens": tokens,
            "ttft_err_ms": stats(ttft_err), "naive_ttft_err_ms": stats(naive_err),
            "decode_err_pct": stats(decode_err)}


async def wake_cost(wakes: int = 2000) -> float:
    """CPU seconds of one bare asyncio wake-up here: the floor under any per-event client cost."""
    cpu0 = time.process_time()
    for _ in range(wakes):
        await asyncio.sleep(0.001)
    return (time.process_time() - cpu0) / wakes


async def plain_httpx_cost(url: str, tokens: int, requests: int = 10) -> float:
    """CPU seconds per token of a bare httpx read loop (no parsing) over the same streams."""
    import httpx

    body = {"model": "bench", "messages": [{"role": "user", "content": "x"}], "stream": True,
            "max_tokens": tokens}
    async with httpx.AsyncClient(timeout=60) as client:
        cpu0 = time.process_time()
        for _ in range(requests):
            async with client.stream("POST", url + "/chat/completions", json=body) as resp:
                async for _chunk in resp.aiter_raw():
                    pass
        return (time.process_time() - cpu0) / (requests * tokens)


async def measure(url: str, args: argparse.Namespace) -> list[tuple[int, list, float]]:
    out = []
    limits = ClientLimits(idle_timeout_s=60, request_timeout_s=600, max_connections=max(args.streams))
    async with StreamClient(limits) as client:
        for streams in args.streams:
            requests = max(args.min_requests, streams * args.rounds)
            results, cpu = await run_level(client, url, streams, requests, args.tokens)
            out.append((streams, results, cpu))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16, 64])
    parser.add_argument("--tokens", type=int, default=200, help="tokens per answer")
    parser.add_argument("--gap-ms", type=float, default=5.0, help="server gap between tokens (ms)")
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="server time to first token (ms)")
    parser.add_argument("--rounds", type=int, default=2, help="requests per stream slot")
    parser.add_argument("--min-requests", type=int, default=20)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        log_file = Path(tmp) / "server.jsonl"
        proc, url = start_server(log_file, args)
        try:
            levels = asyncio.run(measure(url, args))
            wake = asyncio.run(wake_cost())
            plain = asyncio.run(plain_httpx_cost(url, args.tokens))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        logs = {rec["n"]: rec for rec in map(json.loads, log_file.read_text().splitlines())}

    print(f"fake server: TTFT {args.ttft_ms:g} ms, {args.tokens} tokens, one every {args.gap_ms:g} ms; "
          f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}")
    header = ("streams", "requests", "TTFT err med", "p95 |err|", "naive clock med", "decode err med",
              "p95 |err|", "CPU s/1k tok")
    print("  ".join(f"{h:>15}" for h in header))
    report = []
    for streams, results, cpu in levels:
        c = compare(results, logs)
        c["streams"] = streams
        c["cpu_s_per_1k_tokens"] = cpu / c["tokens"] * 1000 if c["tokens"] else None
        report.append(c)
        row = (streams, f"{c['requests']} ({c['failed']} failed)" if c["failed"] else c["requests"],
               f"{c['ttft_err_ms']['median']:.3f} ms", f"{c['ttft_err_ms']['p95_abs']:.3f} ms",
               f"{c['naive_ttft_err_ms']['median']:.3f} ms", f"{c['decode_err_pct']['median']:+.3f} %",
               f"{c['decode_err_pct']['p95_abs']:.3f} %", f"{c['cpu_s_per_1k_tokens']:.4f}")
        print("  ".join(f"{str(v):>15}" for v in row))
    print(f"reference: one bare asyncio wake-up costs {wake * 1e3:.3f} ms CPU here, so 1,000 events "
          f"cost at least {wake * 1000:.3f} s before any parsing")
    print(f"reference: a bare httpx read loop over the same streams (1 stream, no parsing) costs "
          f"{plain * 1000:.4f} CPU s per 1k tokens")
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)}, "levels": report,
                                         "bare_wake_cpu_s": wake, "plain_httpx_cpu_s_per_token": plain},
                                        indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
