"""Hosted models in parallel (issue 7): concurrency per provider, 429 storms, tokens and cost.

Every run here goes through the real engine (headless ``--run``) against the loopback fake
server, whose request log (receive and finish stamps, HTTP status, body) is the judge of what
was sent when.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest

from forgetui.cli import main
from forgetui.config import ProviderConfig
from forgetui.engine.client import ChatRequest, ClientLimits, StreamClient
from forgetui.engine.costs import cost_usd, sum_usages
from forgetui.engine.limiter import AdaptiveLimiter, LimitedClient, effective_concurrency
from forgetui.store import read_records
from tests.fakeserver import Script, _prompt_tokens
from tests.conftest import use_case_dir

ANSWER = "Final answer: yes"  # three tokens for the fake server (one per word)


def _prompt(i: int) -> str:
    """40 characters exactly: 10 prompt tokens for the fake server's tokenizer (4 chars a token)."""
    text = f"PQ{i:02d}: is this case number {i:02d}? Say yes."
    return text.ljust(40, ".")[:40]


def _cases_toml(n: int) -> str:
    blocks = []
    for i in range(n):
        blocks.append(textwrap.dedent(f'''\
            [[case]]
            id = "par.q{i:02d}"
            category = "reasoning"
            sets = ["par"]
            prompt = "{_prompt(i)}"
            [case.grader]
            kind = "exact"
            expected = "yes"
            '''))
    return "\n".join(blocks)


def _setup(home: Path, tmp_path: Path, n: int) -> None:
    use_case_dir(home, tmp_path / "parcases", {"par.toml": _cases_toml(n)})


def _profile(write_profile, base_url: str, *, name: str, targets: list[str], provider: str = "",
             speed: str = "enabled = false", retries: int = 2) -> Path:
    quoted = ", ".join(f'"{t}"' for t in targets)
    return write_profile(textwrap.dedent(f"""\
        name = "{name}"
        [[providers]]
        name = "fake"
        base_url = "{base_url}"
        {provider}
        [models]
        targets = [{quoted}]
        [speed]
        {speed}
        [cases]
        select = ["par"]
        [limits]
        idle_timeout_s = 10
        request_timeout_s = 60
        retries = {retries}
        """), f"{name}.toml")


def _run_doc(home: Path, run_name: str) -> tuple[dict, Path]:
    for run_dir in (home / "data" / "runs").iterdir():
        doc = json.loads((run_dir / "run.json").read_text())
        if doc["name"] == run_name:
            return doc, run_dir
    raise AssertionError(f"no run named {run_name}")


def _chat_logs(server, marker: str | None = None) -> list:
    logs = [log for log in server.logs if log.path.endswith("/chat/completions")]
    if marker is not None:
        logs = [log for log in logs if marker in json.dumps(log.body)]
    return logs


def _max_overlap(logs: list) -> int:
    """Most requests the server was busy with at one time (body received .. response finished)."""
    points = sorted([(log.received_ns, 1) for log in logs] + [(log.finished_ns, -1) for log in logs])
    busy = peak = 0
    for _, step in points:
        busy += step
        peak = max(peak, busy)
    return peak


# ---- defaults by server kind -----------------------------------------------------------------

@pytest.mark.parametrize(("base_url", "kind", "configured", "expected"), [
    ("https://api.openai.com/v1", "openai", None, 4),      # hosted
    ("https://api.example.com/v1", None, None, 4),         # kind not known yet, public address
    ("http://127.0.0.1:8080/v1", "openai", None, 1),       # unidentified local server
    ("http://192.168.1.20:1234/v1", "openai", None, 1),    # a box on the LAN
    ("http://gpu-box:8000/v1", None, None, 1),             # single-label host name
    ("https://llm.example.com/v1", "vllm", None, 1),       # local server kind, even behind https
    ("http://127.0.0.1:11434/v1", "ollama", None, 1),
    ("https://api.openai.com/v1", "openai", 2, 2),         # configured wins
    ("http://127.0.0.1:8080/v1", "llamacpp", 3, 3),
])
def test_effective_concurrency_by_kind(base_url, kind, configured, expected) -> None:
    provider = ProviderConfig(name="p", base_url=base_url, concurrency=configured)
    assert effective_concurrency(provider, kind) == expected


