"""Calls: builtins dispatched to their handlers through the declarations of
`argus_verify.instructions`, and calls of tag functions.

A builtin is handled by the module of its family: `memory`, `compute`, `warp`, `layouts`,
`integers` (calls), `header` (the launch and its built-in values), `views` (tag/coord
components) and `control` (range). `HANDLERS` maps every callable builtin to its handler; a test
checks it against the declarations.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from argus_verify import ir
from argus_verify.frontend import cluster, compute, hopper, hopper_store, integers, layouts, memory, warp
from argus_verify.frontend.arguments import call_site, split_args
from argus_verify.frontend.values import FragVal, IntVal, Val
from argus_verify.instructions import BUILTINS, CALL, COMPONENT, LAUNCH, LOOP, STATEMENT, VALUE

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder

# builtins called in an expression or as a statement: handler(CallSite) -> value (None for statements)
HANDLERS = {**memory.HANDLERS, **hopper.HANDLERS, **compute.HANDLERS, **warp.HANDLERS, **layouts.HANDLERS,
            **integers.HANDLERS, **hopper_store.HANDLERS, **cluster.HANDLERS}


def call(b: KernelBuilder, n) -> Val:
    """name(args) in an expression."""
    fn_node, args_node = n.children
    if fn_node.data != "name":
        raise b.err(fn_node, "only named functions can be called")
    fname = str(fn_node.children[0])
    if fname in b.tagfns:
        return _tagfn_call(b, n, fname, args_node)
    decl = BUILTINS.get(fname)
    if decl is None or decl.form == VALUE:
        raise b.err(fn_node, f"unknown function '{fname}'", note=_suggest_function(b, fname))
    if decl.form == COMPONENT:
        raise b.err(n, f"{fname}(x) needs a component, {fname}(x)[k], and can only be used in an assertion")
    if decl.produces in (STATEMENT, LAUNCH):
        raise b.err(n, f"{fname}(...) is a statement and has no value")
    if decl.produces == LOOP:
        raise b.err(n, f"{fname}(...) is the iteration space of a for loop: for i in {fname}(...)")
    site = call_site(b, decl, n, args_node)
    return HANDLERS[fname](site)


def statement(b: KernelBuilder, e):
    """An expression statement: a call of a statement builtin, or an error."""
    if e.data != "call" or e.children[0].data != "name":
        raise b.err(e, "this expression has no effect; expected a call such as store(...)")
    fname = str(e.children[0].children[0])
    decl = BUILTINS.get(fname) if fname not in b.tagfns else None
    if decl is not None and decl.produces == LAUNCH:
        split_args(b, e.children[1])
        if len(b.scopes) > 1:
            raise b.err(e, f"{fname}(...) belongs at the top level of the kernel, not inside a loop or if")
        return  # read before the body (header.launch)
    if decl is not None and decl.produces == STATEMENT:
        site = call_site(b, decl, e, e.children[1])
        HANDLERS[fname](site)
        return
    v = b.value(e)
    raise b.err(e, f"the result of {fname}(...) is unused" if isinstance(v, FragVal | IntVal)
                else f"'{fname}' is not a statement")


def _tagfn_call(b: KernelBuilder, n, fname: str, args_node) -> IntVal:
    fn = b.tagfns[fname]
    args, kwargs = split_args(b, args_node)
    if kwargs or len(args) != len(fn.params):
        raise b.err(n, f"tag function '{fname}' takes {len(fn.params)} argument(s)")
    vals = [b.int_of(a, "a tag function argument") for a in args]
    return IntVal(ir.ICall(fname, tuple(vals), b.sp(n)), False)


def _suggest_function(b: KernelBuilder, fname: str) -> str | None:
    pool = [name for name, decl in BUILTINS.items() if decl.form == CALL] + list(b.tagfns)
    close = difflib.get_close_matches(fname, pool, n=1)
    return f"did you mean '{close[0]}'?" if close else None
