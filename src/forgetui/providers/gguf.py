"""Read the header of a GGUF model file (metadata and tensor-info table), never the weights.

Sources:

* Layout, value types and standard keys: ggml-org/ggml ``docs/gguf.md`` ("File Structure",
  "Standardized key-value pairs"; read at commit 01f0d4da3e44).
* Tensor type ids, file type ids and type traits (block size, bytes per block): ggml-org/llama.cpp
  ``gguf-py/gguf/constants.py`` (``GGMLQuantizationType``, ``LlamaFileType``, ``GGML_QUANT_SIZES``;
  read at commit 0024aa7417ef).

Files are untrusted: every count and length is checked against what the file can still hold and
against fixed caps before anything is allocated or looped over, so a hostile or truncated file
ends in a ``GGUFError`` naming the file and offset, never a gigabyte allocation or a long hang.
Only GGUF v2/v3 little-endian files are read (v1 used 32-bit lengths; big-endian is not supported).
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ForgetuiError

__all__ = ["GGUFError", "GGUFInfo", "TensorInfo", "read_gguf"]

DEFAULT_ALIGNMENT = 32
MAX_KV = 1 << 20  # metadata pairs; real models have tens to a few hundred
MAX_TENSORS = 1 << 20  # real models have hundreds to tens of thousands
MAX_KEY_LEN = 65535  # the spec's limit for keys; also used for tensor names
MAX_STRING_LEN = 64 << 20  # chat templates and embedded tokenizer JSON stay far below this
MAX_ARRAY_LEN = 1 << 26  # a vocabulary is ~10^5..10^6 items
MAX_DIMS = 8  # ggml uses 4; a little headroom for future versions
MAX_NESTING = 8  # arrays of arrays: deep nesting only serves to blow the stack
KEEP_ARRAY = 64  # longer arrays are summarised so a vocabulary never lands in memory

# GGMLQuantizationType id -> (name, elements per block, bytes per block), from GGML_QUANT_SIZES.
_QK_K = 256
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 2 + 2 + _QK_K // 16 + _QK_K // 4),
    11: ("Q3_K", 256, 2 + _QK_K // 4 + _QK_K // 8 + 12),
    12: ("Q4_K", 256, 2 + 2 + _QK_K // 2 + 12),
    13: ("Q5_K", 256, 2 + 2 + _QK_K // 2 + _QK_K // 8 + 12),
    14: ("Q6_K", 256, 2 + _QK_K // 2 + _QK_K // 4 + _QK_K // 16),
    15: ("Q8_K", 256, 4 + _QK_K + _QK_K // 8),
    16: ("IQ2_XXS", 256, 2 + _QK_K // 4), 17: ("IQ2_XS", 256, 2 + _QK_K // 4 + _QK_K // 32),
    18: ("IQ3_XXS", 256, 2 + _QK_K // 4 + _QK_K // 8), 19: ("IQ1_S", 256, 2 + _QK_K // 8 + _QK_K // 16),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),
    22: ("IQ2_S", 256, 2 + _QK_K // 4 + _QK_K // 16), 23: ("IQ4_XS", 256, 2 + 2 + _QK_K // 2 + _QK_K // 64),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    29: ("IQ1_M", 256, _QK_K // 8 + _QK_K // 16 + _QK_K // 32), 30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 2 + 4 * 13), 35: ("TQ2_0", 256, 2 + 64), 39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}

# LlamaFileType id -> name without the "MOSTLY_"/"ALL_" prefix (4-6 and 33-35 are retired ids).
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_1_SOME_F16", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS",
    24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS",
    31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0",
    1024: "GUESSED",
}

# gguf_metadata_value_type id -> (name, struct code or None for string/array).
_VALUE_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("UINT8", "B"), 1: ("INT8", "b"), 2: ("UINT16", "H"), 3: ("INT16", "h"), 4: ("UINT32", "I"),
    5: ("INT32", "i"), 6: ("FLOAT32", "f"), 7: ("BOOL", "B"), 8: ("STRING", None), 9: ("ARRAY", None),
    10: ("UINT64", "Q"), 11: ("INT64", "q"), 12: ("FLOAT64", "d"),
}
_STRING, _ARRAY, _BOOL = 8, 9, 7


class GGUFError(ForgetuiError):
    """The file is not a GGUF file this reader can read; the message names the file and offset."""


@dataclass
class TensorInfo:
    """One entry of the tensor-info table. ``offset`` is absolute (from the start of the file)."""

    name: str
    shape: tuple[int, ...]  # ggml order: shape[0] is the contiguous (row) dimension
    ggml_type: int
    type_name: str  # e.g. "Q4_K"; "TYPE_<id>" for ids this reader does not know
    offset: int
    n_elements: int
    n_bytes: int | None  # from the type traits; None for unknown types


@dataclass
class GGUFInfo:
    """What a GGUF header says, plus facts derived from it."""

    path: str
    version: int
    file_size: int
    alignment: int
    data_offset: int  # where the tensor data blob starts
    metadata: dict[str, Any]  # arrays over 64 items become {"type": "<VALUE TYPE>", "length": n}
    tensors: list[TensorInfo]
    architecture: str | None = None
    name: str | None = None
    file_type: int | None = None
    file_type_name: str | None = None  # "Q4_1" for LlamaFileType.MOSTLY_Q4_1
    parameter_count: int = 0
    context_length: int | None = None
    block_count: int | None = None
    embedding_length: int | None = None
    head_count: int | None = None
    head_count_kv: int | None = None
    expert_count: int | None = None
    expert_used_count: int | None = None
    tensor_bytes: int = 0
    quantization_mix: dict[str, int] = field(default_factory=dict)  # type name -> bytes

    def tensor_sizes(self) -> dict[str, int]:
        """Bytes per tensor: the type traits, or (unknown types) the gap to the next tensor's data."""
        ends = sorted({t.offset for t in self.tensors} | {self.file_size})
        sizes = {}
        for t in self.tensors:
            if t.n_bytes is not None:
                sizes[t.name] = t.n_bytes
            else:  # an upper bound: the gap includes alignment padding
                i = bisect.bisect_right(ends, t.offset)
                sizes[t.name] = (ends[i] if i < len(ends) else t.offset) - t.offset
        return sizes

    def bytes_per_token_estimate(self) -> int | None:
        """Weight bytes read to generate one token, the memory-bandwidth floor of decoding.

        Rule: every tensor counts in full, except
        * ``token_embd.*``: a lookup reads one row (bytes / rows), unless the file has no
          ``output.weight``: then the embedding is tied and doubles as the output matrix, read in full;
        * MoE expert tensors (``*_exps``): only ``expert_used_count / expert_count`` of their bytes.
        None when there are no tensors, or expert tensors but no expert counts to scale them by.
        """
        if not self.tensors:
            return None
        sizes = self.tensor_sizes()
        tied = not any(t.name == "output.weight" for t in self.tensors)
        dense = experts = 0
        for t in self.tensors:
            n = sizes[t.name]
            if t.name.startswith("token_embd.") and not tied:
                rows = t.n_elements // t.shape[0] if t.shape and t.shape[0] else 1
                dense += n // max(rows, 1)
            elif "_exps." in t.name or t.name.endswith("_exps"):
                experts += n
            else:
                dense += n
        if experts:
            if not self.expert_count or self.expert_used_count is None:
                return None
            dense += experts * min(self.expert_used_count, self.expert_count) // self.expert_count
        return dense