def test_concurrency_is_optional_in_config() -> None:
    assert ProviderConfig(name="p", base_url="http://127.0.0.1:1/v1").concurrency is None
    assert ProviderConfig(name="p", base_url="http://127.0.0.1:1/v1", concurrency=4).concurrency == 4
    with pytest.raises(ValueError):
        ProviderConfig(name="p", base_url="http://127.0.0.1:1/v1", concurrency=0)


# ---- the limiter on its own ------------------------------------------------------------------

async def test_limiter_halves_once_per_episode_and_grows_back() -> None:
    notices: list = []
    lim = AdaptiveLimiter("hosted", 4, notices.append, raise_after=3)
    for _ in range(4):
        await lim.acquire()
    assert lim.in_flight == 4
    gen = lim.generation
    # Four requests sent under the same limit all come back 429: one cut, not three.
    for _ in range(4):
        lim.on_rate_limited(gen, 429, 0.0)
    assert lim.limit == 2
    assert [n.message for n in notices] == ["hosted: 429 Too Many Requests, concurrency 4 -> 2"]
    for _ in range(4):
        lim.release()
    # A request sent after the cut is a new episode: 2 -> 1, and 1 is the floor.
    lim.on_rate_limited(lim.generation, 429, 0.0)
    lim.on_rate_limited(lim.generation, 429, 0.0)
    assert lim.limit == 1 and lim.info["lowest"] == 1 and lim.info["lowered"] == 2
    for _ in range(3):
        lim.on_success()
    assert lim.limit == 2 and "concurrency 1 -> 2" in notices[-1].message
    for _ in range(6):
        lim.on_success()
    assert lim.limit == 4  # never above the configured value
    for _ in range(3):
        lim.on_success()
    assert lim.limit == 4


async def test_limiter_is_fifo_honours_the_pause_and_puts_returning_rows_first() -> None:
    lim = AdaptiveLimiter("p", 1)
    await lim.acquire()
    order: list[str] = []

    async def take(name: str, front: bool = False) -> None:
        await lim.acquire(front=front)
        order.append(name)
        lim.release()

    waiting = [asyncio.create_task(take("a")), asyncio.create_task(take("b"))]
    await asyncio.sleep(0.01)
    waiting.append(asyncio.create_task(take("again", front=True)))
    await asyncio.sleep(0.01)
    lim.on_rate_limited(lim.generation, 429, 0.2)  # Retry-After 0.2 s: nobody starts before it
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    lim.release()
    await asyncio.wait_for(asyncio.gather(*waiting), 5)
    assert order == ["again", "a", "b"]
    assert loop.time() - t0 >= 0.18
    # A cancelled waiter leaves no slot behind.
    await lim.acquire()
    blocked = asyncio.create_task(lim.acquire())
    await asyncio.sleep(0.01)
    blocked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocked
    lim.release()
    assert lim.in_flight == 0 and not lim._waiters


async def test_a_row_that_stays_rate_limited_gives_up_with_the_reason(fake) -> None:
    server = fake({"m": Script(faults={n: "429" for n in range(1, 50)}, retry_after_s=0.01)})
    lim = AdaptiveLimiter("fake", 2)
    async with StreamClient(ClientLimits(retries=1)) as inner:
        client = LimitedClient(inner, lim, server.base_url, "m", max_attempts=3)
        request = ChatRequest(base_url=server.base_url, model="m",
                              messages=[{"role": "user", "content": "hi"}], max_tokens=8)
        async with lim as row:
            result = await client.chat_stream(request)
    assert result.outcome == "http_error" and result.http_status == 429
    assert "gave up" in result.error and "rate limited 6 time(s)" in result.error
    assert row.rate_limited == 6 and row.limited_sends == 3  # 3 sends x (1 + 1 client retry)
    assert len(_chat_logs(server)) == 6 and lim.limit == 1 and lim.in_flight == 0


