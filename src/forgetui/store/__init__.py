"""forgetui.store: durable, crash-safe storage of runs (records.jsonl + run.json per run).

Never imports textual or rich: it is used by headless runs and tests alike.
"""

from forgetui.store.atomic import atomic_write_bytes, atomic_write_json
from forgetui.store.jsonl import JsonlRead, append_record, read_records, repair_tail
from forgetui.store.runstore import RunHandle, RunStore
from forgetui.store.summary import summarize_run

__all__ = [
    "JsonlRead",
    "RunHandle",
    "RunStore",
    "append_record",
    "atomic_write_bytes",
    "atomic_write_json",
    "read_records",
    "repair_tail",
    "summarize_run",
]
