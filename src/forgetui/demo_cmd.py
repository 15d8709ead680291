"""``forgetui demo``, ``forgetui serve-demo`` and ``forgetui bench``: runs without a profile file.

Both write the profile they build to ``<data>/profiles/`` and run it through the same headless path
as ``forgetui --run``, so the run stores its profile like any other.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from pathlib import Path

import tomli_w

from .config import load_config
from .demo import DemoServer, quick_profile_text
from .errors import ConfigError, ExitCode
from .headless import run_headless
from .paths import locations


def _profiles_dir() -> Path:
    path = locations().data_dir / "profiles"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_demo(headless: bool = True) -> int:
    """Start the embedded model, run the quick profile against it, stop the model."""
    print("forgetui demo: starting the embedded SmolLM2-135M-Instruct (Q4_1) on llama-cpp-python...",
          file=sys.stderr, flush=True)
    with DemoServer(log_dir=locations().cache_dir) as server:
        print(f"demo model serving at {server.base_url} (pid {server.proc.pid if server.proc else '?'})",
              file=sys.stderr, flush=True)
        profile = _profiles_dir() / "demo.toml"
        profile.write_text(quick_profile_text(server.base_url))
        if headless:
            return run_headless(profile, resume_hint=False)
        from .cli import run_tui

        # The model stops when the TUI closes; its run stays in the store like any other.
        return run_tui(profile)


def serve_demo(port: int = 0) -> int:
    """Serve the embedded model until Ctrl-C; prints the base URL."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with DemoServer(port=port or None, log_dir=locations().cache_dir) as server:
        print(f"Serving SmolLM2-135M-Instruct as model 'smollm2-135m' at {server.base_url}", flush=True)
        print("Press Ctrl-C to stop.", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            if server.proc is None or server.proc.poll() is not None:
                print(f"the model server exited:\n{server.log_tail()}", file=sys.stderr)
                return int(ExitCode.FAILURES)
    return int(ExitCode.OK)


def run_bench(target: str, quick: bool = False, cases: str | None = None, json_out: Path | None = None,
              speed_only: bool = False, allow_unsandboxed: bool = False) -> int:
    """Benchmark one configured model without writing a profile by hand: speed, then the quick
    case set (or ``cases``), like bench-llm's one command."""
    name, _, model_id = target.partition("/")
    loc = locations()
    config = load_config(loc.config_file)
    provider = config.provider(name)
    if not model_id or provider is None:
        known = ", ".join(p.name for p in config.providers) or "none (forgetui config --init)"
        raise ConfigError(f"bench {target}: expected PROVIDER/MODEL with a provider from {loc.config_file} "
                          f"(known: {known})")
    speed = ({"prompts": ["short", "medium"], "warmup": 1, "repeats": 2, "max_tokens": 128} if quick
             else {"prompts": ["short", "medium", "long"], "warmup": 1, "repeats": 3, "max_tokens": 256})
    slug = re.sub(r"[^a-z0-9]+", "-", target.lower()).strip("-")[:48]
    profile = {
        "name": f"bench-{slug}",
        "description": f"forgetui bench {target}" + (" --quick" if quick else ""),
        "providers": [provider.model_dump(exclude_none=True, exclude_defaults=True) | {"name": provider.name, "base_url": provider.base_url}],
        "models": {"targets": [target]},
        "speed": speed,
    }
    if not speed_only:
        profile["cases"] = {"select": [s.strip() for s in (cases or "quick").split(",") if s.strip()]}
    path = _profiles_dir() / f"bench-{slug}{'-quick' if quick else ''}.toml"
    path.write_text(f"# written by: forgetui bench {target}\n" + tomli_w.dumps(profile))
    return run_headless(path, json_out=json_out, allow_unsandboxed=allow_unsandboxed)