# ---- parallel cases: wall time ---------------------------------------------------------------

def test_concurrency_four_takes_about_a_quarter_of_serial(fake, home, tmp_path, write_profile, capsys) -> None:
    n = 16
    _setup(home, tmp_path, n)
    server = fake({"m": Script(answers={"PQ": ANSWER}, ttft_s=0.5, gap_s=0.001)})
    walls = {}
    for concurrency in (1, 4):
        before = len(_chat_logs(server))
        profile = _profile(write_profile, server.base_url, name=f"c{concurrency}", targets=["fake/m"],
                           provider=f"concurrency = {concurrency}")
        assert main(["--run", str(profile)]) == 0, capsys.readouterr().err
        logs = _chat_logs(server)[before:]
        assert len(logs) == n and all(log.status == 200 for log in logs)
        walls[concurrency] = (max(log.finished_ns for log in logs) - min(log.received_ns for log in logs)) / 1e9
        assert _max_overlap(logs) == concurrency
        doc, _ = _run_doc(home, f"c{concurrency}")
        assert [c["status"] for c in doc["models"][0]["cases"]] == ["pass"] * n
        assert doc["fingerprint"]["concurrency"]["fake"]["effective"] == concurrency
    ratio = walls[4] / walls[1]
    print(f"\n{n} cases, ttft 0.5 s: serial {walls[1]:.2f} s, concurrency 4 {walls[4]:.2f} s, ratio {ratio:.3f}")
    assert 0.15 < ratio < 0.45


# ---- 429 storms ------------------------------------------------------------------------------

def test_a_429_storm_loses_no_rows_and_lowers_concurrency(fake, home, tmp_path, write_profile, capsys) -> None:
    n = 12
    _setup(home, tmp_path, n)
    storm = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12]
    server = fake({"m": Script(answers={"PQ": ANSWER}, ttft_s=0.05, gap_s=0.001, retry_after_s=0.05,
                               faults={k: "429" for k in storm})})
    profile = _profile(write_profile, server.base_url, name="storm", targets=["fake/m"],
                       provider="concurrency = 4", retries=1)
    assert main(["--run", str(profile)]) == 0
    err = capsys.readouterr().err
    doc, run_dir = _run_doc(home, "storm")
    cases = doc["models"][0]["cases"]
    assert len(cases) == n and {c["status"] for c in cases} == {"pass"}
    assert len(_chat_logs(server)) == n + len(storm)
    for i, case in enumerate(sorted(cases, key=lambda c: c["case_id"])):
        hit = [log for log in _chat_logs(server, f"PQ{i:02d}:") if log.status == 429]
        assert case["rate_limited"] == len(hit), case["case_id"]
    assert sum(c["rate_limited"] for c in cases) == len(storm)
    assert doc["totals"]["rate_limited"] == len(storm) == doc["models"][0]["rate_limited"]
    assert "warning: fake: 429 Too Many Requests, concurrency 4 -> 2" in err
    info = doc["fingerprint"]["concurrency"]["fake"]
    assert info["configured"] == 4 and info["lowered"] >= 1 and info["lowest"] <= 2
    # The records on disk say the same (run.json is derived from them).
    records = read_records(run_dir / "records.jsonl").records
    assert sum(r["case"]["rate_limited"] for r in records if r["kind"] == "case_result") == len(storm)


# ---- tokens and cost -------------------------------------------------------------------------

