"""The run's contact with its servers: dialect per provider, preflight facts, model lifecycle.

Preflight asks each provider once what it is (kind, detected or configured), its version and the
models it serves, and keeps the facts about each target model (context, quantization, size, and
the GGUF header when the file is on this machine). Lifecycle: where a server can load and unload
models (Ollama, LM Studio, llama-swap), other models are unloaded before a model's speed run so it
has the hardware to itself, the target is loaded and its load time recorded, and what was unloaded
is restored afterwards when the profile asks. Nothing is ever killed: where the server cannot do
this, the run records that the GPU state was not controlled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import httpx

from ..profile import Target
from ..providers import Dialect, ModelInfo, ServerInfo, dialect_for
from .events import Notice


def gguf_facts(path: str | None) -> dict[str, Any] | None:
    """Facts from a GGUF header on this machine, or None (no file, not GGUF, unreadable)."""
    if not path or not Path(path).is_file():
        return None
    from ..providers.gguf import GGUFError, read_gguf

    try:
        info = read_gguf(path)
    except (GGUFError, OSError) as exc:
        return {"path": path, "error": str(exc)}
    return {
        "path": path,
        "architecture": info.architecture,
        "file_type": info.file_type_name,
        "parameter_count": info.parameter_count,
        "context_length": info.context_length,
        "expert_count": info.expert_count,
        "expert_used_count": info.expert_used_count,
        "tensor_bytes": info.tensor_bytes,
        "bytes_per_token": info.bytes_per_token_estimate(),
        "quantization_mix": info.quantization_mix,
    }


class Servers:
    """Dialects and facts for the providers of one run."""

    def __init__(self, http: httpx.AsyncClient, emit: Callable[[Any], None]) -> None:
        self.http = http
        self.emit = emit
        self.dialects: dict[str, Dialect] = {}
        self.infos: dict[str, ServerInfo] = {}

    def dialect(self, target: Target) -> Dialect:
        return self.dialects[target.provider.name]

    async def preflight(self, targets: list[Target], servers_out: dict[str, Any],
                        targets_meta: list[dict[str, Any]], needed_tokens: int = 0) -> dict[str, str]:
        """Probe every provider once; returns {target label: error} for unreachable ones."""
        errors: dict[str, str] = {}
        for target, meta in zip(targets, targets_meta):
            prov = target.provider
            if prov.name not in self.infos:
                dialect, detected = await dialect_for(prov, self.http)
                info = await dialect.server_info()
                self.dialects[prov.name] = dialect
                self.infos[prov.name] = info
                servers_out[prov.name] = {
                    "base_url": prov.base_url,
                    "kind": dialect.kind,
                    "kind_detected": detected,
                    "reachable": info.reachable,
                    "version": info.version,
                    "error": info.error,
                    "models_listed": [m.id for m in info.models],
                    "controls_lifecycle": dialect.controls_lifecycle,
                }
                if detected:
                    self.emit(Notice("info", f"{prov.name}: detected server kind {dialect.kind}"
                                     + (f" (version {info.version})" if info.version else "")))
            info = self.infos[prov.name]
            if not info.reachable:
                errors[target.label] = f"provider {prov.name} unreachable at {prov.base_url}: {info.error}"
                self.emit(Notice("error", errors[target.label], target.label))
                continue
            model = next((m for m in info.models if m.id == target.model_id), None)
            if model is None:
                listed = [m.id for m in info.models]
                shown = ", ".join(listed[:8]) + (" ..." if len(listed) > 8 else "")
                self.emit(Notice("warning", f"{target.label}: not in the server's model list "
                                 f"({shown or 'empty'}); trying anyway", target.label))
            else:
                if model.path is None:
                    model.path = prov.gguf_path(model.id)
                dialect = self.dialects[prov.name]
                warning = dialect.context_warning(model, needed_tokens) if needed_tokens else None
                if warning:
                    self.emit(Notice("warning", f"{target.label}: {warning}", target.label))
                    meta["context_warning"] = warning
                facts = model.as_dict()
                gguf = gguf_facts(model.path)
                if gguf:
                    facts["gguf"] = gguf
                meta["model_info"] = facts
        return errors

    async def isolate(self, target: Target, enabled: bool) -> dict[str, Any]:
        """Give the target the hardware to itself where the server allows; returns the record."""
        dialect = self.dialect(target)
        if not enabled:
            return {"controlled": False, "reason": "profile: lifecycle.isolate = false"}
        if not dialect.controls_lifecycle:
            return {"controlled": False,
                    "reason": f"a {dialect.kind} server cannot load or unload models on request"}
        try:
            before = await dialect.loaded_models()
            if before is None:
                return {"controlled": False, "reason": f"{dialect.kind}: cannot list loaded models"}
            unloaded = []
            for other in before:
                if other != target.model_id and await dialect.unload(other):
                    unloaded.append(other)
            load_s = await dialect.load(target.model_id)
            record = {"controlled": load_s is not None, "loaded_before": before,
                      "unloaded": unloaded, "load_s": load_s,
                      "target_was_loaded": target.model_id in before}
            if load_s is None:
                record["reason"] = f"{dialect.kind}: loading on request is not supported here"
            if unloaded:
                self.emit(Notice("info", f"{target.label}: unloaded {', '.join(unloaded)} for a clean start", target.label))
            return record
        except httpx.HTTPError as exc:
            return {"controlled": False, "reason": f"lifecycle call failed: {type(exc).__name__}: {exc}"}

    async def restore(self, target: Target, record: dict[str, Any]) -> None:
        """Put back what ``isolate`` changed: unload the target if it was not loaded, reload the rest."""
        dialect = self.dialect(target)
        try:
            if record.get("controlled") and not record.get("target_was_loaded"):
                await dialect.unload(target.model_id)
            restored = []
            for other in record.get("unloaded", []):
                if await dialect.load(other) is not None:
                    restored.append(other)
            record["restored"] = restored
        except httpx.HTTPError as exc:
            record["restore_error"] = f"{type(exc).__name__}: {exc}"
            self.emit(Notice("warning", f"{target.label}: could not restore models: {exc}", target.label))


__all__ = ["Servers", "gguf_facts", "ModelInfo"]
