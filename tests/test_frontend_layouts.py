"""Named compile-time values: layouts, swizzle-composed layouts, shape tuples and integers bound once
and shared by every use; rebinding errors and use errors that point at the use and note the binding.

`body(...)` puts its lines after a four-line header (256 threads), indented by four spaces: body
line i is source line 5 + i, body column c is source column c + 4.
"""

from __future__ import annotations

import pytest

from argus_verify import ir
from argus_verify.diagnostics import ArgusTypeError, format_error
from argus_verify.frontend import compile_source
from argus_verify.layout import ComposedLayout, Layout, Swizzle

HEAD = """\
kernel k<BLOCK=1024>(x: f32[N], y: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(256)
    base = block_id.x * BLOCK
"""
X = "x[base : base + BLOCK]"


def body(*lines: str) -> str:
    return HEAD + "".join(f"    {ln}\n" for ln in lines)


def error_of(src: str) -> ArgusTypeError:
    with pytest.raises(ArgusTypeError) as info:
        compile_source(src, "t.arg")
    return info.value


def at(err) -> tuple:
    return err.span.line, err.span.col, err.message, err.note


def assigns(k: ir.Kernel) -> dict:
    return {s.name: s for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)}


# -- the feature ----------------------------------------------------------------------------------

def test_a_named_layout_compiles_to_the_same_ir_as_the_layout_written_out():
    named = compile_source(body("ROWS = (256, BLOCK // 256):(BLOCK // 256, 1)",
                                f"xs = load({X}, tv=ROWS, mask=True)",
                                "ys = load(y[base : base + BLOCK], tv=ROWS, mask=True)",
                                "store(out[base : base + BLOCK], xs + ys, mask=True)"), "t.arg")
    inline = compile_source(body("pass",
                                 f"xs = load({X}, tv=(256, BLOCK // 256):(BLOCK // 256, 1), mask=True)",
                                 "ys = load(y[base : base + BLOCK], tv=(256, BLOCK // 256):(BLOCK // 256, 1), "
                                 "mask=True)",
                                 "store(out[base : base + BLOCK], xs + ys, mask=True)"), "t.arg")
    assert named.body == inline.body
    assert assigns(named)["xs"].op.tv.layout == Layout((256, 4), (4, 1))


def test_shape_tuples_swizzles_and_integers():
    k = compile_source(body(
        "V = BLOCK // 256",
        "TILE = (32, 32)",
        "SW = Swizzle(5, 0, 5) o TILE:(32, 1)",
        "s = shared(f32[TILE], layout=SW)",
        "t = shared(f32[TILE, 2])",
        "xs = load(x[base : base + BLOCK], tv=(256, V):(V, 1), mask=True)",
        "VALS = (2, 2)",
        "ys = load(x[base : base + BLOCK], tv=(256, VALS):(4, (1, 2)), mask=True)",
    ), "t.arg")
    s, t = (a for a in ir.walk_stmts(k.body) if isinstance(a, ir.SharedAlloc))
    assert s.shape == (32, 32) and isinstance(s.layout, ComposedLayout)
    assert s.layout.outer == Swizzle(5, 0, 5) and s.layout.inner == Layout((32, 32), (32, 1))
    assert t.shape == (32, 32, 2)
    assert assigns(k)["xs"].type.values == 4
    assert assigns(k)["ys"].op.tv.layout == Layout((256, (2, 2)), (4, (1, 2)))
    # compile-time values are bound without a statement: the only Let is `base` of the header
    assert [s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Let)] == ["base"]


def test_names_bound_inside_a_loop_and_rebound_to_the_same_value():
    k = compile_source(body(
        "for i in range(4):",
        "    L = (256, 4):(4, 1)",
        f"    xs = load({X}, tv=L, mask=True)",
        "L = (256, 4):(4, 1)",  # the same value again: allowed
        f"ys = load({X}, tv=L, mask=True)",
    ), "t.arg")
    a = assigns(k)
    assert a["xs"].op.tv == a["ys"].op.tv


def test_overrides_reach_named_layouts():
    k = compile_source(body("ROWS = (256, BLOCK // 256):(BLOCK // 256, 1)", f"xs = load({X}, tv=ROWS, mask=True)"),
                       "t.arg", {"BLOCK": 2048})
    assert assigns(k)["xs"].op.tv.layout == Layout((256, 8), (8, 1))


def test_an_integer_assigned_more_than_once_stays_a_variable():
    k = compile_source(body("n = 1", "if N > 4096:", "    n = 2", "for i in range(n):", "    pass"), "t.arg")
    (loop,) = [s for s in ir.walk_stmts(k.body) if isinstance(s, ir.For)]
    assert loop.stop == ir.IVar("n")


# -- errors ---------------------------------------------------------------------------------------

