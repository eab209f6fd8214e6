"""Statements and control flow: blocks, assignments (including compile-time names), expression
statements, `for ... in range(...)`, `if`/`elif`/`else` and assertions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lark import Token, Tree

from argus_verify import ir, roles
from argus_verify.diagnostics import SOURCES
from argus_verify.frontend import calls, contracts, header
from argus_verify.frontend.arguments import CallSite, call_site
from argus_verify.frontend.values import (
    RESERVED,
    FloatVal,
    FragVal,
    IntVal,
    LayoutVal,
    NotARoleError,
    SharedVal,
    TupleVal,
    int_tuple,
)
from argus_verify.instructions import BUILTINS

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder


def statements(b: KernelBuilder, nodes) -> list:
    """The IR of a block of statements."""
    saved, b.out = b.out, []
    for n in nodes:
        _STATEMENTS[n.data](b, n)
    result, b.out = b.out, saved
    return result


def assignments_of(nodes, inside_if: bool = False, found: dict | None = None) -> dict[str, list]:
    """Every assignment in a block and the blocks inside it, by name: (node, inside an if)."""
    found = {} if found is None else found
    for n in nodes:
        if n.data == "assign":
            found.setdefault(str(n.children[0]), []).append((n, inside_if))
        elif n.data == "for_stmt":
            assignments_of(n.children[-1].children, inside_if, found)
        elif n.data == "if_stmt":
            _cond, then, *clauses = n.children  # clauses: elif (cond, suite) and else (suite,)
            for suite in [then] + [c.children[-1] for c in clauses if c is not None]:
                assignments_of(suite.children, True, found)
    return found


def assign(b: KernelBuilder, n: Tree):
    name_tok, rhs = n.children
    name = str(name_tok)
    v = b.value(rhs)
    if isinstance(v, IntVal):
        _assign_integer(b, n, name, v)
    elif isinstance(v, FragVal):
        _assign_fragment(b, n, name, v)
    elif isinstance(v, LayoutVal):
        b.bind_compile_time(name, v, name_tok)
    elif isinstance(v, TupleVal):
        if int_tuple(v) is None:
            raise b.err(rhs, "a tuple bound to a name must be made of compile-time constants")
        b.bind_compile_time(name, v, name_tok)
    elif isinstance(v, SharedVal):
        if b.lookup(name) is not None or name in b.shared:
            raise b.err(name_tok, f"shared allocation '{name}' is defined twice")
        alloc = ir.SharedAlloc(name, v.dtype, v.shape, v.layout, b.sp(n))
        b.shared[name] = alloc
        b.scopes[0][name] = v
        b.out.append(alloc)
    elif isinstance(v, FloatVal):
        raise b.err(rhs, "floating-point scalars cannot be assigned; use them inline")
    else:
        raise b.err(rhs, "this value cannot be assigned to a variable")


def _assign_integer(b: KernelBuilder, n: Tree, name: str, v: IntVal):
    """A name assigned once, outside an if, to a constant is that constant wherever it is used (a
    compile-time value, like a layout: no statement); any other integer name is a variable."""
    name_tok = n.children[0]
    if v.const is not None and [inside for _, inside in b.assignments.get(name, [])] == [False]:
        b.bind_compile_time(name, v, name_tok)
        return
    # a value assigned under a per-thread condition differs between threads, whatever it is
    b.bind(name, IntVal(ir.IVar(name, b.sp(name_tok)), v.uniform and not b.divergent), name_tok)
    b.out.append(ir.Let(name, v.expr, b.sp(n)))


def _assign_fragment(b: KernelBuilder, n: Tree, name: str, v: FragVal):
    last = b.out[-1] if b.out else None
    if isinstance(last, ir.Assign) and last.name == v.name and v.name.startswith("_t"):
        # rename the temporary that holds the value, so the IR names what the user named
        b.out[-1] = ir.Assign(name, last.op, last.type, b.sp(n))
    else:
        # `b = a`: the same values under a new name (a relabelling with the same coordinates)
        b.out.append(ir.Assign(name, ir.Relabel(v.name), v.type, b.sp(n)))
    b.bind(name, FragVal(name, v.type), n.children[0])


def expression_statement(b: KernelBuilder, n: Tree):
    calls.statement(b, n.children[0])


def tagfn_statement(b: KernelBuilder, n: Tree):
    fn = b.tagfn(n)
    b.tagfns[fn.name] = fn


def assert_statement(b: KernelBuilder, n: Tree):
    b.assert_frags, b.in_assert = [], True
    try:
        v = b.value(n.children[0])
    finally:
        b.in_assert = False
    if not isinstance(v, IntVal):
        raise b.err(n.children[0], "an assertion must be a condition")
    frags = tuple(dict.fromkeys(b.assert_frags))
    shapes = {(b.lookup(f).type.threads, b.lookup(f).type.values) for f in frags}
    if len(shapes) > 1:
        raise b.err(n.children[0], "an assertion may only relate fragments with the same number of values per "
                                   "thread")
    src = (SOURCES.line(b.file, n.meta.line) or "").strip()
    b.out.append(ir.Assert(v.expr, frags, src, b.sp(n)))


def for_statement(b: KernelBuilder, n: Tree):
    var_tok, range_tok, args_node, suite = n.children
    if str(range_tok) != "range":
        raise b.err(range_tok, f"for loops iterate over range(...), not '{range_tok}'")
    start, stop, step, unroll = iteration_space(call_site(b, BUILTINS["range"], range_tok, args_node))
    var = str(var_tok)
    if b.lookup(var) is not None or var in RESERVED or var in b.tensors or var in b.sizes:
        raise b.err(var_tok, f"loop variable '{var}' shadows an existing name")
    b.scopes.append({var: IntVal(ir.IVar(var, b.sp(var_tok)), True)})
    b.loop_vars.add(var)
    try:
        body = statements(b, suite.children)
    finally:
        merge_scope(b)
        b.loop_vars.discard(var)
    b.out.append(ir.For(var, start, stop, step, tuple(body), unroll, b.sp(n)))


def iteration_space(site: CallSite) -> tuple:
    """range([start,] stop[, step], unroll=n): (start, stop, step, unroll)."""
    b = site.b
    bounds = []
    for a in site.args:
        v = b.value(a)
        if not isinstance(v, IntVal):
            raise b.err(a, "range bounds must be integers")
        if not v.uniform:
            raise b.err(a, "loop bounds must be the same for every thread of a block")
        bounds.append(v.expr)
    start, stop = (ir.IConst(0), bounds[0]) if len(bounds) == 1 else bounds[:2]
    step = 1
    if len(bounds) == 3:
        step = b.const_int(site.args[2], "the loop step")
        if step <= 0:
            raise b.err(site.args[2], f"the loop step must be positive, got {step}")
    unroll = site.const("unroll")
    if unroll is not None and unroll < 1:
        raise b.err(site.arg("unroll"), "unroll must be at least 1")
    return start, stop, step, unroll


def merge_scope(b: KernelBuilder):
    """Leave a block: values assigned inside stay visible after it (Python scoping); a loop
    variable does not."""
    inner = b.scopes.pop()
    for k, v in inner.items():
        if k not in b.loop_vars:
            b.scopes[-1][k] = v


def if_statement(b: KernelBuilder, n: Tree):
    cond_node, suite, *rest = n.children
    elifs = [c for c in rest if isinstance(c, Tree) and c.data == "elif_clause"]
    else_c = rest[-1] if rest and isinstance(rest[-1], Tree) and rest[-1].data == "else_clause" else None
    b.out.append(_branches(b, cond_node, suite, elifs, else_c, n))


def _branches(b: KernelBuilder, cond_node, suite, elifs, else_c, n) -> ir.If:
    v = b.value(cond_node)
    if not isinstance(v, IntVal):
        raise b.err(cond_node, "an if condition must be an integer or boolean expression")
    split = roles.warpgroup_split(v.expr, b.block) if b.role is None else None
    if split is not None and "warpgroup_id" not in _names(cond_node):
        # `thread_id < 128` selects whole warpgroups too, but the classic shared-memory tree means it
        # per thread, with block-wide fragments: it is a role unless such a fragment says otherwise
        state = b.checkpoint()
        try:
            return _build_branches(b, v, split, suite, elifs, else_c, n)
        except NotARoleError:
            b.restore(state)
            return _build_branches(b, v, None, suite, elifs, else_c, n, plain=True)
    return _build_branches(b, v, split, suite, elifs, else_c, n)


def _build_branches(b: KernelBuilder, v: IntVal, split, suite, elifs, else_c, n, plain: bool = False) -> ir.If:
    b.divergent += not v.uniform
    outer = b.role
    try:
        b.role = split[0] if split else outer
        then = _branch(b, suite.children, split is not None)
        orelse: list = []
        b.role = split[1] if split else outer
        if elifs:
            if split:
                raise NotARoleError("a warpgroup role split takes if/else, not elif", b.sp(elifs[0]))
            first = elifs[0]
            orelse = [_branches(b, first.children[0], first.children[1], elifs[1:], else_c, first)]
        elif else_c is not None:
            orelse = _branch(b, else_c.children[0].children, split is not None)
    finally:
        b.divergent -= not v.uniform
        b.role = outer
    return ir.If(v.expr, tuple(then), tuple(orelse), b.sp(n), plain=plain)


def _names(node) -> set[str]:
    return {str(t) for t in node.scan_values(lambda t: isinstance(t, Token))} if isinstance(node, Tree) else set()


def _branch(b: KernelBuilder, nodes, role: bool = False) -> list:
    b.scopes.append({})
    if role:
        b.role_scope_depth = len(b.scopes)
    body = statements(b, nodes)
    merge_scope(b)
    return body


def _pass(b: KernelBuilder, n: Tree):
    pass


_STATEMENTS = {
    "expr_stmt": expression_statement, "assign": assign, "tag_decl": header.tag_decl, "assert_stmt": assert_statement,
    "requires_stmt": header.requires, "pass_stmt": _pass, "tagfn_inline": tagfn_statement, "for_stmt": for_statement,
    "if_stmt": if_statement, "contract_decl": contracts.contract_decl,
}

LOOP_HANDLERS = {"range": iteration_space}
