"""What the lowering holds for IR names, and how IR dtypes map to PTX registers and immediates."""

from __future__ import annotations

import math

import attrs
import numpy as np

from argus_verify import ir, semantics
from argus_verify.lowering.emitter import LoweringError, Reg, f32_imm, f64_imm

# fragment dtype -> register kind, memory type suffix
REG_KIND = {"f32": "f32", "f64": "f64", "f16": "b16", "bf16": "b16", "i32": "b32", "u32": "b32"}
MEM_TYPE = {"f32": "f32", "f64": "f64", "f16": "b16", "bf16": "b16", "i32": "b32", "u32": "b32"}
PARAM_TYPE = {"f32": ".f32", "f64": ".f64", "i32": ".s32", "u32": ".u32", "i64": ".s64", "f16": ".b16",
              "bf16": ".b16"}


@attrs.frozen
class Frag:
    regs: tuple  # one Reg per value (values at the same element may share a register)
    type: ir.FragType


@attrs.frozen
class Deferred:
    """A shared-memory load consumed by one SIMT mma: emitted there, k-slice by k-slice."""

    assign: ir.Assign
    starts: tuple  # evaluated index values of the view, one per index item
    type: ir.FragType


@attrs.define
class TensorInfo:
    name: str
    dtype: str
    esize: int
    ptr: Reg
    shape: list  # int | Reg per dimension
    strides: list  # Value per dimension
    readonly: bool


@attrs.define
class SharedInfo:
    alloc: ir.SharedAlloc
    base: object  # Value: byte address of the allocation in the shared window
    esize: int


# Names ptxas will not take as an identifier: the predefined constant WARP_SZ, and a lone "_" (a
# PTX identifier that starts with "_" needs a second character). Checked with ptxas over the
# opcodes, directives and type names in tests/test_cli_bad_input.py.
PTX_RESERVED = frozenset({"WARP_SZ", "_"})


def ident(name: str) -> str:
    """A PTX identifier for an IR name (a reserved or invalid one is prefixed with k_)."""
    out = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in name)
    return out if out and not out[0].isdigit() and out not in PTX_RESERVED else "k_" + out


def check_dtype(dtype: str, span) -> str:
    if dtype not in REG_KIND:
        raise LoweringError(f"fragments of {dtype} are not supported by the PTX lowering yet", span)
    return dtype


def compute_dtype(dtype: str) -> str:
    """16-bit floats are computed in f32."""
    return "f32" if dtype in ("f16", "bf16") else dtype


def address(reg_imm: tuple) -> str:
    """`[reg+imm]` for a (register, immediate byte offset) pair."""
    reg, imm = reg_imm
    return f"[{reg}+{imm}]" if imm else f"[{reg}]"


def immediate(value: float, dtype: str) -> str:
    """A PTX immediate holding `value` as a register of `dtype` holds it (rounded to nearest even)."""
    if dtype == "f32":
        return f32_imm(value)
    if dtype == "f64":
        return f64_imm(value)
    if dtype == "f16":
        bits = int(np.asarray(semantics.round_to(np.float64(value), "f16")).view(np.uint16))
        return f"0x{bits:04X}"
    if dtype == "bf16":  # host storage keeps bf16 in float32: its upper half is the bf16
        bits = int(np.asarray(semantics.round_to(np.float64(value), "bf16")).view(np.uint32)) >> 16
        return f"0x{bits:04X}"
    if dtype in ("i32", "u32"):
        if math.isinf(value) or math.isnan(value):
            return "0"
        return str(int(value))
    raise LoweringError(f"no immediate for {dtype}")
