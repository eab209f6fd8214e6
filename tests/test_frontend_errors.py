"""Bad input to the front end: every mistake is an `ArgusError` at an exact line and column with a
message that says what is wrong, never a Python exception.

Sources are built from small templates so that line numbers are easy to count: `body(...)` puts its
lines after a four-line kernel header (`HEAD`, 256 threads) or after `W32` (three lines, one warp),
indented by four spaces, so body line i is source line 5 + i (or 4 + i) and a body column c is
source column c + 4.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argus_verify.diagnostics import ArgusError, ArgusSyntaxError, ArgusTypeError, format_error
from argus_verify.frontend import compile_source

SPECS = Path(__file__).resolve().parent.parent / "specs"

HEAD = """\
kernel k<BLOCK=1024>(x: f32[N], y: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(256)
    base = block_id.x * BLOCK
"""
W32 = """\
kernel w(x: f16[N]) -> out: f32[N]:
    grid(1)
    block(32)
"""
LOAD = "xs = load(x[base : base + BLOCK], tv=(256, 4):(4, 1), mask=True)"
STORE = "store(out[base : base + BLOCK], xs, mask=True)"


def body(*lines: str, head: str = HEAD) -> str:
    return head + "".join(f"    {ln}\n" for ln in lines)


def kernel(*lines: str, sig: str = "kernel k(x: f32[N]) -> out: f32[N]:") -> str:
    return sig + "\n" + "".join(f"{ln}\n" for ln in lines)


def error_of(src: str, consts=None) -> ArgusError:
    with pytest.raises(ArgusError) as info:
        compile_source(src, "t.arg", consts)
    return info.value


def at(err: ArgusError) -> tuple[int, int, str]:
    assert err.span is not None and err.span.file == "t.arg"
    return err.span.line, err.span.col, err.message


# -- syntax errors ----------------------------------------------------------------------------------

SYNTAX = [
    ("missing colon after kernel signature",
     "kernel k(x: f32[N]) -> out: f32[N]\n    grid(1)\n    block(32)\n",
     1, 35, "unexpected end of line, expected ':'"),
    ("missing colon after for",
     body("for i in range(4)", "    pass"),
     5, 22, "unexpected end of line, expected ':'"),
    ("missing close paren: points at the open one",
     body(LOAD[:-1], STORE),
     5, 14, "'(' was never closed"),
    ("unterminated call at end of file",
     body("xs = load(x[base : base + BLOCK],"),
     5, 14, "'(' was never closed"),
    ("unterminated call at end of file without a final newline",
     body("xs = load(x[base : base + BLOCK],").rstrip("\n"),
     5, 14, "'(' was never closed"),
    ("statement indented deeper than its block: points at the statement",
     body(LOAD, "  " + STORE),
     6, 7, "unexpected indentation"),
    ("dedent to a column no block started at",
     body("for i in range(4):", "    pass", "  pass"),
     7, 7, "unindent does not match any outer indentation level"),
    ("tab then spaces",
     "kernel k(x: f32[N]) -> out: f32[N]:\n\tgrid(1)\n    block(32)\n",
     3, 5, "unindent does not match any outer indentation level"),
    ("kernel body not indented",
     "kernel k(x: f32[N]) -> out: f32[N]:\ngrid(1)\n",
     2, 1, "unexpected 'grid', expected an indented block"),
    ("kernel with no body at end of file",
     "kernel k(x: f32[N]) -> out: f32[N]:\n",
     1, 36, "unexpected end of file, expected an indented block"),
    ("stray character",
     body(LOAD + " $"),
     5, 70, "unexpected character '$'"),
    ("stray question mark",
     body("q = base ? 1"),
     5, 14, "unexpected character '?'"),
    ("operator without right operand",
     body("q = base +"),
     5, 15, "unexpected end of line, expected an expression"),
    ("keyword argument without value",
     body("xs = load(x[base : base + BLOCK], tv=)"),
     5, 42, "unexpected ')', expected an expression"),
    ("else if instead of elif",
     body("if base == 0:", "    pass", "else if base == 1:", "    pass"),
     7, 10, "unexpected 'if', expected ':'"),
    ("Python's element assignment",
     body(LOAD, "out[base] = xs"),
     6, 15, "cannot assign to an element or slice; write memory with store(y[i], value) (names are bound "
     "with `name = value`)"),
    ("slice assignment",
     body(LOAD, "out[base : base + BLOCK] = xs"),
     6, 30, "cannot assign to an element or slice; write memory with store(y[i], value) (names are bound "
     "with `name = value`)"),
    ("assignment to an expression that is no subscript keeps the parser's message",
     body("q = base", "q + 1 = 2"),
     6, 11, "unexpected '=', expected one of ')', ']', ',', ':', end of line, ..."),
    ("unknown dtype in a signature",
     "kernel k(x: f33[N]) -> out: f32[N]:\n    grid(1)\n    block(32)\n",
     1, 13, "unexpected 'f33', expected a dtype (f32, bf16, ...)"),
]


@pytest.mark.parametrize("src, line, col, message", [c[1:] for c in SYNTAX], ids=[c[0] for c in SYNTAX])
def test_syntax_error(src, line, col, message):
    err = error_of(src)
    assert isinstance(err, ArgusSyntaxError)
    assert at(err) == (line, col, message)


def test_syntax_error_never_mentions_lark():
    for _, src, *_ in SYNTAX:
        text = format_error(error_of(src))
        assert "lark" not in text.lower() and "Token(" not in text and "__ANON" not in text


def test_syntax_error_renders_line_and_caret():
    err = error_of(body(LOAD[:-1], STORE))
    lines = format_error(err).splitlines()
    assert lines[0] == "t.arg:5:14: error: '(' was never closed"
    assert lines[1].endswith("|     " + LOAD[:-1])
    # the caret sits under column 14 of the source line
    src_at = lines[1].index("|") + 2
    assert lines[2].index("^") - src_at == 13


# -- semantic errors -----------------------------------------------------------------------------------

SEMANTIC = [
    # names
    ("unknown name", body("xs = load(x[bse : bse + BLOCK], tv=(256, 4):(4, 1), mask=True)"),
     5, 17, "unknown name 'bse'"),
    ("unknown function", body("xs = lod(x[base : base + BLOCK], tv=(256, 4):(4, 1), mask=True)"),
     5, 10, "unknown function 'lod'"),
    ("arithmetic on memory instead of a loaded fragment", body(LOAD, "store(out[base : base + BLOCK], xs + "
                                                                 "y[base : base + BLOCK])"),
     6, 42, "'y[...]' is memory, not a value: load it into a fragment first (load(y[...], tv=...))"),
    ("arithmetic on memory and a constant", body("store(out[base : base + BLOCK], 2.0 * y[base : base + BLOCK])"),
     5, 43, "'y[...]' is memory, not a value: load it into a fragment first (load(y[...], tv=...))"),
    ("unknown statement function", body(LOAD, "stor(out[base : base + BLOCK], xs)"),
     6, 5, "unknown function 'stor'"),
    ("duplicate parameter",
     kernel("    grid(1)", "    block(32)", sig="kernel k(x: f32[N], x: f32[N]) -> out: f32[N]:"),
     1, 21, "duplicate parameter 'x'"),
    ("duplicate output", kernel("    grid(1)", "    block(32)",
                                sig="kernel k(x: f32[N]) -> (out: f32[N], out: f32[N]):"),
     1, 38, "duplicate parameter 'out'"),
    ("duplicate compile-time parameter", kernel("    grid(1)", "    block(32)",
                                                sig="kernel k<A=1, A=2>(x: f32[N]) -> out: f32[N]:"),
     1, 15, "duplicate compile-time parameter 'A'"),
    ("duplicate tagfn parameter", "tagfn f(a, a) = a\n" + kernel("    grid(1)", "    block(32)"),
     1, 12, "duplicate parameter 'a' of tag function 'f'"),
    # launch
    ("missing block()", kernel("    grid(1)"), 1, 8, "kernel 'k' has no block(...) statement"),
    ("missing grid()", kernel("    block(32)"), 1, 8, "kernel 'k' has no grid(...) statement"),
    ("block size not a multiple of 32", kernel("    grid(1)", "    block(100)"),
     3, 11, "block size must be a multiple of 32 between 32 and 1024, got 100"),
    ("block() inside a loop", body("for i in range(2):", "    block(256)"),
     6, 9, "block(...) belongs at the top level of the kernel, not inside a loop or if"),
    ("grid() per thread", kernel("    grid(thread_id)", "    block(32)"),
     2, 10, "a grid extent must be an integer expression of sizes and constants"),
    # dtypes and elementwise
    ("dtype mismatch in elementwise op", body(LOAD, "ys = cast(xs, bf16)", "zs = xs + ys"),
     7, 10, "operands have different dtypes (f32 and bf16); cast one with cast(x, f32)"),
    ("values per thread mismatch",
     body(LOAD, "ys = load(x[base : base + 512], tv=(256, 2):(2, 1))", "zs = xs * ys"),
     7, 10, "fragments have different shapes: 4 and 2 values per thread"),
    ("cast to a non-dtype name", body(LOAD, "ys = cast(xs, f31)"),
     6, 19, "cast()'s second argument must be a dtype (f64, f32, f16, bf16, i64, i32, u32, i8, u8), "
            "got 'f31'"),
    ("cast to a number", body(LOAD, "ys = cast(xs, 3)"),
     6, 19, "cast()'s second argument is a dtype such as bf16"),
    ("exp of an integer fragment", body("a = zeros(i32[16], tv=(256, 1):(0, 0))", "b = exp(a)"),
     6, 13, "exp() needs a floating-point fragment, got i32"),
    ("'/' on integers", body("q = base / 2"), 5, 9, "'/' is floating-point division; use '//' for integers"),
    ("constant division by zero", body("q = BLOCK // 0"),
     5, 9, "division by zero in a constant expression (1024 // 0)"),
    ("constant shift overflow", body("q = 1 << 64"),
     5, 9, "shift by 64 in a constant expression overflows 64 bits"),
    ("literal overflow", body("q = 9223372036854775808"),
     5, 9, "integer literal 9223372036854775808 does not fit in 64 bits"),
    ("literal with leading zeros", body("q = 0123"),
     5, 9, "invalid integer literal '0123' (leading zeros are not allowed)"),
    ("float scalar assigned", body("q = 1.5"),
     5, 9, "floating-point scalars cannot be assigned; use them inline"),
    # stores and views
    ("store of a fragment whose tile differs from the view's",
     body(LOAD, "store(out[base : base + 512], xs, mask=True)"),
     6, 35, "fragment tile [1024] does not match the view's tile [512]"),
    ("store of another dtype", body(LOAD, "store(out[base : base + BLOCK], cast(xs, f16), mask=True)"),
     6, 37, "cannot store a f16 fragment into f32 'out'; cast it first"),
    ("write to an input tensor", body(LOAD, "store(x[base : base + BLOCK], xs, mask=True)"),
     6, 11, "cannot write to input tensor 'x'"),
    ("slice with a non-constant extent", body("xs = load(x[base : 2 * base], tv=(256, 4):(4, 1), mask=True)"),
     5, 17, "a slice must have a constant extent (write it as start : start + N)"),
    ("slice with a negative extent", body("xs = load(x[base + 4 : base], tv=(256, 4):(4, 1), mask=True)"),
     5, 17, "a slice must have a positive extent, got -4"),
    ("wrong number of indices",
     body("xs = load(x[base : base + BLOCK, 0 : 4], tv=(256, 4):(4, 1), mask=True)"),
     5, 17, "'x' has 1 dimension but 2 were indexed"),
    ("unsliced symbolic tensor", body("xs = load(x, tv=(256, 4):(4, 1))"),
     5, 15, "tensor 'x' must be sliced to a constant-shaped tile, e.g. x[i0 : i0 + 128]"),
    ("fragment indexed", body(LOAD, "q = xs[0]"),
     6, 9, "fragments cannot be indexed; 'xs' lives in registers across threads"),
    ("mask on a shared view", body("s = shared(f32[1024])", "a = load(s, tv=(256, 4):(4, 1), mask=True)"),
     6, 37, "mask= applies to global tensors; shared tiles have constant shapes"),
    # thread-value layouts
    ("tv layout whose thread count differs from block()",
     body("xs = load(x[base : base + BLOCK], tv=(128, 8):(8, 1), mask=True)"),
     5, 42, "tv layout (128,8):(8,1) spans 128 threads but the block has 256"),
    ("tv layout that reaches outside the tile",
     body("xs = load(x[base : base + BLOCK], tv=(256, 4):(4, 2), mask=True)"),
     5, 42, "tv layout (256,4):(4,2) maps thread 255, value 3 to tile element 1026, outside the [1024] tile "
            "(1024 elements)"),
    ("tv layout with three modes",
     body("xs = load(x[base : base + BLOCK], tv=(256, 2, 2):(4, 2, 1), mask=True)"),
     5, 42, "a thread-value layout has two modes (threads, values); (256,2,2):(4,2,1) has 3"),
    ("tv layout with too many values per thread", body("xs = zeros(f32[16], tv=(256, 100000000):(0, 0))"),
     5, 28, "tv layout (256,100000000):(0,0) gives each thread 100000000 values; a fragment holds at most "
            "4096 per thread"),
    # shared memory
    ("shared layout whose shape differs from the allocation",
     body("s = shared(f32[32, 32], layout=(32, 16):(16, 1))"),
     5, 36, "layout (32,16):(16,1) has shape (32, 16) but the allocation is [32, 32]"),
    ("shared layout with a negative stride", body("s = shared(f32[32, 32], layout=(32, 32):(-32, 1))"),
     5, 36, "layout (32,32):(-32,1) has a negative stride: shared offsets must be non-negative"),
    ("shared allocation too large", body("s = shared(f32[256, 256])"),
     5, 9, "shared allocation of 262144 bytes exceeds the 227 KB a Hopper block can use"),
    ("swizzle that reads the bits it writes",
     body("s = shared(f32[8, 64], layout=Swizzle(3, 3, 2) o (8, 64):(64, 1))"),
     5, 35, "Swizzle(3, 3, 2) needs |S| >= B, or the xor reads the bits it writes"),
    ("'o' on an integer", body("l = 3 o (8, 64):(64, 1)"), 5, 9, "'o' composes layouts and swizzles"),
    # mma, and what comes with the tensor-core support
    ("mma atom that does not take the dtype",
     body("a = zeros(f32[4, 4], tv=(32, 4):(0, 1))", "b = zeros(f32[4, 4], tv=(32, 4):(0, 4))",
          "c = zeros(f16[4, 4], tv=(32, 1):(0, 0))", "c = mma(a, b, c, atom=fma)", head=W32),
     7, 27, "mma atom fma does not take f32 operands with a f16 accumulator (it takes f32->f32, f64->f64, "
            "f16->f32, bf16->f32)"),
    ("unknown mma atom",
     body("a = zeros(f32[16, 16], tv=(32, 8):(8, 1))", "c = mma(a, a, a, atom=m16n8k32)", head=W32),
     5, 27, "unknown mma atom 'm16n8k32'; known: fma, m16n8k16, m16n8k8"),
    ("tensor-core mma atom m16n8k16 with a foreign accumulator layout",
     body("a = zeros(f16[16, 16], tv=(32, 8):(8, 1))", "b = zeros(f16[16, 8], tv=(32, 4):(4, 1))",
          "c = zeros(f32[16, 8], tv=(32, 4):(4, 1))", "c = mma(a, b, c, atom=m16n8k16)", head=W32),
     7, 9, "mma atom m16n8k16: c values 0..3 of warp 0 are not the m16n8k16 accumulator layout (lane 0 value 2 "
           "holds c[0, 2], the atom puts c[8, 0] there)"),
    ("tensor-core mma atom m16n8k8 with a foreign accumulator layout",
     body("a = zeros(f16[16, 8], tv=(32, 4):(4, 1))", "b = zeros(f16[8, 8], tv=(32, 2):(2, 1))",
          "c = zeros(f32[16, 8], tv=(32, 4):(4, 1))", "c = mma(a, b, c, atom=m16n8k8)", head=W32),
     7, 9, "mma atom m16n8k8: c values 0..3 of warp 0 are not the m16n8k8 accumulator layout (lane 0 value 2 "
           "holds c[0, 2], the atom puts c[8, 0] there)"),
    ("mma operand checked before the atom is refused",
     body("a = zeros(f16[16, 16], tv=(32, 8):(8, 1))", "c = mma(a, 3, a, atom=m16n8k16)", head=W32),
     5, 16, "mma() operands must be fragments"),
    ("mma shape mismatch",
     body("a = zeros(f32[16, 16], tv=(32, 8):(8, 1))", "b = zeros(f32[8, 8], tv=(32, 2):(2, 1))",
          "c = zeros(f32[16, 8], tv=(32, 4):(4, 1))", "c = mma(a, b, c)", head=W32),
     7, 9, "mma shapes do not match: a [16, 16], b [8, 8], c [16, 8] (need a [M, K], b [K, N], c [M, N])"),
    ("SIMT mma where a thread lacks an a value",
     body("a = zeros(f32[4, 4], tv=(32, 1):(0, 0))", "b = zeros(f32[4, 4], tv=(32, 4):(0, 4))",
          "c = zeros(f32[4, 4], tv=(32, 1):(0, 0))", "c = mma(a, b, c)", head=W32),
     7, 9, "thread 0 holds c[0, 0] but not a[0, 1]: with atom=fma every thread must hold the rows of a and "
           "columns of b its c values need"),
    ("SIMT mma where a thread lacks a b value",
     body("a = zeros(f32[4, 4], tv=(32, 4):(0, 1))", "b = zeros(f32[4, 4], tv=(32, 1):(0, 0))",
          "c = zeros(f32[4, 4], tv=(32, 1):(0, 0))", "c = mma(a, b, c)", head=W32),
     7, 9, "thread 0 holds c[0, 0] but not b[1, 0]: with atom=fma every thread must hold the rows of a and "
           "columns of b its c values need"),
    ("ldmatrix without its row addresses", body("s = shared(f16[16, 16])", "a = ldmatrix(s, x4)", head=W32),
     5, 9, "ldmatrix() needs rows=: a layout (threads, instructions) -> the tile element each row starts at"),
    ("ldmatrix on f32", body("s = shared(f32[16, 16])", "a = ldmatrix(s, x4, rows=(32, 1):(8, 0), trans=True)",
                             head=W32),
     5, 18, "ldmatrix moves 16-bit elements; 's' holds f32"),
    ("ldmatrix's arguments are checked first", body("s = shared(f16[16, 16])", "a = ldmatrix(s)", head=W32),
     5, 9, "ldmatrix() takes 2 positional arguments, got 1"),
    ("ldmatrix's keywords are checked first",
     body("s = shared(f16[16, 16])", "a = ldmatrix(s, x4, transposed=True)", head=W32),
     5, 25, "ldmatrix() got an unexpected keyword 'transposed' (allowed: rows, trans)"),
    # async copies
    ("copy_async with 12-byte vectors",
     body("s = shared(f32[1024])", "copy_async(s, x[base : base + BLOCK], tv=(256, 4):(4, 1), vec=3)"),
     6, 67, "cp.async copies 4, 8 or 16 bytes; vec=3 of f32 is 12 bytes"),
    ("copy_async with 2-byte vectors",
     body("s = shared(f16[1024])", "copy_async(s, x[0 : 1024], tv=(32, 32):(32, 1), vec=1)", head=W32),
     5, 57, "cp.async copies 4, 8 or 16 bytes; vec=1 of f16 is 2 bytes"),
    ("copy_async from shared",
     body("s = shared(f32[1024])", "t = shared(f32[1024])", "copy_async(s, t, tv=(256, 4):(4, 1))"),
     7, 19, "copy_async copies from global memory: the second argument must be a global view"),
    ("copy_async into global",
     body("s = shared(f32[1024])", "copy_async(out[base : base + BLOCK], s, tv=(256, 4):(4, 1))"),
     6, 16, "copy_async copies into shared memory: the first argument must be a shared view"),
    # reductions and shuffles
    ("reduce axis out of range", body(LOAD, "r = reduce_sum(xs, axis=1)"),
     6, 29, "axis 1 is out of range for a rank-1 tile"),
    ("warp reduce without lanes", body(LOAD, "r = reduce_max(xs, axis=0, scope=warp)"),
     6, 9, "a warp reduction needs lanes=: the lane bits to combine, e.g. 0b11111"),
    ("lanes out of range", body(LOAD, "r = reduce_sum(xs, axis=0, scope=warp, lanes=32)"),
     6, 50, "lanes= is a mask of lane bits in 1..31, got 32"),
    ("lanes on a thread reduction", body(LOAD, "r = reduce_sum(xs, axis=0, lanes=1)"),
     6, 32, "lanes= applies to scope=warp"),
    ("block-scope reduction", body(LOAD, "r = reduce_sum(xs, axis=0, scope=block)"),
     6, 38, "scope= is thread or warp (block reductions go through shared memory)"),
    ("shuffle lane out of range", body(LOAD, "r = shfl_xor(xs, 32)"),
     6, 22, "lane argument 32 is outside 0..31"),
    # tags and assertions
    ("tag on an unknown tensor", body("tag z[i] = (i,)"), 5, 9, "'tag' names unknown tensor 'z'"),
    ("tag arity mismatch", body("tag x[i, j] = (i, j)"),
     5, 11, "tensor 'x' has rank 1 but the tag binds 2 index variables"),
    ("tag given twice", body("tag x[i] = (i,)", "tag x[j] = (j,)"), 6, 9, "tensor 'x' is tagged twice"),
    ("once on an input", body("tag x[i] = (i,) once"), 5, 21, "'once' applies to outputs only"),
    ("tag index variable repeated", kernel("    grid(1)", "    block(32)", "    tag x[i, i] = (i,)",
                                           sig="kernel k(x: f32[M, N]) -> out: f32[N]:"),
     4, 14, "index variable 'i' appears twice in the tag of 'x'"),
    ("tag(...) outside assert", body(LOAD, "q = tag(xs)[0]"),
     6, 9, "tag(...) can only be used in an assertion"),
    ("tag(...) without a component", body(LOAD, "assert tag(xs) == 0"),
     6, 12, "tag(x) needs a component, tag(x)[k], and can only be used in an assertion"),
    ("tag(...) of a tensor", body("assert tag(x)[0] == 0"),
     5, 16, "tag(...) takes a fragment; 'x' is not one"),
    ("tag function arity",
     "tagfn f(a) = a\n" + kernel("    grid(1)", "    block(32)", "    assert f(1, 2) == 1"),
     5, 12, "tag function 'f' takes 1 argument(s)"),
    ("requires on a per-thread value", body("requires thread_id < 4"),
     5, 14, "'requires' takes a condition on sizes and constants"),
    # variables and control flow
    ("reassigning a fragment with another shape", body(LOAD, "xs = zeros(f32[8], tv=(256, 1):(0, 0))"),
     6, 5, "'xs' was f32[1024] with 4 values per thread; cannot reassign it to f32[8] with 1"),
    ("reassigning a fragment with an integer", body(LOAD, "xs = 3"),
     6, 5, "'xs' changes kind on reassignment"),
    ("loop variable reassigned", body("for i in range(4):", "    i = 3"),
     6, 9, "cannot assign to loop variable 'i'"),
    ("loop variable shadows a name", body("for base in range(4):", "    pass"),
     5, 9, "loop variable 'base' shadows an existing name"),
    ("non-uniform loop bound", body("for i in range(thread_id):", "    pass"),
     5, 20, "loop bounds must be the same for every thread of a block"),
    ("loop bound assigned under a per-thread condition",
     body("n = 4", "if lane_id == 0:", "    n = 8", "for i in range(n):", "    pass"),
     8, 20, "loop bounds must be the same for every thread of a block"),
    ("loop step zero", body("for i in range(0, 8, 0):", "    pass"),
     5, 26, "the loop step must be positive, got 0"),
    ("unused result", body(LOAD, "exp2(xs)"), 6, 5, "the result of exp2(...) is unused"),
    ("expression statement with no effect", body("base"),
     5, 5, "this expression has no effect; expected a call such as store(...)"),
    ("barrier with an argument", body("barrier(1)"), 5, 5, "barrier() takes no arguments, got 1"),
    # arguments
    ("positional after keyword", body("xs = load(tv=(256, 4):(4, 1), x[base : base + BLOCK])"),
     5, 35, "positional argument after a keyword argument"),
    ("keyword given twice", body("xs = load(x[base : base + BLOCK], tv=(256, 4):(4, 1), tv=(256, 4):(4, 1))"),
     5, 59, "keyword 'tv' given twice"),
    ("unknown keyword", body("xs = load(x[base : base + BLOCK], tv=(256, 4):(4, 1), masked=True)"),
     5, 59, "load() got an unexpected keyword 'masked' (allowed: tv, mask, other, vec)"),
]


@pytest.mark.parametrize("src, line, col, message", [c[1:] for c in SEMANTIC], ids=[c[0] for c in SEMANTIC])
def test_semantic_error(src, line, col, message):
    err = error_of(src)
    assert isinstance(err, ArgusTypeError)
    assert at(err) == (line, col, message)


def test_unknown_name_suggests_the_closest_name():
    err = error_of(body("xs = load(x[bse : bse + BLOCK], tv=(256, 4):(4, 1), mask=True)"))
    assert err.note == "did you mean 'base'?"
    err = error_of(body(LOAD, "ys = xss + xs"))
    assert at(err) == (6, 10, "unknown name 'xss'") and err.note == "did you mean 'xs'?"
    assert error_of(body("q = zzzzzz")).note is None


def test_unknown_function_suggests_a_builtin():
    err = error_of(body("xs = lod(x[base : base + BLOCK], tv=(256, 4):(4, 1))"))
    assert err.note == "did you mean 'load'?"
    assert error_of(body(LOAD, "stor(out[base : base + BLOCK], xs)")).note == "did you mean 'store'?"
    assert error_of(body(LOAD, "r = reduce_summ(xs, axis=0)")).note == "did you mean 'reduce_sum'?"


def test_cast_to_misspelled_dtype_suggests_one():
    assert error_of(body(LOAD, "ys = cast(xs, f31)")).note == "did you mean 'f32'?"


def test_write_to_input_explains_outputs():
    err = error_of(body(LOAD, "store(x[base : base + BLOCK], xs, mask=True)"))
    assert err.note == "outputs are declared after '->' in the kernel signature"
    assert "note: outputs are declared after '->'" in format_error(err)


def test_unknown_compile_time_override():
    err = error_of(body(LOAD), consts={"BLOK": 2048})
    assert at(err) == (1, 8, "kernel 'k' has no compile-time parameter 'BLOK' (it has: BLOCK)")


def test_override_that_breaks_a_layout_points_at_the_layout():
    src = (SPECS / "vecadd.arg").read_text()
    err = error_of(src, consts={"BLOCK": 100})  # BLOCK // 256 == 0 values per thread
    assert (err.span.line, err.span.col) == (10, 12)  # the layout bound to RUNS
    assert err.message == "bad layout: shape (256,0) has non-positive extents [0]"


def test_no_kernel_in_file():
    assert at(error_of("# nothing here\n")) == (1, 1, "no kernel in this file")
    assert at(error_of("")) == (1, 1, "no kernel in this file")


def test_unknown_kernel_name():
    with pytest.raises(ArgusError, match=r"no kernel named 'nope' \(this file has: k\)"):
        compile_source(body(LOAD), "t.arg", kernel="nope")


def test_semantic_error_renders_caret_under_the_name():
    err = error_of(body("xs = load(x[bse : bse + BLOCK], tv=(256, 4):(4, 1), mask=True)"))
    text = format_error(err).splitlines()
    assert text[0] == "t.arg:5:17: error: unknown name 'bse'"
    gutter = text[1].index("|") + 2
    assert text[2][gutter + 16:] == "^^^"
    assert text[3] == "  note: did you mean 'base'?"


# -- inputs that used to crash the front end with a Python exception ----------------------------------

REGRESSIONS = [
    # tagfn(...) in an expression reached the builder's tag-function method with the wrong arguments
    ("tagfn called as a function", body("q = tagfn(1)"), 5, 9, "unknown function 'tagfn'"),
    # int('0b' mutated to '0...', 0) raised ValueError
    ("leading zeros", body("q = 011111"),
     5, 9, "invalid integer literal '011111' (leading zeros are not allowed)"),
    ("empty hex literal", body("q = 0x_"), 5, 9, "invalid integer literal '0x_'"),
    # huge literals overflowed numpy (OverflowError) or int -> float conversion
    ("huge stride", body("a = zeros(f32[16], tv=(256, 4):(99999999999999999999, 1))"),
     5, 37, "integer literal 99999999999999999999 does not fit in 64 bits"),
    ("constant product overflow", body("q = 4611686018427387904 * 4"),
     5, 9, "constant expression (4611686018427387904 * 4) overflows 64 bits"),
]


@pytest.mark.parametrize("src, line, col, message", [c[1:] for c in REGRESSIONS],
                         ids=[c[0] for c in REGRESSIONS])
def test_former_crash(src, line, col, message):
    assert at(error_of(src)) == (line, col, message)


def test_folding_does_not_compute_a_huge_shift_for_another_operator():
    # fold() used to evaluate every operator eagerly, so '+' computed 2 << 10**18 as well
    k = compile_source(body("q = 2 + 1000000000000000000", "r = base + q"), "t.arg")
    assert k.body[1].value.b.value == 1000000000000000002


def test_tagfn_with_a_fragment_is_an_argus_error():
    with pytest.raises(ArgusError):
        compile_source(body("tagfn f(a) = zeros(f32[16], tv=(256, 1):(0, 0))"), "t.arg")


# -- no bad input escapes as a Python exception ----------------------------------------------------------

# the specs, plus one kernel that uses the constructs they do not (if/elif/else, tag functions, async
# copies, swizzles, named layouts and shapes, SIMT mma on f16, shuffles, scalar parameters)
RICH = """\
tagfn half(t) = t // 2
kernel rich<BM=16, BK=16>(A: f16[M, K], x: f32[N], alpha: f32) -> (out: f32[N], C: f32[M, 8]):
    requires K % 16 == 0 and M > 0
    grid(cdiv(N, 256), 1)
    block(32)
    tagfn dbl(a) = 2 * a
    tag x[i] = (i,)
    tag out[i] = (i,) once
    base = block_id.x * 256
    EIGHT = (32, 8):(8, 1)
    TILE = (16, 16)
    sA = shared(f16[TILE], layout=Swizzle(1, 3, 3) o TILE:(16, 1))
    sx = shared(f32[256])
    copy_async(sx, x[base : base + 256], tv=EIGHT, mask=True, vec=4)
    commit()
    wait(0)
    barrier()
    xs = load(sx, tv=EIGHT)
    assert tag(xs)[0] == base + 8 * thread_id + coord(xs)[0] - 8 * thread_id
    if lane_id < 16:
        ys = xs * alpha
    elif lane_id == 31:
        ys = max(xs, 0.0)
    else:
        ys = exp2(-xs)
    m = reduce_max(ys, axis=0, scope=warp, lanes=0b11111)
    z = shfl_xor(ys, 1)
    store(out[base : base + 256], z + 0.0 * m, mask=True)
    acc = zeros(f32[16, 8], tv=(32, 4):(4, 1))
    for k0 in range(0, K, 16, unroll=2):
        copy_async(sA, A[0 : 16, k0 : k0 + 16], tv=EIGHT, vec=8)
        commit()
        wait(0)
        barrier()
        a = load(sA, tv=((2, 16), 16):((0, 16), 1))
        b = load(sA[0 : 16, 0 : 8], tv=((2, 16), (4, 16)):((4, 0), (1, 8)))
        acc = mma(a, b, acc, atom=fma)
        barrier()
    store(C[0 : 16, 0 : 8], acc, mask=True)
"""
SPEC_TEXTS = {p.name: p.read_text() for p in sorted(SPECS.glob("*.arg"))} | {"rich": RICH}
TOKEN = re.compile(r"\s+|\w+|//|->|<<|>>|==|!=|<=|>=|.", re.S)
VOCABULARY = """
    0 1 -1 32 0.5 ( ) [ ] , : o = x4 warp f16 i32 tag coord assert tv mask True inf mma transpose reshape
    Swizzle cast ldmatrix m16n8k16 fma EIGHT TILE copy_async wait barrier shfl_xor reduce_max thread_id lane_id
    block_id cdiv if else
    for range tagfn once pass * / // % << - > zeros shared load store axis scope lanes
""".split() + ["\n", "\n    ", "\n        "]

MUTATION = st.tuples(st.sampled_from(["del_char", "dup_char", "swap_char", "del_tok", "dup_tok", "swap_tok",
                                      "ins_tok", "rep_tok"]),
                     st.integers(0, 1 << 16), st.sampled_from(VOCABULARY))


def mutate(text: str, kind: str, where: int, word: str) -> str:
    if kind.endswith("_char"):
        i = where % (len(text) - 1)
        if kind == "del_char":
            return text[:i] + text[i + 1:]
        if kind == "dup_char":
            return text[:i] + text[i] + text[i:]
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    toks = TOKEN.findall(text)
    i = where % (len(toks) - 1)
    if kind == "del_tok":
        del toks[i]
    elif kind == "dup_tok":
        toks.insert(i, toks[i])
    elif kind == "swap_tok":
        toks[i], toks[i + 1] = toks[i + 1], toks[i]
    elif kind == "ins_tok":
        toks.insert(i, word)
    else:
        toks[i] = word
    return "".join(toks)


def test_fuzz_seeds_compile():
    for name, text in SPEC_TEXTS.items():
        assert compile_source(text, name).body


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SPEC_TEXTS)), mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_mutated_specs_give_argus_errors_only(name, mutations):
    text = SPEC_TEXTS[name]
    for m in mutations:
        text = mutate(text, *m)
    try:
        compile_source(text, "fuzz.arg")
    except ArgusError as e:
        # a usable position: a real line of the file (or line 1 of an empty one), a positive column
        assert e.span is not None and e.span.file == "fuzz.arg"
        assert 1 <= e.span.line <= max(1, len(text.splitlines())) and e.span.col >= 1
        assert e.message and "Traceback" not in e.message


# -- vector widths, layout-preserving reassignment, policies ----------------------------------------------

def test_copy_async_vec_must_be_contiguous_in_a_row():
    src = body("s = shared(f32[1024])", "copy_async(s, x[base : base + BLOCK], tv=(256, 4):(1, 256), vec=4)")
    assert at(error_of(src)) == (6, 69, "vec=4: the tv layout (256,4):(1,256) does not give each thread runs of 4 "
                                        "consecutive elements of one tile row")


def test_load_vec_must_be_contiguous_in_a_row():
    src = body("xs = load(x[base : base + BLOCK], tv=(256, 4):(1, 256), vec=2)")
    assert at(error_of(src)) == (5, 65, "vec=2: the tv layout (256,4):(1,256) does not give each thread runs of 2 "
                                        "consecutive elements of one tile row")


def test_reassignment_with_another_tv_layout():
    src = body(LOAD, "xs = load(x[base : base + BLOCK], tv=(256, 4):(1, 256), mask=True)")
    err = error_of(src)
    assert at(err) == (6, 5, "'xs' was distributed as <(256,4):(4,1)>; cannot reassign it with another "
                             "thread-value layout <(256,4):(1,256)>")
    assert err.note == "give the new value another name"


def test_unknown_policy():
    src = body("policy(unroll_all=2)", LOAD, STORE)
    assert at(error_of(src)) == (5, 12, "policy() got an unexpected keyword 'unroll_all' (allowed: min_blocks_per_sm, "
                                        "maxnreg, prefetch)")


def test_policy_out_of_range():
    src = body("policy(maxnreg=400)", LOAD, STORE)
    assert at(error_of(src)) == (5, 20, "policy maxnreg must be between 1 and 255, got 400")


def test_missing_trailing_dimensions_of_a_global_tensor():
    src = kernel("    grid(1)", "    block(32)", "    v = load(x[0], tv=(32, 1):(1, 0))",
                 sig="kernel k(x: f32[M, N]) -> out: f32[N]:")
    assert at(error_of(src))[2] == "'x' has 2 dimensions but 1 was indexed"


def test_shared_index_leaves_the_remaining_dimensions_whole():
    from argus_verify import ir

    src = body("s = shared(f32[2, 4, 256])", LOAD, "store(s[1, 2], reshape(xs, 4, 256)[0], where=False)")
    # s[1, 2] is a [256] view; the reshape's tile [4, 256] does not fit it (checked at the store)
    assert "does not match the view's tile [256]" in error_of(src.replace("[0]", "")).message
    ok = body("s = shared(f32[4, 1024])", LOAD, "store(s[3], xs)", "barrier()")
    k = compile_source(ok, "t.arg")
    (store,) = [st for st in ir.walk_stmts(k.body) if isinstance(st, ir.Store)]
    assert store.dst.tile == (1024,) and isinstance(store.dst.index[0], ir.Index)