def test_tokens_and_cost_are_exact_and_speed_runs_alone(fake, home, tmp_path, write_profile, capsys) -> None:
    n = 4
    _setup(home, tmp_path, n)
    script = Script(answers={"PQ": ANSWER}, reasoning_tokens=5, usage="always", ttft_s=0.05, gap_s=0.001)
    server = fake({"m": script, "k": script})
    profile = _profile(
        write_profile, server.base_url, name="priced", targets=["fake/m", "fake/k"],
        provider="concurrency = 4\nprice_input_per_mtok = 2.0\nprice_output_per_mtok = 10.0",
        speed='prompts = ["short"]\nwarmup = 1\nrepeats = 2\nmax_tokens = 8\nprefill_baseline = false')
    assert main(["--run", str(profile)]) == 0
    out = capsys.readouterr().out
    doc, run_dir = _run_doc(home, "priced")
    # Each case: 40-character prompt = 10 input tokens; 5 reasoning + 3 answer tokens = 8 output.
    # Dollars per case: (10 x 2.0 + 8 x 10.0) / 1e6 = 100 / 1e6 = 0.0001.
    for model in doc["models"]:
        for case in model["cases"]:
            assert case["status"] == "pass"
            assert case["tokens"] == {"input": 10, "output": 8, "reasoning": 5}
            assert case["cost_usd"] == pytest.approx(0.0001, abs=1e-12)
            assert case["rate_limited"] == 0
        assert model["case_tokens"] == {"input": 40, "output": 32, "reasoning": 20}
    # Speed requests (warm-up included) count too: as the server counted them.
    for model, label in zip(doc["models"], ("m", "k")):
        speed_logs = [log for log in _chat_logs(server) if log.model == label and "PQ" not in json.dumps(log.body)]
        assert len(speed_logs) == 3
        speed_in = sum(_prompt_tokens(log.body) for log in speed_logs)
        speed_out = sum(log.tokens_sent for log in speed_logs)
        assert model["speed_tokens"] == {"input": speed_in, "output": speed_out, "reasoning": 3 * 5}
        assert model["tokens"] == {"input": 40 + speed_in, "output": 32 + speed_out, "reasoning": 20 + 15}
        expected = ((40 + speed_in) * 2.0 + (32 + speed_out) * 10.0) / 1e6
        assert model["cost_usd"] == pytest.approx(expected, rel=1e-12)
        assert model["prices"] == {"input_per_mtok": 2.0, "output_per_mtok": 10.0}
    totals = doc["totals"]
    assert totals["tokens"]["input"] == sum(m["tokens"]["input"] for m in doc["models"])
    assert totals["cost_usd"] == pytest.approx(sum(m["cost_usd"] for m in doc["models"]), rel=1e-12)
    assert doc["fingerprint"]["prices"]["fake"] == {"input_per_mtok": 2.0, "output_per_mtok": 10.0}
    # The stored prices and tokens are enough to recompute every cost.
    assert cost_usd(doc["models"][0]["tokens"], doc["fingerprint"]["prices"]["fake"]) == doc["models"][0]["cost_usd"]
    # Summary table and summary.json.
    first = doc["models"][0]
    assert (f"fake/m: tokens in {first['tokens']['input']}, out {first['tokens']['output']} "
            f"(reasoning 35); cost ${first['cost_usd']:.6f}") in out
    assert f"total: tokens in {totals['tokens']['input']}" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["models"][0]["cost_usd"] == first["cost_usd"]
    assert summary["totals"]["tokens"] == totals["tokens"]
    # Speed ran alone: no case request of either model overlaps any speed request.
    logs = _chat_logs(server)
    speed = [log for log in logs if "PQ" not in json.dumps(log.body)]
    cases = [log for log in logs if "PQ" in json.dumps(log.body)]
    for s in speed:
        assert all(c.finished_ns <= s.received_ns or c.received_ns >= s.finished_ns for c in cases)


def test_no_prices_means_no_cost(fake, home, tmp_path, write_profile, capsys) -> None:
    _setup(home, tmp_path, 2)
    server = fake({"m": Script(answers={"PQ": ANSWER}, usage="always", ttft_s=0.01, gap_s=0.001)})
    profile = _profile(write_profile, server.base_url, name="free", targets=["fake/m"])
    assert main(["--run", str(profile)]) == 0
    out = capsys.readouterr().out
    doc, run_dir = _run_doc(home, "free")
    model = doc["models"][0]
    assert all(c["cost_usd"] is None and c["tokens"] == {"input": 10, "output": 3, "reasoning": 0}
               for c in model["cases"])
    assert model["cost_usd"] is None and doc["totals"]["cost_usd"] is None
    assert model["tokens"] == {"input": 20, "output": 6, "reasoning": 0}
    assert "fake/m: tokens in 20, out 6 (reasoning 0); cost: n/a (no prices)" in out
    assert "total: tokens in 20, out 6 (reasoning 0); cost: n/a (no prices)" in out
    assert json.loads((run_dir / "summary.json").read_text())["totals"]["cost_usd"] is None