def test_rebinding_to_another_value_points_at_the_binding_and_notes_the_first():
    err = error_of(body("A_COPY = (256, 4):(4, 1)", f"xs = load({X}, tv=A_COPY, mask=True)",
                        "A_COPY = (256, 4):(1, 256)"))
    assert at(err) == (7, 5, "'A_COPY' is a compile-time value and cannot be rebound to another value",
                       "'A_COPY' is bound at t.arg:5:5 to (256,4):(4,1)")
    text = format_error(err).splitlines()
    assert text[0] == "t.arg:7:5: error: 'A_COPY' is a compile-time value and cannot be rebound to another value"
    assert text[2].index("^") - text[1].index("|") == text[1].index("A_COPY") - text[1].index("|")
    assert text[3] == "  note: 'A_COPY' is bound at t.arg:5:5 to (256,4):(4,1)"


def test_rebinding_a_shape_or_a_layout_to_another_kind():
    err = error_of(body("TILE = (16, 16)", "TILE = (16, 8)"))
    assert at(err)[:2] == (6, 5) and err.note == "'TILE' is bound at t.arg:5:5 to (16, 16)"
    err = error_of(body("L = (256, 4):(4, 1)", f"L = load({X}, tv=L, mask=True)"))
    assert at(err)[:3] == (6, 5, "'L' is a compile-time value and cannot be rebound to another value")


USE_ERRORS = [
    ("a layout of the wrong rank for tv=", ["L = (256, 2, 2):(4, 2, 1)", f"xs = load({X}, tv=L, mask=True)"],
     6, 42, "a thread-value layout has two modes (threads, values); (256,2,2):(4,2,1) has 3",
     "'L' is bound at t.arg:5:5 to (256,2,2):(4,2,1)"),
    ("a layout for another block size", ["L = (128, 8):(8, 1)", f"xs = load({X}, tv=L, mask=True)"],
     6, 42, "tv layout (128,8):(8,1) spans 128 threads but the block has 256",
     "'L' is bound at t.arg:5:5 to (128,8):(8,1)"),
    ("a layout for a larger tile", ["L = (256, 8):(8, 1)", f"xs = load({X}, tv=L, mask=True)"],
     6, 42, "tv layout (256,8):(8,1) maps thread 255, value 7 to tile element 2047, outside the [1024] tile "
            "(1024 elements)", "'L' is bound at t.arg:5:5 to (256,8):(8,1)"),
    ("a shape where a layout is needed", ["T = (32, 32)", f"xs = load({X}, tv=T, mask=True)"],
     6, 42, "tv= takes a layout such as (256, 4):(4, 1)", "'T' is bound at t.arg:5:5 to (32, 32)"),
    ("a shared layout of another shape", ["T = (32, 32)", "u = shared(f32[32, 16], layout=T:(32, 1))"],
     6, 36, "layout (32,32):(32,1) has shape (32, 32) but the allocation is [32, 16]",
     "'T' is bound at t.arg:5:5 to (32, 32)"),
    ("a named shared layout of another shape", ["SW = Swizzle(3, 3, 3) o (8, 64):(64, 1)",
                                                "u = shared(f16[8, 32], layout=SW)"],
     6, 35, "layout Swizzle(3,3,3) o (8,64):(64,1) has shape (8, 64) but the allocation is [8, 32]",
     "'SW' is bound at t.arg:5:5 to Swizzle(3,3,3) o (8,64):(64,1)"),
    ("a named integer that makes a layout invalid", ["W = 0", "L = (256, W):(1, 1)"],
     6, 9, "bad layout: shape (256,0) has non-positive extents [0]", "'W' is bound at t.arg:5:5 to 0"),
    ("a named shape in a tile type with a bad dimension", ["T = (32, 0)", "s = shared(f32[T])"],
     6, 20, "tile dimensions must be positive, got 0", None),
    ("an integer variable where a constant is needed",
     ["n = 4", "if base > 0:", "    n = 8", f"xs = load({X}, tv=(256, n):(n, 1))"],
     8, 48, "a layout's shape must be made of compile-time constants",
     "'n' is assigned at t.arg:5:5, t.arg:7:9: a name is a compile-time constant when it is assigned once, "
     "outside an if, to a constant"),
    ("a tuple of run-time values", ["T = (base, 4)"],
     5, 9, "a tuple bound to a name must be made of compile-time constants", None),
]


@pytest.mark.parametrize("lines, line, col, message, note", [c[1:] for c in USE_ERRORS],
                         ids=[c[0] for c in USE_ERRORS])
def test_an_error_at_a_use_notes_the_binding(lines, line, col, message, note):
    assert at(error_of(body(*lines))) == (line, col, message, note)


def test_the_use_error_renders_the_caret_at_the_use_and_the_note():
    err = error_of(body("L = (128, 8):(8, 1)", f"xs = load({X}, tv=L, mask=True)"))
    text = format_error(err).splitlines()
    assert text[0].startswith("t.arg:6:42: error: ")
    assert text[1].endswith(f"xs = load({X}, tv=L, mask=True)")
    gutter = text[1].index("|") + 2
    assert text[2][gutter:] == " " * 41 + "^"
    assert text[3] == "  note: 'L' is bound at t.arg:5:5 to (128,8):(8,1)"
