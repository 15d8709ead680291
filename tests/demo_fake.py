"""`make demo` until the embedded model lands: a headless speed run against the loopback fake server.

The fake server plays two models with scripted, known speeds (one plain, one that reasons first and
sends several tokens per event), so what forgetui prints can be checked against what was scripted.
It listens on 127.0.0.1 only and stops by itself.
"""

from __future__ import annotations

import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forgetui.cli import main  # noqa: E402
from tests.fakeserver import FakeServer, Script  # noqa: E402


def run() -> int:
    print(
        "forgetui demo: the embedded real model is not wired up yet, so this runs the headless speed\n"
        "benchmark against the LOOPBACK FAKE SERVER from tests/ (scripted timings, not a real model):\n"
        "  fake/steady  - first token after 80 ms, then one token every 8 ms (~125 tok/s)\n"
        "  fake/thinker - reasons for 24 tokens first, 3 tokens per event every 15 ms (~200 tok/s)\n",
        flush=True,
    )
    scripts = {
        "steady": Script(ttft_s=0.08, gap_s=0.008, content_tokens=200),
        "thinker": Script(ttft_s=0.12, gap_s=0.015, reasoning_tokens=24, content_tokens=200,
                          tokens_per_event=3, timings=True),
    }
    with FakeServer(scripts=scripts, max_lifetime_s=600) as server, tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "demo.toml"
        profile.write_text(textwrap.dedent(f"""\
            name = "demo-fake"
            description = "make demo against the loopback fake server"
            [[providers]]
            name = "fake"
            base_url = "{server.base_url}"
            kind = "llamacpp"
            [models]
            targets = ["fake/steady", "fake/thinker"]
            [speed]
            prompts = ["short", "medium", "long"]
            warmup = 1
            repeats = 3
            max_tokens = 64
            """))
        return main(["--run", str(profile)])


if __name__ == "__main__":
    sys.exit(run())
