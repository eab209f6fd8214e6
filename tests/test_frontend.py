"""Good input to the front end: the specs compile, IR statements carry the right source positions,
compile-time overrides reach layouts and tiles, and the syntax corners (layouts, swizzles, `o` as a
name, multi-line calls, comments, elif/else, tag functions) parse to what they mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import ir
from argus_verify.frontend import compile_file, compile_source, parse
from argus_verify.layout import ComposedLayout, Layout, Swizzle, functionally_equal

SPECS = Path(__file__).resolve().parent.parent / "specs"
SPEC_FILES = sorted(SPECS.glob("*.arg"))

HEAD = """\
kernel k<BLOCK=1024>(x: f32[N], y: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(256)
    base = block_id.x * BLOCK
"""


def body(*lines: str) -> str:
    return HEAD + "".join(f"    {ln}\n" for ln in lines)


def stmts(k: ir.Kernel, kind) -> list:
    return [s for s in ir.walk_stmts(k.body) if isinstance(s, kind)]


def assign(k: ir.Kernel, name: str) -> ir.Assign:
    found = [s for s in stmts(k, ir.Assign) if s.name == name]
    assert found, f"no assignment to {name}"
    return found[-1]


# -- the specs ----------------------------------------------------------------------------------------

def test_there_are_specs():
    names = {p.stem for p in SPEC_FILES}
    assert names >= {"vecadd", "gemm_simt", "reduce_sum", "row_softmax", "transpose_smem"}


@pytest.mark.parametrize("path", SPEC_FILES, ids=[p.stem for p in SPEC_FILES])
def test_every_spec_compiles(path):
    k = compile_file(path)
    assert k.name == path.stem
    assert k.source_file == str(path)
    assert k.block % 32 == 0 and len(k.grid) == 3
    assert k.body and k.outputs
    # every statement points into the spec file at a real line
    n_lines = len(path.read_text().splitlines())
    for s in ir.walk_stmts(k.body):
        assert s.span.file == str(path) and 1 <= s.span.line <= n_lines and s.span.col >= 1


def test_vecadd_statement_spans():
    k = compile_file(SPECS / "vecadd.arg")
    assert (k.span.line, k.span.col) == (3, 8)  # the kernel's name
    let = k.body[0]
    assert isinstance(let, ir.Let) and let.name == "base"
    assert (let.span.line, let.span.col, let.span.end_col) == (11, 5, 30)
    assert [(s.name, s.span.line) for s in stmts(k, ir.Assign) if not s.name.startswith("_")] == [
        ("xs", 12), ("ys", 13)]
    (store,) = stmts(k, ir.Store)
    assert (store.span.line, store.span.col) == (14, 5) and store.dst.base == "out" and store.mask
    # the temporary for `xs + ys` is the expression inside the store, at its column
    add = assign(k, store.value)
    assert (add.span.line, add.span.col) == (14, 37)
    tags = [(t.tensor, t.span.line, t.once) for t in k.tags]
    assert tags == [("x", 6, False), ("y", 7, False), ("out", 8, True)]


def test_gemm_statement_spans():
    k = compile_file(SPECS / "gemm_simt.arg")
    (loop,) = stmts(k, ir.For)
    assert loop.var == "kt" and (loop.span.line, loop.span.col) == (19, 5)
    inner = [(type(s).__name__, s.span.line) for s in loop.body]
    assert inner == [("Let", 20), ("Assign", 23), ("Assign", 26), ("Store", 27), ("Store", 28),
                     ("Barrier", 29), ("Assign", 30), ("Assign", 31), ("Assert", 32), ("Assign", 33),
                     ("Barrier", 34)]
    # inside the loop, statements are indented by 8
    assert all(s.span.col == 9 for s in loop.body)
    (an_assert,) = stmts(k, ir.Assert)
    assert an_assert.source == "assert tag(a)[1] == kt * BK + coord(a)[1]"
    assert isinstance(assign(k, "acc").op, ir.Mma) and assign(k, "acc").span.line == 33
    final = k.body[-1]
    assert isinstance(final, ir.Store) and final.span.line == 35 and final.dst.base == "C"
    assert [(a.name, a.span.line) for a in stmts(k, ir.SharedAlloc)] == [("sA", 15), ("sB", 16)]


def test_reduce_sum_structure():
    k = compile_file(SPECS / "reduce_sum.arg")
    reduces = [(s.span.line, s.op.scope, s.op.lanes) for s in stmts(k, ir.Assign)
               if isinstance(s.op, ir.Reduce)]
    assert reduces == [(14, "thread", 0), (15, "warp", 0b11111), (20, "thread", 0)]
    stores = stmts(k, ir.Store)
    assert [s.span.line for s in stores] == [17, 21]
    assert all(s.where is not None for s in stores)


# -- compile-time overrides --------------------------------------------------------------------------------

def test_vecadd_default_has_4_values_per_thread():
    k = compile_file(SPECS / "vecadd.arg")
    xs = assign(k, "xs")
    assert dict(k.consts) == {"BLOCK": 1024}
    assert xs.type.values == 4 and xs.type.tile == (1024,) and xs.type.threads == 256


def test_vecadd_block_2048_gives_8_values_per_thread():
    k = compile_file(SPECS / "vecadd.arg", {"BLOCK": 2048})
    xs = assign(k, "xs")
    assert dict(k.consts) == {"BLOCK": 2048}
    assert xs.type.values == 8 and xs.type.tile == (2048,)
    assert xs.op.tv.layout == Layout((256, 8), (8, 1))
    assert xs.op.src.index[0].extent == 2048
    # the grid is cdiv(N, 2048)
    assert k.grid[0] == ir.IBin("cdiv", ir.IVar("N"), ir.IConst(2048))


def test_row_softmax_overrides_change_block_and_tiles():
    k = compile_file(SPECS / "row_softmax.arg", {"COLS": 512, "ROWS": 4})
    assert k.block == 128
    xs = assign(k, "xs")
    assert xs.type.tile == (4, 512) and xs.type.values == 16 and xs.type.threads == 128


def test_gemm_overrides_change_the_micro_tile():
    k = compile_file(SPECS / "gemm_simt.arg", {"BM": 128, "TM": 8})
    acc = assign(k, "acc")
    assert acc.type.tile == (128, 64) and acc.type.values == 32
    assert [a.shape for a in stmts(k, ir.SharedAlloc)] == [(128, 16), (16, 64)]


def test_reduce_sum_chunk_override():
    k = compile_file(SPECS / "reduce_sum.arg", {"CHUNK": 2048})
    assert assign(k, "xs").type.values == 8
    (loop,) = stmts(k, ir.For)
    assert loop.step == 2048


def test_overrides_accept_the_kernel_name():
    src = body("xs = load(x[base : base + BLOCK], tv=(256, BLOCK // 256):(BLOCK // 256, 1), mask=True)")
    src += "kernel other<T=4>(x: f32[N]) -> out: f32[N]:\n    grid(N)\n    block(32)\n"
    assert compile_source(src, "t.arg", {"T": 8}, kernel="other").consts == (("T", 8),)
    assert compile_source(src, "t.arg").name == "k"


# -- layouts and swizzles ----------------------------------------------------------------------------------

def test_swizzle_composed_with_a_layout():
    k = compile_source(body("s = shared(f16[8, 64], layout=Swizzle(3, 3, 3) o (8, 64):(64, 1))"), "t.arg")
    (alloc,) = stmts(k, ir.SharedAlloc)
    assert isinstance(alloc.layout, ComposedLayout)
    assert alloc.layout.outer == Swizzle(3, 3, 3)
    assert alloc.layout.inner == Layout((8, 64), (64, 1))
    # Swizzle<3,3,3>: bits 6..8 (the row) xor-ed into bits 3..5 (the 8-element column chunk)
    assert alloc.layout((1, 0)) == 64 + 8
    assert alloc.layout((7, 9)) == 7 * 64 + (9 ^ (7 << 3))


def test_nested_layouts_and_builtin_layout_functions():
    k = compile_source(body(
        "a = zeros(f32[16, 64], tv=((32, 8), (4, 1)):((4, 128), (1, 0)))",
        "s = shared(f32[16, 64], layout=row_major(16, 64))",
        "t = shared(f32[16, 64], layout=col_major(16, 64))",
        "l = (16, 64):(64, 1)",
        "u = shared(f32[16, 64], layout=l)",
    ), "t.arg")
    a = assign(k, "a")
    assert a.type.coords.layout == Layout(((32, 8), (4, 1)), ((4, 128), (1, 0)))
    assert a.type.values == 4
    s, t, u = stmts(k, ir.SharedAlloc)
    assert s.layout == Layout((16, 64), (64, 1)) and functionally_equal(s.layout, u.layout)
    assert t.layout == Layout((16, 64), (1, 16))


def test_transpose_spec_swizzle():
    k = compile_file(SPECS / "transpose_smem.arg")
    (alloc,) = stmts(k, ir.SharedAlloc)
    assert alloc.layout.outer == Swizzle(5, 0, 5) and alloc.layout.inner == Layout((32, 32), (32, 1))
    # a column walk hits 32 different banks: offsets mod 32 are all distinct
    assert len({alloc.layout((i, 0)) % 32 for i in range(32)}) == 32


def test_o_is_still_a_variable_name():
    k = compile_source(body(
        "o = base + 16",
        "xs = load(x[o : o + 256], tv=(256, 1):(1, 0), mask=True)",
        "o = o * 2",
        "l = Swizzle(1, 2, 3) o (8, 8):(8, 1)",
        "s = shared(f32[8, 8], layout=l)",
    ), "t.arg")
    lets = [s for s in stmts(k, ir.Let) if s.name == "o"]
    assert len(lets) == 2
    assert assign(k, "xs").op.src.index[0].start == ir.IVar("o")
    (alloc,) = stmts(k, ir.SharedAlloc)
    assert alloc.layout.outer == Swizzle(1, 2, 3)


# -- syntax corners -----------------------------------------------------------------------------------------

def test_multiline_calls_inside_parentheses():
    k = compile_source(body(
        "xs = load(",
        "    x[base : base + BLOCK],     # the tile",
        "",
        "    tv=(256, 4):(4, 1),",
        "        mask=True,",
        ")",
        "store(out[base : base + BLOCK],",
        "      xs,",
        "      mask=True)",
    ), "t.arg")
    xs = assign(k, "xs")
    assert (xs.span.line, xs.span.end_line) == (5, 10)
    (store,) = stmts(k, ir.Store)
    assert (store.span.line, store.span.end_line) == (11, 13) and store.mask


def test_comments_anywhere():
    src = (
        "# a file comment\n"
        "\n"
        "kernel k(x: f32[N]) -> out: f32[N]:   # trailing comment on the header\n"
        "    # a comment line at the block's indentation\n"
        "    grid(cdiv(N, 256))\n"
        "# a comment at column 0 inside the block\n"
        "            # and one indented too far\n"
        "    block(256)\n"
        "    base = block_id.x * 256  # trailing\n"
        "    for i in range(2):\n"
        "        # inside the loop\n"
        "        pass\n"
        "    # after the loop\n"
        "    xs = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)\n"
        "    store(out[base : base + 256], xs, mask=True)\n"
        "# end\n"
    )
    k = compile_source(src, "t.arg")
    assert k.block == 256
    assert [(type(s).__name__, s.span.line) for s in k.body] == [
        ("Let", 9), ("For", 10), ("Assign", 14), ("Store", 15)]


def test_backslash_continuation():
    k = compile_source(body("q = base + \\", "        4"), "t.arg")
    (q,) = [s for s in stmts(k, ir.Let) if s.name == "q"]
    assert q.value == ir.IBin("+", ir.IVar("base"), ir.IConst(4))


def test_if_elif_else():
    k = compile_source(body(
        "xs = load(x[base : base + BLOCK], tv=(256, 4):(4, 1), mask=True)",
        "if lane_id == 0:",
        "    store(out[base : base + BLOCK], xs, mask=True)",
        "elif lane_id < 4:",
        "    ys = xs * 2.0",
        "    store(out[base : base + BLOCK], ys, mask=True)",
        "else:",
        "    pass",
    ), "t.arg")
    (outer,) = [s for s in k.body if isinstance(s, ir.If)]
    assert outer.span.line == 6 and len(outer.then) == 1
    assert outer.cond == ir.IBin("==", ir.ISpecial("lane_id"), ir.IConst(0))
    (elif_,) = outer.orelse
    assert isinstance(elif_, ir.If) and elif_.span.line == 8
    assert elif_.cond == ir.IBin("<", ir.ISpecial("lane_id"), ir.IConst(4))
    assert [type(s).__name__ for s in elif_.then] == ["Assign", "Store"]
    assert elif_.orelse == ()  # `else: pass`


def test_values_assigned_in_a_branch_stay_visible_after_it():
    k = compile_source(body(
        "n = 1",
        "if N > 4096:",
        "    n = 2",
        "for i in range(n):",  # uniform: the condition is the same for every thread
        "    pass",
    ), "t.arg")
    (loop,) = stmts(k, ir.For)
    assert loop.stop == ir.IVar("n")


def test_comparisons_and_shifts():
    # '>' closes the compile-time parameter list, and is a comparison everywhere else
    k = compile_source(
        "kernel k<A=2, B=(3 > 2)>(x: f32[N]) -> out: f32[N]:\n"
        "    requires N > 0 and N >= A and N != 3\n"
        "    grid(1)\n"
        "    block(32)\n"
        "    q = 1 << A\n"
        "    r = N >> 1\n"
        "    assert (q > 3) == (r < N)\n", "t.arg")
    assert dict(k.consts) == {"A": 2, "B": 1}
    assert k.requires[0] == ir.IBin("and", ir.IBin("and", ir.IBin(">", ir.IVar("N"), ir.IConst(0)),
                                                   ir.IBin(">=", ir.IVar("N"), ir.IConst(2))),
                                     ir.IBin("!=", ir.IVar("N"), ir.IConst(3)))
    # q is assigned once, to a constant: a compile-time value, folded where it is used
    lets = {s.name: s.value for s in stmts(k, ir.Let)}
    assert lets == {"r": ir.IBin(">>", ir.IVar("N"), ir.IConst(1))}
    (check,) = stmts(k, ir.Assert)
    assert check.cond == ir.IBin("==", ir.IConst(1), ir.IBin("<", ir.IVar("r"), ir.IVar("N")))


def test_integer_literals():
    k = compile_source(body("a = base + 0x10 + 0b101 + 1_000"), "t.arg")
    assert [s.value.b for s in stmts(k, ir.Let) if s.name == "a"] == [ir.IConst(1000)]
    k = compile_source(body("a = 0x10 + 0b101 + 1_000", "b = base + a"), "t.arg")
    assert [s.value.b for s in stmts(k, ir.Let) if s.name == "b"] == [ir.IConst(16 + 5 + 1000)]


def test_kernel_without_compile_time_parameters():
    # `const_params?` leaves no placeholder in the parse tree; the builder used to crash here
    k = compile_source("kernel plain(x: f32[N]) -> out: f32[N]:\n    grid(N)\n    block(32)\n", "t.arg")
    assert k.consts == () and k.sizes == ("N",)
    k = compile_source("kernel noin() -> out: f32[16]:\n    grid(1)\n    block(32)\n", "t.arg")
    assert k.inputs == () and [p.name for p in k.outputs] == ["out"]


def test_several_outputs_and_scalar_parameters():
    k = compile_source(
        "kernel k(x: f32[N], alpha: f32, n: i32) -> (a: f32[N], b: f32[N]):\n"
        "    grid(cdiv(N, 256), n)\n"
        "    block(256)\n"
        "    xs = load(x[block_id.x * 256 : block_id.x * 256 + 256], tv=(256, 1):(1, 0), mask=True)\n"
        "    store(a[block_id.x * 256 : block_id.x * 256 + 256], xs * alpha, mask=True)\n", "t.arg")
    assert [p.name for p in k.outputs] == ["a", "b"]
    scalars = [(p.name, p.dtype) for p in k.params if isinstance(p, ir.ScalarParam)]
    assert scalars == [("alpha", "f32"), ("n", "i32")]
    assert k.grid[1] == ir.IVar("n")


def test_tagfn_at_top_level_and_inside_a_kernel():
    src = (
        "tagfn row_of(t) = t // 4\n"
        "kernel k(x: f32[N]) -> out: f32[N]:\n"
        "    grid(cdiv(N, 256))\n"
        "    block(256)\n"
        "    tagfn twice(a, b) = 2 * a + b\n"
        "    tag x[i] = (row_of(i),)\n"
        "    base = block_id.x * 256\n"
        "    xs = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)\n"
        "    assert twice(tag(xs)[0], 0) == 2 * row_of(base + thread_id)\n"
    )
    k = compile_source(src, "t.arg")
    fns = {f.name: f for f in k.tagfns}
    assert set(fns) == {"row_of", "twice"}
    assert fns["row_of"].params == ("t",) and fns["row_of"].body == ir.IBin("//", ir.IVar("t"), ir.IConst(4))
    assert fns["row_of"].span.line == 1 and fns["twice"].span.line == 5
    assert fns["twice"].params == ("a", "b")
    assert k.tags[0].components == (ir.ICall("row_of", (ir.IVar("i"),)),)
    (a,) = stmts(k, ir.Assert)
    assert a.frags == ("xs",) and a.span.line == 9


def test_parse_keeps_positions():
    tree = parse("kernel k(x: f32[N]) -> out: f32[N]:\n    grid(1)\n    block(32)\n", "p.arg")
    (kern,) = [c for c in tree.children if c.data == "kernel"]
    assert (kern.meta.line, kern.meta.column) == (1, 1)


def test_async_copies_feed_a_simt_mma_in_an_unrolled_loop():
    # thread t holds row t // 2 of a, the four columns 4 (t % 2).. of b it needs, and c[t // 2, 4 (t % 2)..]
    k = compile_source(
        "kernel tc(A: f16[M, K]) -> C: f32[M, 8]:\n"
        "    grid(1)\n"
        "    block(32)\n"
        "    sA = shared(f16[16, 16], layout=Swizzle(1, 3, 3) o (16, 16):(16, 1))\n"
        "    acc = zeros(f32[16, 8], tv=(32, 4):(4, 1))\n"
        "    for k0 in range(0, K, 16, unroll=2):\n"
        "        copy_async(sA, A[0 : 16, k0 : k0 + 16], tv=(32, 8):(8, 1), vec=8)\n"
        "        commit()\n"
        "        wait(0)\n"
        "        barrier()\n"
        "        a = load(sA, tv=((2, 16), 16):((0, 16), 1))\n"
        "        b = load(sA[0 : 16, 0 : 8], tv=((2, 16), (4, 16)):((4, 0), (1, 8)))\n"
        "        acc = mma(a, b, acc)\n"
        "        barrier()\n"
        "    store(C[0 : 16, 0 : 8], acc, mask=True)\n", "t.arg")
    (loop,) = stmts(k, ir.For)
    assert loop.unroll == 2 and loop.step == 16
    kinds = [type(s).__name__ for s in loop.body]
    assert kinds == ["CopyAsync", "Commit", "Wait", "Barrier", "Assign", "Assign", "Assign", "Barrier"]
    copy = loop.body[0]
    assert copy.vec == 8 and copy.dst.base == "sA" and copy.src.base == "A"
    a, b = assign(k, "a"), assign(k, "b")
    assert (a.type.tile, a.type.values, b.type.tile, b.type.values) == ((16, 16), 16, (16, 8), 64)
    mma = assign(k, "acc")
    assert mma.op == ir.Mma("a", "b", "acc", "fma") and mma.span.line == 13