def test_sums_keep_unknown_counts_unknown() -> None:
    tokens = sum_usages([{"prompt_tokens": 7, "completion_tokens": 5}, None,
                         {"prompt_tokens": 3, "completion_tokens": 1,
                          "completion_tokens_details": {"reasoning_tokens": 1}}])
    assert tokens == {"input": 10, "output": 6, "reasoning": 1}
    assert sum_usages([None, {}]) == {"input": None, "output": None, "reasoning": None}
    prices = {"input_per_mtok": 1.5, "output_per_mtok": 6.0}
    assert cost_usd(tokens, prices) == pytest.approx((10 * 1.5 + 6 * 6.0) / 1e6)
    assert cost_usd(tokens, {"input_per_mtok": 1.5, "output_per_mtok": None}) is None
    assert cost_usd({"input": None, "output": None}, prices) is None


def test_run_totals_count_superseded_rows_and_judge_tokens_apart() -> None:
    from types import SimpleNamespace

    from forgetui.engine.rundoc import build_document

    def rec(seq: int, case_id: str, tokens: dict, **extra) -> dict:
        case = {"case_id": case_id, "category": "reasoning", "tags": [], "status": "pass", "reason": "ok",
                "tokens": tokens, "rate_limited": extra.pop("rate_limited", 0), **extra}
        return {"kind": "case_result", "key": f"fake/m|case|{case_id}", "model": "fake/m", "seq": seq, "case": case}

    judge = {"judge": {"judge": "jp/judge-1", "verdict": "same", "usage": {"input": 100, "output": 10, "reasoning": None}}}
    records = [
        rec(0, "a", {"input": 10, "output": 4, "reasoning": 1}, rate_limited=2),   # later recovered: still paid
        rec(1, "a", {"input": 10, "output": 6, "reasoning": 0}),
        rec(2, "b", {"input": 20, "output": 5, "reasoning": None}, details=judge),
        # `forgetui judge` copy of row b: the answer's tokens again (not counted twice), a new judgement
        rec(3, "b", {"input": 20, "output": 5, "reasoning": None}, details=judge, rejudged={"at": "x"}),
    ]
    meta = {"targets": [{"model": "fake/m", "provider": "fake", "model_id": "m"}],
            "fingerprint": {"prices": {"fake": {"input_per_mtok": 1.0, "output_per_mtok": 4.0},
                                       "jp": {"input_per_mtok": 0.5, "output_per_mtok": 2.0}}}}
    doc = build_document(meta, records, SimpleNamespace(enabled=False))
    model = doc["models"][0]
    assert [c["case_id"] for c in model["cases"]] == ["a", "b"]  # run.json shows the latest per row
    assert model["case_tokens"] == {"input": 40, "output": 15, "reasoning": 1}
    assert model["tokens"] == model["case_tokens"]  # speed off
    assert model["cost_usd"] == pytest.approx((40 * 1.0 + 15 * 4.0) / 1e6)
    assert model["rate_limited"] == 2
    assert model["judge_tokens"] == {"input": 200, "output": 20, "reasoning": None}
    assert model["judge_cost_usd"] == pytest.approx(2 * (100 * 0.5 + 10 * 2.0) / 1e6)
    assert doc["totals"]["judge_cost_usd"] == model["judge_cost_usd"]
    assert doc["totals"]["cost_usd"] == model["cost_usd"]
    # A judge on a provider without prices: tokens still counted, cost unknown.
    del meta["fingerprint"]["prices"]["jp"]
    doc = build_document(meta, records, SimpleNamespace(enabled=False))
    assert doc["models"][0]["judge_cost_usd"] is None and doc["models"][0]["judge_tokens"]["input"] == 200
