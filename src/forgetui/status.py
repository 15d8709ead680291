"""``forgetui status`` and ``forgetui models``: what is configured, what answers, what it serves."""

from __future__ import annotations

import asyncio
from typing import TextIO

import httpx

from .config import Config, ProviderConfig, load_config
from .errors import ExitCode
from .paths import locations
from .providers import ServerInfo, dialect_for
from .report.summary import human_bytes, human_count


async def probe_all(providers: list[ProviderConfig], timeout_s: float = 5.0) -> list[tuple[ProviderConfig, str, bool, ServerInfo]]:
    """(provider, kind, detected, info) for every provider, probed concurrently."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s)) as http:
        async def one(prov: ProviderConfig) -> tuple[ProviderConfig, str, bool, ServerInfo]:
            dialect, detected = await dialect_for(prov, http)
            return prov, dialect.kind, detected, await dialect.server_info()

        return list(await asyncio.gather(*(one(p) for p in providers)))


def sandbox_status() -> tuple[bool, str]:
    """Whether code can be sandboxed here: bwrap present, new enough, and a trial sandbox runs."""
    from .sandbox import Sandbox

    check = Sandbox().check()
    if check.ok:
        return True, f"bubblewrap {check.version or ''} at {check.bwrap}, trial sandbox ok".replace("  ", " ")
    return False, "; ".join(check.problems) + " (code cases will be skipped; details: forgetui sandbox check)"


def run_status(out: TextIO) -> int:
    loc = locations()
    config = load_config(loc.config_file)
    code = ExitCode.OK
    print(f"config: {loc.config_file}" + ("" if loc.config_file.exists() else "  (not created: forgetui config --init)"), file=out)
    runs = [p for p in loc.runs_dir.iterdir() if p.is_dir()] if loc.runs_dir.exists() else []
    print(f"runs:   {loc.runs_dir}  ({len(runs)} stored)", file=out)
    ok, sandbox = sandbox_status()
    print(f"sandbox: {'ok' if ok else 'missing'}: {sandbox}", file=out)
    from .cases.loader import library_dirs, load_library

    library = load_library(library_dirs(config))
    sets = ", ".join(f"{name} {count}" for name, count in library.sets().items())
    print(f"cases:  {len(library.cases)} (revision {library.revision}): {sets}", file=out)
    for problem in library.problems:
        code = ExitCode.FAILURES
        print(f"  problem: {problem}", file=out)
    if not config.providers:
        print("providers: none configured. Fix: forgetui config --init, then edit the file "
              "(or define [[providers]] in a profile)", file=out)
        return int(ExitCode.USAGE)
    print("providers:", file=out)
    for prov, kind, detected, info in asyncio.run(probe_all(config.providers)):
        how = "detected" if detected else "configured"
        if not info.reachable:
            code = ExitCode.CONNECTION
            print(f"  {prov.name:<12} DOWN  {prov.base_url}  ({kind}, {how}): {info.error}", file=out)
            print(f"  {'':<12}       fix: start the server, or correct base_url in {loc.config_file}", file=out)
            continue
        version = f" {info.version}" if info.version else ""
        loaded = sum(1 for m in info.models if m.state == "loaded")
        print(f"  {prov.name:<12} up    {prov.base_url}  {kind}{version} ({how}), "
              f"{len(info.models)} model(s)" + (f", {loaded} loaded" if loaded else ""), file=out)
    return int(code)


def model_rows(results: list[tuple[ProviderConfig, str, bool, ServerInfo]]) -> list[list[str]]:
    from .engine.servers import gguf_facts

    rows = []
    for prov, kind, _detected, info in results:
        if not info.reachable:
            rows.append([f"{prov.name}/?", "down", "-", "-", "-", "-", (info.error or "")[:60]])
            continue
        for m in info.models:
            gguf = gguf_facts(m.path or prov.gguf_path(m.id)) or {}
            quant = m.quantization or gguf.get("file_type") or "-"
            params = human_count(m.parameters or gguf.get("parameter_count")) if (m.parameters or gguf.get("parameter_count")) else (m.parameters_label or "-")
            context = m.context_length or gguf.get("context_length")
            rows.append([f"{prov.name}/{m.id}", m.state or "-", str(context or "-"), quant, params,
                         human_bytes(m.size_bytes or gguf.get("tensor_bytes")), kind])
    return rows


def run_models(out: TextIO, config: Config | None = None) -> int:
    config = config or load_config(locations().config_file)
    if not config.providers:
        print("No providers configured: forgetui config --init", file=out)
        return int(ExitCode.USAGE)
    results = asyncio.run(probe_all(config.providers))
    header = ["model", "state", "context", "quant", "params", "size", "server"]
    rows = model_rows(results)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)
    return int(ExitCode.OK if all(info.reachable for *_, info in results) else ExitCode.CONNECTION)