class _Reader:
    """Bounds-checked little-endian reads; every failure names the file and the offset."""

    def __init__(self, f: BinaryIO, path: str, size: int) -> None:
        self.f, self.path, self.size, self.pos = f, path, size, 0

    def fail(self, msg: str, at: int | None = None) -> GGUFError:
        return GGUFError(f"{self.path}: {msg} (at offset {self.pos if at is None else at})")

    def need(self, n: int, what: str) -> None:
        # Checked before reading or allocating, so a lying length never costs memory.
        if n > self.size - self.pos:
            raise self.fail(f"truncated: {what} needs {n} bytes, only {self.size - self.pos} left "
                            f"in a {self.size}-byte file")

    def read(self, n: int, what: str) -> bytes:
        self.need(n, what)
        data = self.f.read(n)
        if len(data) != n:  # the file shrank while being read
            raise self.fail(f"truncated: {what} ended early")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.f.seek(n, os.SEEK_CUR)
        self.pos += n

    def unpack(self, code: str, what: str) -> Any:
        return struct.unpack("<" + code, self.read(struct.calcsize(code), what))[0]

    def string(self, what: str, cap: int = MAX_STRING_LEN) -> str:
        at = self.pos
        n = self.unpack("Q", f"{what} length")
        if n > cap:
            raise self.fail(f"{what} length {n} exceeds the limit of {cap} bytes", at)
        # Tokenizer vocabularies hold byte pieces that are not valid UTF-8 on their own.
        return self.read(n, what).decode("utf-8", errors="replace")

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        if vtype not in _VALUE_TYPES:
            raise self.fail(f"{what}: unknown value type {vtype}", self.pos - 4)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY:
            at = self.pos
            v = self.unpack(_VALUE_TYPES[vtype][1], what)
            if vtype == _BOOL:
                if v > 1:
                    raise self.fail(f"{what}: bool byte is {v}, not 0 or 1", at)
                return bool(v)
            return v
        return self.array(what, depth)

    def array(self, what: str, depth: int) -> Any:
        if depth >= MAX_NESTING:
            raise self.fail(f"{what}: arrays nested deeper than {MAX_NESTING}")
        etype = self.unpack("I", f"{what} array type")
        if etype not in _VALUE_TYPES:
            raise self.fail(f"{what}: unknown array element type {etype}", self.pos - 4)
        at = self.pos
        n = self.unpack("Q", f"{what} array length")
        code = _VALUE_TYPES[etype][1]
        # Smallest encoding of one element: lets the file size bound the loop below.
        min_size = struct.calcsize(code) if code else (8 if etype == _STRING else 12)
        if n > MAX_ARRAY_LEN or n * min_size > self.size - self.pos:
            raise self.fail(f"{what}: array length {n} cannot fit in the file", at)
        if n <= KEEP_ARRAY:
            if code and etype != _BOOL:
                return list(struct.unpack(f"<{n}{code}", self.read(n * min_size, what)))
            return [self.value(etype, f"{what}[{i}]", depth + 1) for i in range(n)]
        if code:
            self.skip(n * min_size, what)
        else:
            for i in range(n):
                if etype == _STRING:
                    self.skip(self.unpack("Q", f"{what}[{i}] length"), f"{what}[{i}]")
                else:
                    self.array(f"{what}[{i}]", depth + 1)
        return {"type": _VALUE_TYPES[etype][0], "length": n}


