"""What the bubblewrap sandbox costs per execution.

Measures, for a trivial Python program (``print("hi")``) and a trivial shell program (``exit 0``):

* bare: the same interpreter started directly (``/usr/bin/python3 -I main.py`` via subprocess);
* sandboxed: ``Sandbox().run_sync(...)``: staging the temp dir, bwrap with the full A2 setup,
  prlimit, the stage-marker wrapper, reading, reaping, cleanup;
* overhead = median(sandboxed) - median(bare), over --runs executions each (default 50);
* throughput: executions per second with 2 concurrent workers (2 cores busy), sandboxed and bare.

Target: < 50 ms overhead per execution.

Run:  uv run python benchmarks/sandbox.py            (about 15 seconds)
      uv run python benchmarks/sandbox.py --runs 200 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from forgetui.sandbox import Sandbox  # noqa: E402

PROGRAMS = {
    "python": ("print('hi')\n", "main.py", ["/usr/bin/python3", "-I"]),
    "sh": ("exit 0\n", "main.sh", ["/bin/sh"]),
}


def bare_once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   env={"PATH": "/usr/bin:/bin"}, check=True)
    return time.perf_counter() - started


def sandboxed_once(box: Sandbox, language: str, source: str) -> float:
    started = time.perf_counter()
    res = box.run_sync(language, source)
    took = time.perf_counter() - started
    if res.status != "ok":
        raise SystemExit(f"sandboxed run failed: {res.reason}\n{res.stderr}")
    return took


async def throughput(run_one, total: int, workers: int) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(total):
        queue.put_nowait(i)

    async def worker() -> None:
        while True:
            try:
                queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await run_one()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return total / (time.perf_counter() - started)


def ms(x: float) -> str:
    return f"{x * 1000:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    box = Sandbox()
    check = box.check()
    print(check.describe().splitlines()[0])
    if not check.ok:
        print(check.describe())
        return 1
    print(f"cpus: {os.cpu_count()}, runs per figure: {args.runs}, euid: {os.geteuid()}")
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for language, (source, name, interpreter) in PROGRAMS.items():
            path = Path(tmp) / name
            path.write_text(source)
            argv = interpreter + [str(path)]
            for _ in range(3):  # warm page cache and the check() cache
                bare_once(argv)
                sandboxed_once(box, language, source)
            bare = [bare_once(argv) for _ in range(args.runs)]
            boxed = [sandboxed_once(box, language, source) for _ in range(args.runs)]
            bare_med, boxed_med = statistics.median(bare), statistics.median(boxed)

            async def one_boxed(language: str = language, source: str = source) -> None:
                res = await box.run(language, source)
                assert res.status == "ok", res.reason

            async def one_bare(argv: list[str] = argv) -> None:
                await asyncio.to_thread(bare_once, argv)

            total = max(args.runs, 4 * args.workers)
            boxed_rate = asyncio.run(throughput(one_boxed, total, args.workers))
            bare_rate = asyncio.run(throughput(one_bare, total, args.workers))
            figures[language] = {
                "bare_median_ms": bare_med * 1000,
                "sandboxed_median_ms": boxed_med * 1000,
                "sandboxed_p90_ms": statistics.quantiles(boxed, n=10)[-1] * 1000,
                "overhead_ms": (boxed_med - bare_med) * 1000,
                f"sandboxed_per_s_{args.workers}_workers": boxed_rate,
                f"bare_per_s_{args.workers}_workers": bare_rate,
            }
            print(f"\n{language}: {source.strip()!r}")
            print(f"  bare       median {ms(bare_med)}")
            print(f"  sandboxed  median {ms(boxed_med)}   p90 {ms(statistics.quantiles(boxed, n=10)[-1])}")
            print(f"  overhead   median {ms(boxed_med - bare_med)}   (target < 50 ms)")
            print(f"  throughput {boxed_rate:6.1f} sandboxed/s vs {bare_rate:6.1f} bare/s with {args.workers} workers")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
