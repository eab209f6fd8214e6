"""The builtins are declared once (argus_verify.instructions) and the front end follows the
declarations: every declaration has a handler and every handler a declaration, the argument checks
come from the declarations, the docs list every builtin, and an entry added to the semantics table
is a builtin without any front-end change."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from argus_verify import instructions, ir, semantics
from argus_verify.diagnostics import ArgusTypeError
from argus_verify.frontend import HANDLERS, compile_source
from argus_verify.instructions import BUILTINS, VALUE

ROOT = Path(__file__).resolve().parents[1]
W32 = "kernel w(x: f32[N]) -> out: f32[N]:\n    grid(1)\n    block(32)\n"


def body(*lines: str) -> str:
    return W32 + "".join(f"    {ln}\n" for ln in lines)


def error_of(src: str) -> ArgusTypeError:
    with pytest.raises(ArgusTypeError) as info:
        compile_source(src, "t.arg")
    return info.value


def test_every_declared_builtin_has_a_handler_and_every_handler_a_declaration():
    pending = {name for name, b in BUILTINS.items() if b.pending}
    assert set(HANDLERS) == set(BUILTINS) - pending
    assert pending == set()  # ldmatrix, the last refused builtin, came with the tensor-core support


def test_declarations_are_well_formed():
    for b in BUILTINS.values():
        assert b.produces in instructions.PRODUCES and b.form in instructions.FORMS, b.name
        assert b.doc and b.rule and b.help.startswith(b.signature), b.name
        keywords = [p.name for p in b.keywords]
        assert len(set(keywords)) == len(keywords), b.name
        required = [p.required for p in b.positional]
        assert required == sorted(required, reverse=True), f"{b.name}: an optional argument before a required one"


def test_signatures():
    assert BUILTINS["load"].signature == "load(view, tv=L, mask=False, other=0.0, vec=None)"
    assert BUILTINS["reshape"].signature == "reshape(x, d0, d1, ...)"
    assert BUILTINS["tag"].signature == "tag(x)[k]"
    assert BUILTINS["mma"].help == "mma(a, b, c, atom=fma): c + a @ b on tiles a [M, K], b [K, N], c [M, N]"


def test_the_table_declares_math_reductions_and_shuffles():
    assert {n for n in BUILTINS if instructions.unary_op(n)} == set(semantics.FLOAT_UNARY)
    assert {instructions.reduce_op(n) for n in BUILTINS} - {None} == set(semantics.REDUCE_OPS)
    assert {instructions.shuffle_mode(n) for n in BUILTINS} - {None} == set(semantics.SHUFFLE_MODES)


def _operations_section() -> str:
    text = (ROOT / "docs" / "language.md").read_text()
    return text[text.index("## Operations"):text.index("## Memory model")]


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_the_docs_list_every_builtin(name):
    b, table = BUILTINS[name], _operations_section()
    if b.form == VALUE:
        assert re.search(rf"`{re.escape(b.signature)}`", table), f"docs/language.md does not list {name}"
    else:
        assert b.signature in table, f"docs/language.md does not list {b.signature}"


def test_unknown_keyword_lists_the_declared_ones():
    err = error_of(body("s = shared(f32[32], lay=row_major(32))"))
    assert (err.span.line, err.span.col) == (4, 25)
    assert err.message == "shared() got an unexpected keyword 'lay' (allowed: layout)"
    err = error_of(body("commit(n=1)"))
    assert err.message == "commit() got an unexpected keyword 'n' (allowed: none)"


def test_arity_errors_come_with_the_help_text():
    err = error_of(body("a = zeros(f32[32], f32[32], tv=(32, 1):(1, 0))"))
    assert (err.span.line, err.span.col, err.message) == (4, 9, "zeros() takes 1 positional argument, got 2")
    assert err.note == "zeros(tile, tv=L): a fragment of zeros"
    assert error_of(body("a = reshape(x)")).message == "reshape() takes at least 2 positional arguments, got 1"
    assert error_of(body("for i in range():", "    pass")).message == "range() takes 1 to 3 positional " \
        "arguments, got 0"
    assert error_of(body("policy(2)")).message == "policy() takes keyword arguments only, got 1"


def test_a_missing_required_keyword_is_named():
    err = error_of(body("a = zeros(f32[32])"))
    assert err.message == "zeros() needs tv=: a thread-value layout such as (256, 4):(4, 1)"
    a = "a = zeros(f32[32], tv=(32, 1):(1, 0))"
    assert error_of(body(a, "r = reduce_sum(a)")).message == "reduce_sum() needs axis=: the tile axis to reduce"


def test_builtins_are_reserved_names():
    assert error_of(body("exp2 = 3")).message == "'exp2' is a built-in name and cannot be assigned"
    assert error_of(body("for shfl_up in range(2):", "    pass")).message == \
        "loop variable 'shfl_up' shadows an existing name"


def test_a_statement_builtin_has_no_value_and_range_belongs_to_for():
    assert error_of(body("q = barrier()")).message == "barrier(...) is a statement and has no value"
    assert error_of(body("q = range(4)")).message == "range(...) is the iteration space of a for loop: " \
        "for i in range(...)"


def test_every_unary_math_function_compiles():
    for name in semantics.FLOAT_UNARY:
        k = compile_source(body("a = zeros(f32[32], tv=(32, 1):(1, 0))", f"b = {name}(a)"), "t.arg")
        (op,) = [s.op for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign) and s.name == "b"]
        assert op == ir.Elementwise(name, ("a",))


def test_a_table_entry_is_a_builtin_without_touching_the_front_end():
    # in a fresh process, add `cube` to the semantics table before anything reads it
    script = textwrap.dedent("""
        import numpy as np
        from argus_verify import ir, semantics
        semantics.FLOAT_UNARY["cube"] = semantics.FloatUnary("cube", lambda x: x * x * x, {}, doc="x ** 3")
        from argus_verify.frontend import compile_source
        from argus_verify.instructions import BUILTINS
        src = ("kernel w(x: f32[N]) -> out: f32[N]:\\n    grid(1)\\n    block(32)\\n"
               "    a = zeros(f32[32], tv=(32, 1):(1, 0))\\n    b = cube(a)\\n")
        k = compile_source(src, "t.arg")
        print(BUILTINS["cube"].help)
        print([s.op for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign) and s.name == "b"][0])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["cube(x): x ** 3", "Elementwise(op='cube', args=('a',))"]


def test_a_broadcast_operand_first_gives_the_larger_tile():
    """`m - xs` with m a row's max ([16, 1]) took m's coordinates (the first of equal rank) and its
    store was rejected, while `xs - m` compiled (an outside probe)."""
    text = """
kernel k(x: f32[M, N]) -> out: f32[M, N]:
    requires N <= 256
    grid(cdiv(M, 16))
    block(256)
    r0 = block_id.x * 16
    xs = load(x[r0 : r0 + 16, 0 : 256], tv=((16, 16), (4, 4)):((4, 256), (1, 64)), mask=True, other=-inf)
    m = reduce_max(xs, axis=1, scope=warp, lanes=0b01111)
    store(out[r0 : r0 + 16, 0 : 256], {expr}, mask=True)
"""
    tiles = []
    for expr in ("m - xs", "xs - m"):
        k = compile_source(text.format(expr=expr), "k.arg")
        (op,) = [s for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign) and isinstance(s.op, ir.Elementwise)]
        tiles.append(op.type.tile)
    assert tiles == [(16, 256), (16, 256)]