def read_gguf(path: str | Path) -> GGUFInfo:
    """Read the header of the GGUF file at ``path``; raise ``GGUFError`` for anything unreadable."""
    spath = str(path)
    try:
        with open(spath, "rb") as f:
            return _parse(_Reader(f, spath, os.fstat(f.fileno()).st_size))
    except OSError as e:
        raise GGUFError(f"{spath}: cannot read: {e.strerror or e}") from e


def _parse(r: _Reader) -> GGUFInfo:
    magic = r.read(4, "magic")
    if magic != b"GGUF":
        raise r.fail(f"not a GGUF file: magic is {magic!r}, expected b'GGUF'", 0)
    version = r.unpack("I", "version")
    if version & 0xFFFF == 0 and version >> 24 in (1, 2, 3):
        raise r.fail(f"big-endian GGUF (version {version >> 24}) is not supported", 4)
    if version == 1:
        raise r.fail("GGUF version 1 (32-bit lengths) is not supported; re-convert the model", 4)
    if version not in (2, 3):
        raise r.fail(f"unsupported GGUF version {version} (this reader knows 2 and 3)", 4)
    n_tensors = r.unpack("Q", "tensor count")
    n_kv = r.unpack("Q", "metadata count")
    # A pair takes at least 13 bytes and a tensor entry 24, so the file size bounds both loops.
    if n_kv > MAX_KV or n_kv * 13 > r.size - r.pos:
        raise r.fail(f"metadata count {n_kv} is implausible for this file", 16)
    if n_tensors > MAX_TENSORS or n_tensors * 24 > r.size - r.pos:
        raise r.fail(f"tensor count {n_tensors} is implausible for this file", 8)

    meta: dict[str, Any] = {}
    for i in range(n_kv):
        at = r.pos
        key = r.string(f"metadata key #{i}", MAX_KEY_LEN)
        if key in meta:
            raise r.fail(f"duplicate metadata key {key!r}", at)
        meta[key] = r.value(r.unpack("I", f"type of {key!r}"), repr(key))

    alignment = meta.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        raise r.fail(f"general.alignment must be a power of two, got {alignment!r}")

    raw: list[tuple[str, tuple[int, ...], int, int, int]] = []
    names: set[str] = set()
    for i in range(n_tensors):
        at = r.pos
        name = r.string(f"tensor #{i} name", MAX_KEY_LEN)
        if name in names:
            raise r.fail(f"duplicate tensor name {name!r}", at)
        names.add(name)
        n_dims = r.unpack("I", f"tensor {name!r} dimension count")
        if n_dims > MAX_DIMS:
            raise r.fail(f"tensor {name!r} has {n_dims} dimensions (limit {MAX_DIMS})", r.pos - 4)
        shape = struct.unpack(f"<{n_dims}Q", r.read(8 * n_dims, f"tensor {name!r} shape"))
        n_el = 1
        for d in shape:
            n_el *= d
        if n_el >= 1 << 63:
            raise r.fail(f"tensor {name!r} shape {shape} overflows 63 bits", at)
        gtype = r.unpack("I", f"tensor {name!r} type")
        rel = r.unpack("Q", f"tensor {name!r} offset")
        if rel % alignment:
            raise r.fail(f"tensor {name!r} data offset {rel} is not a multiple of {alignment}", r.pos - 8)
        raw.append((name, shape, gtype, rel, n_el))
    data_offset = -(-r.pos // alignment) * alignment

    tensors = []
    for name, shape, gtype, rel, n_el in raw:
        tname, block, size = GGML_TYPES.get(gtype, (f"TYPE_{gtype}", 0, 0))
        n_bytes = None
        if block:
            if shape and shape[0] % block:
                raise r.fail(f"tensor {name!r}: row of {shape[0]} is not a multiple of the "
                             f"{tname} block size {block}", data_offset)
            n_bytes = n_el // block * size
        end = data_offset + rel + (n_bytes or 0)
        if end > r.size:
            raise r.fail(f"truncated: tensor {name!r} data ends at {end}, past the end of the "
                         f"{r.size}-byte file", data_offset + rel)
        tensors.append(TensorInfo(name, tuple(shape), gtype, tname, data_offset + rel, n_el, n_bytes))
    return _derive(GGUFInfo(r.path, version, r.size, alignment, data_offset, meta, tensors))


def _derive(info: GGUFInfo) -> GGUFInfo:
    meta = info.metadata

    def text(key: str) -> str | None:
        v = meta.get(key)
        return v if isinstance(v, str) else None

    def count(key: str) -> int | None:
        v = meta.get(key)
        if isinstance(v, list):  # some architectures store per-layer values; report the largest
            v = max((x for x in v if type(x) is int), default=None)
        return v if type(v) is int else None

    info.architecture, info.name = text("general.architecture"), text("general.name")
    info.file_type = count("general.file_type")
    info.file_type_name = FILE_TYPES.get(info.file_type) if info.file_type is not None else None
    arch = info.architecture or ""
    info.context_length = count(f"{arch}.context_length")
    info.block_count = count(f"{arch}.block_count")
    info.embedding_length = count(f"{arch}.embedding_length")
    info.head_count = count(f"{arch}.attention.head_count")
    info.head_count_kv = count(f"{arch}.attention.head_count_kv")
    info.expert_count = count(f"{arch}.expert_count")
    info.expert_used_count = count(f"{arch}.expert_used_count")
    info.parameter_count = sum(t.n_elements for t in info.tensors)
    sizes = info.tensor_sizes()
    info.tensor_bytes = sum(sizes.values())
    mix: dict[str, int] = {}
    for t in info.tensors:
        mix[t.type_name] = mix.get(t.type_name, 0) + sizes[t.name]
    info.quantization_mix = dict(sorted(mix.items(), key=lambda kv: -kv[1]))
    return info
