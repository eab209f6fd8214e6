"""Parse tree -> typed IR, with every name, dtype, shape, layout and atom checked.

One `KernelBuilder` instantiates one kernel: compile-time parameters are substituted first, so
every layout and tile shape below is concrete and the checks here are exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from lark import Token, Tree

from argus_verify import ir
from argus_verify.diagnostics import ArgusTypeError, Span
from argus_verify.frontend.linear import constant_difference
from argus_verify.layout import ComposedLayout, Layout, LayoutError, Swizzle, col_major, compose, row_major

DTYPES = tuple(ir.DTYPE_BYTES)
RESERVED = {"grid", "block", "policy", "load", "store", "zeros", "full", "shared", "copy_async", "commit", "wait",
            "barrier", "mma", "cast", "ldmatrix", "Swizzle", "range", "cdiv", "min", "max", "tag",
            "coord", "row_major", "col_major", "transpose", "reshape", "block_id", "thread_id", "warp_id",
            "lane_id", "num_blocks",
            "inf", "nan", *DTYPES}
UNARY_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
              "abs": "abs", "recip": "recip"}
REDUCERS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min"}
SHUFFLES = {"shfl_xor": "xor", "shfl_idx": "idx", "shfl_up": "up", "shfl_down": "down"}
MAX_VALUES_PER_THREAD = 4096  # far beyond the 255 registers of a thread; keeps the checks' tables small


def span_of(filename: str, node) -> Span:
    if isinstance(node, Token):
        return Span(filename, node.line, node.column, node.end_line or node.line,
                    node.end_column or node.column + len(str(node)))
    m = node.meta
    if getattr(m, "empty", True):
        return Span(filename, 1, 1)
    return Span(filename, m.line, m.column, m.end_line, m.end_column)


# Values the builder passes around while it walks expressions.
class Val:
    pass


class IntVal(Val):
    def __init__(self, expr: ir.IExpr, uniform: bool):
        self.expr, self.uniform = expr, uniform


class FloatVal(Val):
    def __init__(self, value: float):
        self.value = value


class ScalarVal(Val):
    """A floating-point scalar kernel parameter."""

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype = name, dtype


class FragVal(Val):
    def __init__(self, name: str, type: ir.FragType):
        self.name, self.type = name, type


class LayoutVal(Val):
    def __init__(self, layout):
        self.layout = layout


class TupleVal(Val):
    def __init__(self, items: list):
        self.items = items


class DTypeVal(Val):
    def __init__(self, dtype: str, dims: list | None = None):
        self.dtype, self.dims = dtype, dims


class ViewVal(Val):
    def __init__(self, view: ir.View, dtype: str):
        self.view, self.dtype = view, dtype


class NameVal(Val):
    """A bare keyword-like name (thread, warp, x4) in an argument position."""

    def __init__(self, name: str):
        self.name = name


class KernelBuilder:
    def __init__(self, tree: Tree, filename: str, tagfns: dict, overrides: Mapping[str, int]):
        self.tree = tree
        self.file = filename
        self.tagfns: dict[str, ir.TagFn] = dict(tagfns)
        self.overrides = dict(overrides)
        self.scopes: list[dict] = [{}]
        self.sizes: list[str] = []
        self.consts: dict[str, int] = {}
        self.params: list = []
        self.tensors: dict[str, ir.TensorParam] = {}
        self.shared: dict[str, ir.SharedAlloc] = {}
        self.block: int | None = None
        self.grid: tuple | None = None
        self.requires: list = []
        self.policies: list = []
        self.tags: list[ir.TagDecl] = []
        self.tmp = 0
        self.out: list = []  # statement list being filled
        self.loop_vars: set[str] = set()
        self.divergent = 0  # depth of if-statements whose condition differs between threads

    # -- diagnostics -----------------------------------------------------------------------
    def sp(self, node) -> Span:
        return span_of(self.file, node)

    def err(self, node, msg: str, note: str | None = None) -> ArgusTypeError:
        return ArgusTypeError(msg, self.sp(node) if node is not None else None, note)

    # -- scopes ----------------------------------------------------------------------------
    def lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def bind(self, name: str, val, node):
        if name in RESERVED:
            raise self.err(node, f"'{name}' is a built-in name and cannot be assigned")
        old = self.lookup(name)
        if name in self.loop_vars:
            raise self.err(node, f"cannot assign to loop variable '{name}'")
        if name in self.tensors or name in self.consts or name in self.sizes:
            raise self.err(node, f"cannot assign to '{name}': it is a kernel parameter or size")
        if isinstance(old, FragVal) and isinstance(val, FragVal):
            if (old.type.dtype, old.type.tile, old.type.threads, old.type.values) != (
                    val.type.dtype, val.type.tile, val.type.threads, val.type.values):
                raise self.err(node, f"'{name}' was {old.type.dtype}{list(old.type.tile)} with "
                                     f"{old.type.values} values per thread; cannot reassign it to "
                                     f"{val.type.dtype}{list(val.type.tile)} with {val.type.values}")
            if old.type.coords != val.type.coords:
                # one name, one register layout: every stage may then read a fragment's coordinates
                # from its type wherever it is used
                raise self.err(node, f"'{name}' was distributed as <{old.type.coords}>; cannot reassign it "
                                     f"with another thread-value layout <{val.type.coords}>",
                               note="give the new value another name")
        elif old is not None and type(old) is not type(val) and not (
                isinstance(old, IntVal) and isinstance(val, IntVal)):
            raise self.err(node, f"'{name}' changes kind on reassignment")
        self.scopes[-1][name] = val

    def fresh(self) -> str:
        self.tmp += 1
        return f"_t{self.tmp}"

    # -- kernel ----------------------------------------------------------------------------
    def build(self) -> ir.Kernel:
        t = self.tree
        children = list(t.children)
        if len(children) == 5:
            children.insert(1, None)  # `const_params?` leaves no placeholder when there is no <...>
        name_tok, const_params, params, arrow, outputs, suite = children
        self.kname = str(name_tok)
        if const_params is not None:
            self._const_params(const_params)
        unknown = set(self.overrides) - set(self.consts)
        if unknown:
            bad = sorted(unknown)[0]
            known = ", ".join(self.consts) or "none"
            raise ArgusTypeError(f"kernel '{self.kname}' has no compile-time parameter '{bad}' "
                                 f"(it has: {known})", self.sp(name_tok))
        if params is not None:
            for p in params.children:
                self._param(p, output=False)
        if outputs is not None:
            plist = outputs.children[0].children if outputs.children[0].data == "params" else outputs.children
            for p in plist:
                self._param(p, output=True)
        stmts = suite.children
        self._launch(stmts)
        body = self.stmts(stmts)
        return ir.Kernel(
            name=self.kname, params=tuple(self.params), consts=tuple(self.consts.items()),
            sizes=tuple(self.sizes), requires=tuple(self.requires), grid=self.grid, block=self.block,
            tags=tuple(self.tags), tagfns=tuple(self.tagfns.values()), body=tuple(body),
            source_file=self.file, span=self.sp(name_tok), policies=tuple(self.policies))

    def _const_params(self, node):
        for cp in node.children:
            name_tok, default = cp.children
            name = str(name_tok)
            if name in self.consts:
                raise self.err(name_tok, f"duplicate compile-time parameter '{name}'")
            if name in self.overrides:
                value = int(self.overrides[name])
            else:
                value = self.const_int(default, "a compile-time parameter's default")
            self.consts[name] = value

    def _param(self, p, output: bool):
        name_tok, typ = p.children
        name = str(name_tok)
        if name in self.tensors or name in self.consts or any(q.name == name for q in self.params):
            raise self.err(name_tok, f"duplicate parameter '{name}'")
        if name in RESERVED:
            raise self.err(name_tok, f"'{name}' is a built-in name and cannot be a parameter")
        dtype = str(typ.children[0])
        if typ.data == "scalar_type":
            if output:
                raise self.err(name_tok, "an output must be a tensor")
            self.params.append(ir.ScalarParam(name, dtype, self.sp(name_tok)))
            return
        dims = []
        for d in typ.children[1].children:
            if isinstance(d, Tree) and d.data == "name" and str(d.children[0]) not in self.consts:
                dn = str(d.children[0])
                if dn in RESERVED or any(q.name == dn for q in self.params):
                    raise self.err(d, f"'{dn}' cannot be a size name")
                if dn not in self.sizes:
                    self.sizes.append(dn)
                dims.append(ir.IVar(dn, self.sp(d)))
            else:
                v = self.const_int(d, "a tensor dimension")
                if v <= 0:
                    raise self.err(d, f"tensor dimension must be positive, got {v}")
                dims.append(ir.IConst(v, self.sp(d)))
        tp = ir.TensorParam(name, dtype, tuple(dims), output, self.sp(name_tok))
        self.tensors[name] = tp
        self.params.append(tp)

    def _launch(self, stmts):
        """grid(...) and block(...) are needed before anything distributes work over threads."""
        for s in stmts:
            call = s.children[0] if isinstance(s, Tree) and s.data == "expr_stmt" else None
            if call is None or call.data != "call" or call.children[0].data != "name":
                continue
            fname = str(call.children[0].children[0])
            if fname == "policy":
                self._policy(call)
                continue
            if fname not in ("grid", "block"):
                continue
            args, kwargs = self.split_args(call.children[1])
            if kwargs:
                raise self.err(call, f"{fname}() takes no keyword arguments")
            if fname == "block":
                if self.block is not None:
                    raise self.err(call, "block(...) given twice")
                if len(args) != 1:
                    raise self.err(call, "block(n) takes the number of threads per block")
                n = self.const_int(args[0], "the block size")
                if n <= 0 or n > 1024 or n % 32:
                    raise self.err(args[0], f"block size must be a multiple of 32 between 32 and 1024, got {n}")
                self.block = n
            else:
                if self.grid is not None:
                    raise self.err(call, "grid(...) given twice")
                if not 1 <= len(args) <= 3:
                    raise self.err(call, "grid(x[, y[, z]]) takes one to three extents")
                dims = []
                for a in args:
                    v = self.value(a)
                    if not isinstance(v, IntVal) or not self.grid_uniform(v.expr):
                        raise self.err(a, "a grid extent must be an integer expression of sizes and constants")
                    dims.append(v.expr)
                while len(dims) < 3:
                    dims.append(ir.IConst(1))
                self.grid = tuple(dims)
        if self.block is None:
            raise self.err(self.tree.children[0], f"kernel '{self.kname}' has no block(...) statement")
        if self.grid is None:
            raise self.err(self.tree.children[0], f"kernel '{self.kname}' has no grid(...) statement")

    POLICIES = {"min_blocks_per_sm": "int", "maxnreg": "int", "prefetch": "bool"}

    def _policy(self, call):
        """policy(min_blocks_per_sm=2, maxnreg=128, prefetch=False): code-generation choices."""
        args, kwargs = self.split_args(call.children[1])
        if args:
            raise self.err(args[0], "policy() takes keyword arguments only, e.g. policy(min_blocks_per_sm=2)")
        for key, (knode, vnode) in kwargs.items():
            kind = self.POLICIES.get(key)
            if kind is None:
                raise self.err(knode, f"unknown policy '{key}' (known: {', '.join(self.POLICIES)})")
            if any(name == key for name, _ in self.policies):
                raise self.err(knode, f"policy '{key}' given twice")
            if kind == "bool":
                value = self.kw_bool(kwargs, key, True)
            else:
                value = self.const_int(vnode, f"policy {key}")
                limit = 255 if key == "maxnreg" else 32
                if not 1 <= value <= limit:
                    raise self.err(vnode, f"policy {key} must be between 1 and {limit}, got {value}")
            self.policies.append((key, value))

    def grid_uniform(self, e: ir.IExpr) -> bool:
        for sub in ir.walk_iexpr(e):
            if isinstance(sub, ir.ISpecial | ir.ITag | ir.ICoord):
                return False
            if isinstance(sub, ir.IVar) and sub.name not in self.sizes and not self.is_int_param(sub.name):
                return False
        return True

    def is_int_param(self, name: str) -> bool:
        return any(isinstance(p, ir.ScalarParam) and p.name == name and not ir.is_float(p.dtype)
                   for p in self.params)

    # -- statements ------------------------------------------------------------------------
    def stmts(self, nodes) -> list:
        saved, self.out = self.out, []
        for n in nodes:
            self.stmt(n)
        result, self.out = self.out, saved
        return result

    def stmt(self, n: Tree):
        kind = n.data
        if kind == "expr_stmt":
            self.expr_stmt(n.children[0])
        elif kind == "assign":
            self.assign(n)
        elif kind == "tag_decl":
            self.tag_decl(n)
        elif kind == "assert_stmt":
            self.assert_stmt(n)
        elif kind == "requires_stmt":
            v = self.value(n.children[0])
            if not isinstance(v, IntVal) or not self.grid_uniform(v.expr):
                raise self.err(n.children[0], "'requires' takes a condition on sizes and constants")
            self.requires.append(v.expr)
        elif kind == "pass_stmt":
            pass
        elif kind == "tagfn_inline":
            fn = build_tagfn(n, self.file)
            self.tagfns[fn.name] = fn
        elif kind == "for_stmt":
            self.for_stmt(n)
        elif kind == "if_stmt":
            self.if_stmt(n)
        else:  # pragma: no cover - the grammar has no other statements
            raise self.err(n, f"unsupported statement {kind}")

    def expr_stmt(self, e: Tree):
        if e.data != "call" or e.children[0].data != "name":
            raise self.err(e, "this expression has no effect; expected a call such as store(...)")
        fname = str(e.children[0].children[0])
        args, kwargs = self.split_args(e.children[1])
        if fname in ("grid", "block", "policy"):
            if len(self.scopes) > 1:
                raise self.err(e, f"{fname}(...) belongs at the top level of the kernel, not inside a loop "
                                  "or if")
            return  # handled by _launch
        if fname == "store":
            self.store(e, args, kwargs)
        elif fname == "copy_async":
            self.copy_async(e, args, kwargs)
        elif fname == "commit":
            self.no_args(e, args, kwargs)
            self.out.append(ir.Commit(self.sp(e)))
        elif fname == "wait":
            self.check_kwargs(e, kwargs, ())
            n = self.const_int(args[0], "wait's count") if args else 0
            if len(args) > 1 or n < 0:
                raise self.err(e, "wait(n) takes one non-negative count of groups left in flight")
            self.out.append(ir.Wait(n, self.sp(e)))
        elif fname == "barrier":
            self.no_args(e, args, kwargs)
            self.out.append(ir.Barrier(self.sp(e)))
        else:
            v = self.value(e)
            raise self.err(e, f"the result of {fname}(...) is unused"
                           if isinstance(v, FragVal | IntVal) else f"'{fname}' is not a statement")

    def no_args(self, node, args, kwargs):
        if args or kwargs:
            raise self.err(node, f"{node.children[0].children[0]}() takes no arguments")

    def keyword_value(self, node, keywords) -> Val:
        """An argument that is one of a few bare words (scope=warp, atom=m16n8k16, x4): any other bare
        word is a NameVal too, so the caller names the alternatives instead of 'unknown name'."""
        if node.data == "name" and str(node.children[0]) not in keywords and \
                self.lookup(str(node.children[0])) is None:
            return NameVal(str(node.children[0]))
        return self.value(node)

    def check_kwargs(self, node, kwargs: dict, allowed):
        for k, (knode, _) in kwargs.items():
            if k not in allowed:
                fname = node.children[0].children[0]
                opts = ", ".join(allowed) if allowed else "none"
                raise self.err(knode, f"{fname}() got an unexpected keyword '{k}' (allowed: {opts})")

    def assign(self, n: Tree):
        name_tok, rhs = n.children
        name = str(name_tok)
        v = self.value(rhs)
        if isinstance(v, IntVal):
            # a value assigned under a per-thread condition differs between threads, whatever it is
            uniform = v.uniform and not self.divergent
            self.bind(name, IntVal(ir.IVar(name, self.sp(name_tok)), uniform), name_tok)
            self.out.append(ir.Let(name, v.expr, self.sp(n)))
        elif isinstance(v, FragVal):
            # rename the temporary that holds the value, so the IR names what the user named
            last = self.out[-1] if self.out else None
            if isinstance(last, ir.Assign) and last.name == v.name and v.name.startswith("_t"):
                self.out[-1] = ir.Assign(name, last.op, last.type, self.sp(n))
            else:
                # `b = a`: the same values under a new name (a relabelling with the same coordinates)
                self.out.append(ir.Assign(name, ir.Relabel(v.name), v.type, self.sp(n)))
            self.bind(name, FragVal(name, v.type), name_tok)
        elif isinstance(v, LayoutVal):
            self.bind(name, v, name_tok)
        elif isinstance(v, SharedVal):
            if self.lookup(name) is not None or name in self.shared:
                raise self.err(name_tok, f"shared allocation '{name}' is defined twice")
            alloc = ir.SharedAlloc(name, v.dtype, v.shape, v.layout, self.sp(n))
            self.shared[name] = alloc
            self.scopes[0][name] = v
            self.out.append(alloc)
        elif isinstance(v, FloatVal):
            raise self.err(rhs, "floating-point scalars cannot be assigned; use them inline")
        else:
            raise self.err(rhs, "this value cannot be assigned to a variable")

    def tag_decl(self, n: Tree):
        name_tok, names, expr, once = n.children
        name = str(name_tok)
        tp = self.tensors.get(name)
        if tp is None:
            raise self.err(name_tok, f"'tag' names unknown tensor '{name}'")
        if any(t.tensor == name for t in self.tags):
            raise self.err(name_tok, f"tensor '{name}' is tagged twice")
        idx = [str(x) for x in names.children]
        for i, x in enumerate(idx):
            if x in idx[:i]:
                raise self.err(names.children[i], f"index variable '{x}' appears twice in the tag of "
                                                  f"'{name}'")
        if len(idx) != tp.rank:
            raise self.err(names, f"tensor '{name}' has rank {tp.rank} but the tag binds {len(idx)} "
                                  f"index variable{'s' if len(idx) != 1 else ''}")
        if once is not None and not tp.output:
            raise self.err(once, "'once' applies to outputs only")
        self.scopes.append({i: IntVal(ir.IVar(i), True) for i in idx})
        try:
            comps_node = expr.children if expr.data in ("tuple", "tuple1") else [expr]
            comps = []
            for c in comps_node:
                v = self.value(c)
                if not isinstance(v, IntVal):
                    raise self.err(c, "a tag component must be an integer expression")
                comps.append(v.expr)
        finally:
            self.scopes.pop()
        self.tags.append(ir.TagDecl(name, tuple(idx), tuple(comps), once is not None, self.sp(n)))

    def assert_stmt(self, n: Tree):
        self.assert_frags: list[str] = []
        v = self.value(n.children[0], in_assert=True)
        if not isinstance(v, IntVal):
            raise self.err(n.children[0], "an assertion must be a condition")
        frags = tuple(dict.fromkeys(self.assert_frags))
        shapes = {(self.lookup(f).type.threads, self.lookup(f).type.values) for f in frags}
        if len(shapes) > 1:
            raise self.err(n.children[0], "an assertion may only relate fragments with the same "
                                          "number of values per thread")
        line = n.meta.line
        from argus_verify.diagnostics import SOURCES
        src = (SOURCES.line(self.file, line) or "").strip()
        self.out.append(ir.Assert(v.expr, frags, src, self.sp(n)))

    def for_stmt(self, n: Tree):
        var_tok, range_tok, args_node, suite = n.children
        if str(range_tok) != "range":
            raise self.err(range_tok, f"for loops iterate over range(...), not '{range_tok}'")
        args, kwargs = self.split_args(args_node)
        self.check_kwargs_node(range_tok, "range", kwargs, ("unroll",))
        if not 1 <= len(args) <= 3:
            raise self.err(range_tok, "range() takes one to three arguments")
        vals = []
        for a in args:
            v = self.value(a)
            if not isinstance(v, IntVal):
                raise self.err(a, "range bounds must be integers")
            if not v.uniform:
                raise self.err(a, "loop bounds must be the same for every thread of a block")
            vals.append(v.expr)
        start, stop, step = ir.IConst(0), vals[0], 1
        if len(vals) >= 2:
            start, stop = vals[0], vals[1]
        if len(vals) == 3:
            step = self.const_int(args[2], "the loop step")
            if step <= 0:
                raise self.err(args[2], f"the loop step must be positive, got {step}")
        unroll = None
        if "unroll" in kwargs:
            unroll = self.const_int(kwargs["unroll"][1], "unroll")
            if unroll < 1:
                raise self.err(kwargs["unroll"][1], "unroll must be at least 1")
        var = str(var_tok)
        if self.lookup(var) is not None or var in RESERVED or var in self.tensors or var in self.sizes:
            raise self.err(var_tok, f"loop variable '{var}' shadows an existing name")
        self.scopes.append({var: IntVal(ir.IVar(var, self.sp(var_tok)), True)})
        self.loop_vars.add(var)
        try:
            body = self.stmts(suite.children)
        finally:
            self.merge_scope()
            self.loop_vars.discard(var)
        self.out.append(ir.For(var, start, stop, step, tuple(body), unroll, self.sp(n)))

    def merge_scope(self):
        """Leave a block: values assigned inside stay visible after it (Python scoping); a loop
        variable does not."""
        inner = self.scopes.pop()
        for k, v in inner.items():
            if k not in self.loop_vars:
                self.scopes[-1][k] = v

    def check_kwargs_node(self, node, fname, kwargs, allowed):
        for k, (knode, _) in kwargs.items():
            if k not in allowed:
                raise self.err(knode, f"{fname}() got an unexpected keyword '{k}'")

    def if_stmt(self, n: Tree):
        cond_node, suite, *rest = n.children
        elifs = [c for c in rest if isinstance(c, Tree) and c.data == "elif_clause"]
        else_c = rest[-1] if rest and isinstance(rest[-1], Tree) and rest[-1].data == "else_clause" else None
        self.out.append(self._if(cond_node, suite, elifs, else_c, n))

    def _if(self, cond_node, suite, elifs, else_c, n):
        v = self.value(cond_node)
        if not isinstance(v, IntVal):
            raise self.err(cond_node, "an if condition must be an integer or boolean expression")
        self.divergent += not v.uniform
        try:
            self.scopes.append({})
            then = self.stmts(suite.children)
            self.merge_scope()
            orelse: list = []
            if elifs:
                first = elifs[0]
                orelse = [self._if(first.children[0], first.children[1], elifs[1:], else_c, first)]
            elif else_c is not None:
                self.scopes.append({})
                orelse = self.stmts(else_c.children[0].children)
                self.merge_scope()
        finally:
            self.divergent -= not v.uniform
        return ir.If(v.expr, tuple(then), tuple(orelse), self.sp(n))

    # -- memory statements -----------------------------------------------------------------
    def store(self, node, args, kwargs):
        self.check_kwargs(node, kwargs, ("mask", "where"))
        if len(args) != 2:
            raise self.err(node, "store(view, fragment, mask=..., where=...) takes a view and a fragment")
        dst = self.value(args[0])
        if not isinstance(dst, ViewVal):
            raise self.err(args[0], "store's first argument must be a view of a tensor or shared allocation")
        val = self.value(args[1])
        if not isinstance(val, FragVal):
            raise self.err(args[1], "store's second argument must be a fragment")
        self.check_writable(dst, args[0])
        if val.type.dtype != dst.dtype:
            raise self.err(args[1], f"cannot store a {val.type.dtype} fragment into {dst.dtype} "
                                    f"'{dst.view.base}'; cast it first")
        if tuple(val.type.tile) != dst.view.tile:
            raise self.err(args[1], f"fragment tile {list(val.type.tile)} does not match the view's tile "
                                    f"{list(dst.view.tile)}")
        mask = self.kw_bool(kwargs, "mask", False)
        where = None
        if "where" in kwargs:
            w = self.value(kwargs["where"][1])
            if not isinstance(w, IntVal):
                raise self.err(kwargs["where"][1], "where= takes a condition")
            where = w.expr
        self.out.append(ir.Store(dst.view, val.name, mask, where, self.sp(node)))

    def check_writable(self, dst: ViewVal, node):
        if dst.view.space == "global":
            tp = self.tensors[dst.view.base]
            if not tp.output:
                raise self.err(node, f"cannot write to input tensor '{tp.name}'",
                               note="outputs are declared after '->' in the kernel signature")

    def copy_async(self, node, args, kwargs):
        self.check_kwargs(node, kwargs, ("tv", "mask", "vec"))
        if len(args) != 2:
            raise self.err(node, "copy_async(shared_view, global_view, tv=..., vec=...) takes two views")
        dst, src = self.value(args[0]), self.value(args[1])
        if not isinstance(dst, ViewVal) or dst.view.space != "shared":
            raise self.err(args[0], "copy_async copies into shared memory: the first argument must be "
                                    "a shared view")
        if not isinstance(src, ViewVal) or src.view.space != "global":
            raise self.err(args[1], "copy_async copies from global memory: the second argument must be "
                                    "a global view")
        if dst.dtype != src.dtype:
            raise self.err(node, f"copy_async between {src.dtype} and {dst.dtype}")
        if dst.view.tile != src.view.tile:
            raise self.err(args[0], f"shared tile {list(dst.view.tile)} and global tile "
                                    f"{list(src.view.tile)} differ")
        tv = self.tv_arg(node, kwargs, src.view.tile)
        vec = self.const_int(kwargs["vec"][1], "vec") if "vec" in kwargs else None
        nbytes = ir.DTYPE_BYTES[src.dtype]
        if vec is None:
            vec = max(v for v in (1, 2, 4, 8, 16)
                      if tv.values % v == 0 and v * nbytes <= 16 and row_contiguous(tv, v))
        where = kwargs["vec"][1] if "vec" in kwargs else node
        if vec * nbytes not in (4, 8, 16):
            raise self.err(where, f"cp.async copies 4, 8 or 16 bytes; vec={vec} of {src.dtype} is "
                                  f"{vec * nbytes} bytes")
        if tv.values % vec:
            raise self.err(where, f"vec={vec} does not divide the {tv.values} values per thread")
        if not row_contiguous(tv, vec):
            raise self.err(where, f"vec={vec}: the tv layout {tv.layout} does not give each thread runs of "
                                  f"{vec} consecutive elements of one tile row")
        mask = self.kw_bool(kwargs, "mask", False)
        self.out.append(ir.CopyAsync(dst.view, src.view, tv, mask, vec, self.sp(node)))

    def kw_bool(self, kwargs, key, default: bool) -> bool:
        if key not in kwargs:
            return default
        node = kwargs[key][1]
        if isinstance(node, Tree) and node.data in ("true_lit", "false_lit"):
            return node.data == "true_lit"
        raise self.err(node, f"{key}= takes True or False")

    def tv_arg(self, node, kwargs, tile: tuple, required=True) -> ir.TVLayout | None:
        if "tv" not in kwargs:
            if not required:
                return None
            raise self.err(node, "a thread-value layout is required: tv=(threads, values):(stride, stride)")
        knode, vnode = kwargs["tv"]
        v = self.value(vnode)
        if not isinstance(v, LayoutVal) or not isinstance(v.layout, Layout):
            raise self.err(vnode, "tv= takes a layout such as (256, 4):(4, 1)")
        return self.check_tv(v.layout, tile, vnode)

    def check_tv(self, layout: Layout, tile: tuple, node) -> ir.TVLayout:
        if layout.rank != 2:
            raise self.err(node, f"a thread-value layout has two modes (threads, values); {layout} has "
                                 f"{layout.rank}")
        tv = ir.TVLayout(layout, tuple(tile))
        if tv.threads != self.block:
            raise self.err(node, f"tv layout {layout} spans {tv.threads} threads but the block has "
                                 f"{self.block}")
        if tv.values > MAX_VALUES_PER_THREAD:
            raise self.err(node, f"tv layout {layout} gives each thread {tv.values} values; a fragment holds "
                                 f"at most {MAX_VALUES_PER_THREAD} per thread")
        flat = tv.flat_table()
        n = math.prod(tile)
        if flat.min() < 0 or flat.max() >= n:
            bad = int(flat.max() if flat.max() >= n else flat.min())
            t, v = (int(x[0]) for x in np.nonzero(flat == bad))
            raise self.err(node, f"tv layout {layout} maps thread {t}, value {v} to tile element {bad}, "
                                 f"outside the {list(tile)} tile ({n} elements)")
        return tv

    # -- expressions -----------------------------------------------------------------------
    def split_args(self, args_node):
        args, kwargs = [], {}
        if args_node is None:
            return args, kwargs
        for a in args_node.children:
            if a.data == "kwarg":
                k = str(a.children[0])
                if k in kwargs:
                    raise self.err(a.children[0], f"keyword '{k}' given twice")
                kwargs[k] = (a.children[0], a.children[1])
            else:
                if kwargs:
                    raise self.err(a, "positional argument after a keyword argument")
                args.append(a.children[0])
        return args, kwargs

    def const_int(self, node, what: str) -> int:
        v = self.value(node)
        if isinstance(v, IntVal):
            e = v.expr
            if isinstance(e, ir.IConst):
                return e.value
        raise self.err(node, f"{what} must be a compile-time constant")

    def const_tuple(self, node, what: str):
        v = self.value(node)
        return self.to_int_tuple(v, node, what)

    def to_int_tuple(self, v, node, what):
        if isinstance(v, IntVal) and isinstance(v.expr, ir.IConst):
            return v.expr.value
        if isinstance(v, TupleVal):
            return tuple(self.to_int_tuple(x, node, what) for x in v.items)
        raise self.err(node, f"{what} must be made of compile-time constants")

    def value(self, n, in_assert: bool = False) -> Val:
        self.in_assert = in_assert or getattr(self, "in_assert", False)
        try:
            return self._value(n)
        finally:
            if in_assert:
                self.in_assert = False

    def _value(self, n) -> Val:
        kind = n.data
        if kind == "int_lit":
            text = str(n.children[0])
            try:
                value = int(text.replace("_", ""), 0)
            except ValueError:
                zeros = " (leading zeros are not allowed)" if text[1:2].isdigit() else ""
                raise self.err(n, f"invalid integer literal '{text}'{zeros}") from None
            if value >= 2**63:
                shown = text if len(text) <= 24 else text[:24] + "..."
                raise self.err(n, f"integer literal {shown} does not fit in 64 bits")
            return IntVal(ir.IConst(value, self.sp(n)), True)
        if kind == "float_lit":
            return FloatVal(float(str(n.children[0])))
        if kind in ("true_lit", "false_lit"):
            return IntVal(ir.IConst(1 if kind == "true_lit" else 0, self.sp(n)), True)
        if kind == "name":
            return self.name_value(n)
        if kind in ("tuple", "tuple1"):
            return TupleVal([self._value(c) for c in n.children])
        if kind == "empty_tuple":
            return TupleVal([])
        if kind == "layout":
            shape = self.const_tuple(n.children[0], "a layout's shape")
            stride = self.const_tuple(n.children[1], "a layout's stride")
            try:
                return LayoutVal(Layout(shape, stride))
            except (LayoutError, ValueError, TypeError) as e:
                raise self.err(n, f"bad layout: {e}") from None
        if kind == "compose":
            a, _, b = n.children
            la, lb = self._value(a), self._value(b)
            if not isinstance(la, LayoutVal) or not isinstance(lb, LayoutVal):
                raise self.err(n, "'o' composes layouts and swizzles")
            try:
                return LayoutVal(compose(la.layout, lb.layout))
            except (LayoutError, ValueError, TypeError) as e:
                raise self.err(n, f"cannot compose {la.layout} with {lb.layout}: {e}") from None
        if kind == "attribute":
            return self.attribute(n)
        if kind == "call":
            return self.call(n)
        if kind == "subscript":
            return self.subscript(n)
        if kind == "neg":
            v = self._value(n.children[0])
            if isinstance(v, IntVal):
                return self.int_bin(n, "-", IntVal(ir.IConst(0), True), v)
            if isinstance(v, FloatVal):
                return FloatVal(-v.value)
            if isinstance(v, FragVal):
                return self.elementwise(n, "neg", [v])
            raise self.err(n, "cannot negate this value")
        if kind == "binop":
            a, op, b = n.children
            return self.binary(n, str(op), self._value(a), self._value(b), a, b)
        if kind in ("binop_or", "binop_xor", "binop_and"):
            op = {"binop_or": "|", "binop_xor": "^", "binop_and": "&"}[kind]
            return self.binary(n, op, self._value(n.children[0]), self._value(n.children[1]),
                               n.children[0], n.children[1])
        if kind == "compare":
            a, op, b = n.children
            va, vb = self._value(a), self._value(b)
            if not isinstance(va, IntVal) or not isinstance(vb, IntVal):
                raise self.err(n, "comparisons are between integer expressions")
            return self.int_bin(n, str(op), va, vb)
        if kind in ("and_op", "or_op"):
            va, vb = self._value(n.children[0]), self._value(n.children[1])
            for v, c in ((va, n.children[0]), (vb, n.children[1])):
                if not isinstance(v, IntVal):
                    raise self.err(c, "'and'/'or' combine conditions")
            return self.int_bin(n, "and" if kind == "and_op" else "or", va, vb)
        if kind == "not_op":
            v = self._value(n.children[0])
            if not isinstance(v, IntVal):
                raise self.err(n, "'not' takes a condition")
            if isinstance(v.expr, ir.IConst):
                return IntVal(ir.IConst(int(not v.expr.value)), True)
            return IntVal(ir.IUn("not", v.expr, self.sp(n)), v.uniform)
        if kind == "ternary":
            a, c, b = (self._value(x) for x in n.children)
            if not all(isinstance(v, IntVal) for v in (a, c, b)):
                raise self.err(n, "conditional expressions are for integers")
            return IntVal(ir.ISelect(c.expr, a.expr, b.expr, self.sp(n)), a.uniform and b.uniform and c.uniform)
        raise self.err(n, f"unsupported expression ({kind})")

    def name_value(self, n) -> Val:
        name = str(n.children[0])
        if name in self.consts:
            return IntVal(ir.IConst(self.consts[name], self.sp(n)), True)
        v = self.lookup(name)
        if v is not None:
            if isinstance(v, SharedVal):
                full = tuple(ir.Slice(ir.IConst(0), d) for d in v.shape)
                return ViewVal(ir.View(name, "shared", full, self.sp(n)), v.dtype)
            return v
        if name in self.sizes:
            return IntVal(ir.IVar(name, self.sp(n)), True)
        for p in self.params:
            if p.name == name:
                if isinstance(p, ir.ScalarParam):
                    if ir.is_float(p.dtype):
                        return ScalarVal(name, p.dtype)
                    return IntVal(ir.IVar(name, self.sp(n)), True)
                tp = p
                if all(isinstance(d, ir.IConst) for d in tp.shape):
                    full = tuple(ir.Slice(ir.IConst(0), d.value) for d in tp.shape)
                    return ViewVal(ir.View(name, "global", full, self.sp(n)), tp.dtype)
                raise self.err(n, f"tensor '{name}' must be sliced to a constant-shaped tile, "
                                  f"e.g. {name}[i0 : i0 + 128]")
        if name in DTYPES:
            return DTypeVal(name)
        if name == "inf":
            return FloatVal(math.inf)
        if name == "nan":
            return FloatVal(math.nan)
        if name in ("thread_id", "warp_id", "lane_id"):
            return IntVal(ir.ISpecial(name, self.sp(n)), False)
        if name in ("block_id", "num_blocks"):
            raise self.err(n, f"'{name}' needs a component: {name}.x, {name}.y or {name}.z")
        if name in self.tagfns:
            raise self.err(n, f"tag function '{name}' must be called")
        if name in ("thread", "warp", "x1", "x2", "x4") or name in ir.MMA_ATOMS:
            return NameVal(name)
        raise self.err(n, f"unknown name '{name}'", note=self.suggest(name))

    def suggest(self, name: str, functions: bool = False) -> str | None:
        import difflib
        if functions:
            pool = [m[5:] for m in dir(self) if m.startswith("call_") and m != "call_tagfn"]
            pool += list(UNARY_MATH) + list(REDUCERS) + list(SHUFFLES) + list(self.tagfns)
            pool += ["store", "copy_async", "commit", "wait", "barrier", "grid", "block"]
            close = difflib.get_close_matches(name, pool, n=1)
            return f"did you mean '{close[0]}'?" if close else None
        # innermost names first: among equally close names, prefer the one just assigned
        pool = [k for s in reversed(self.scopes) for k in s]
        pool += list(self.shared) + [p.name for p in self.params] + self.sizes + list(self.consts)
        pool += ["thread_id", "warp_id", "lane_id", "block_id"]
        close = difflib.get_close_matches(name, pool, n=5, cutoff=0.5)
        if not close:
            return None
        best = min(close, key=lambda c: (edit_distance(name, c), pool.index(c)))
        return f"did you mean '{best}'?"

    def attribute(self, n) -> Val:
        base, attr = n.children
        attr = str(attr)
        if base.data == "name" and str(base.children[0]) in ("block_id", "num_blocks"):
            if attr not in ("x", "y", "z"):
                raise self.err(n, f"{base.children[0]} has components x, y and z, not '{attr}'")
            return IntVal(ir.ISpecial(f"{base.children[0]}.{attr}", self.sp(n)), True)
        raise self.err(n, f"unknown attribute '{attr}'")

    def int_bin(self, n, op: str, a: IntVal, b: IntVal) -> IntVal:
        ea, eb = a.expr, b.expr
        if isinstance(ea, ir.IConst) and isinstance(eb, ir.IConst):
            if op == "<<" and eb.value >= 64:
                raise self.err(n, f"shift by {eb.value} in a constant expression overflows 64 bits")
            value = fold(op, ea.value, eb.value)
            if value is None:
                raise self.err(n, f"division by zero in a constant expression ({ea.value} {op} {eb.value})")
            if not -2**63 <= value < 2**63:
                raise self.err(n, f"constant expression ({ea.value} {op} {eb.value}) overflows 64 bits")
            return IntVal(ir.IConst(value, self.sp(n)), True)
        return IntVal(ir.IBin(op, ea, eb, self.sp(n)), a.uniform and b.uniform)

    def binary(self, n, op: str, a: Val, b: Val, na, nb) -> Val:
        if isinstance(a, IntVal) and isinstance(b, IntVal):
            if op == "/":
                raise self.err(n, "'/' is floating-point division; use '//' for integers")
            return self.int_bin(n, op, a, b)
        if isinstance(a, FloatVal) and isinstance(b, FloatVal | IntVal) or (
                isinstance(b, FloatVal) and isinstance(a, IntVal)):
            x = a.value if isinstance(a, FloatVal) else const_of(a)
            y = b.value if isinstance(b, FloatVal) else const_of(b)
            if x is None or y is None:
                raise self.err(n, "cannot mix a float constant with a run-time integer here")
            r = {"+": x + y, "-": x - y, "*": x * y, "/": x / y if y else math.inf}.get(op)
            if r is None:
                raise self.err(n, f"'{op}' is not defined on floating-point constants")
            return FloatVal(r)
        if isinstance(a, FragVal) or isinstance(b, FragVal):
            names = {"+": "+", "-": "-", "*": "*", "/": "/"}
            if op not in names:
                raise self.err(n, f"'{op}' is not defined on fragments")
            return self.elementwise(n, names[op], [a, b], [na, nb])
        if isinstance(a, LayoutVal | TupleVal) or isinstance(b, LayoutVal | TupleVal):
            raise self.err(n, f"'{op}' is not defined on layouts or tuples")
        raise self.err(n, f"'{op}' cannot combine these operands")

    def elementwise(self, n, op: str, vals: list, nodes=None) -> FragVal:
        frags = [v for v in vals if isinstance(v, FragVal)]
        if not frags:
            raise self.err(n, f"{op} needs at least one fragment operand")
        ref = frags[0].type
        for f in frags[1:]:
            if f.type.dtype != ref.dtype:
                raise self.err(n, f"operands have different dtypes ({ref.dtype} and {f.type.dtype}); "
                                  f"cast one with cast(x, {ref.dtype})")
            if (f.type.threads, f.type.values) != (ref.threads, ref.values):
                raise self.err(n, f"fragments have different shapes: {ref.values} and {f.type.values} "
                                  f"values per thread")
        operands = []
        for i, v in enumerate(vals):
            node = nodes[i] if nodes else n
            if isinstance(v, FragVal):
                operands.append(v.name)
            elif isinstance(v, FloatVal):
                operands.append(ir.FConst(v.value))
            elif isinstance(v, ScalarVal):
                if v.dtype != ref.dtype:
                    raise self.err(node, f"scalar '{v.name}' is {v.dtype} but the fragment is {ref.dtype}")
                operands.append(ir.FScalar(ir.IVar(v.name)))
            elif isinstance(v, IntVal):
                if isinstance(v.expr, ir.IConst):
                    operands.append(ir.FConst(float(v.expr.value)))
                else:
                    operands.append(ir.FScalar(v.expr))
            else:
                raise self.err(node, "this operand cannot be used in arithmetic on fragments")
        # the result takes the coordinates of the highest-rank fragment operand
        result_type = max((f.type for f in frags), key=lambda t: len(t.tile))
        return self.emit(n, ir.Elementwise(op, tuple(operands)), result_type)

    def emit(self, n, op, typ: ir.FragType) -> FragVal:
        name = self.fresh()
        self.out.append(ir.Assign(name, op, typ, self.sp(n)))
        return FragVal(name, typ)

    # -- subscripts: views, types, tag(...)[i] -------------------------------------------------
    def subscript(self, n) -> Val:
        base_node, subs = n.children
        if base_node.data == "call" and base_node.children[0].data == "name" and \
                str(base_node.children[0].children[0]) in ("tag", "coord"):
            return self.tag_component(n, base_node, subs)
        if base_node.data == "name":
            name = str(base_node.children[0])
            if name in DTYPES:
                dims = [self.const_int(s.children[0], "a tile dimension") if s.data == "sub_index"
                        else self._bad_slice(s) for s in subs.children]
                for d, s in zip(dims, subs.children, strict=True):
                    if d <= 0:
                        raise self.err(s, f"tile dimensions must be positive, got {d}")
                return DTypeVal(name, dims)
            if name in self.tensors:
                return self.view(n, name, "global", self.tensors[name].dtype,
                                 [(d, None) for d in self.tensors[name].shape], subs)
            v = self.lookup(name)
            if isinstance(v, SharedVal):
                return self.view(n, name, "shared", v.dtype, [(ir.IConst(d), d) for d in v.shape], subs)
            if isinstance(v, FragVal):
                raise self.err(n, f"fragments cannot be indexed; '{name}' lives in registers across threads")
        raise self.err(n, "only tensors, shared allocations and tag(...)/coord(...) can be indexed")

    def _bad_slice(self, s):
        raise self.err(s, "a tile type takes dimensions, not slices")

    def view(self, n, name, space, dtype, dims, subs) -> ViewVal:
        items = list(subs.children)
        if len(items) < len(dims) and all(c is not None for _, c in dims[len(items):]):
            items += [None] * (len(dims) - len(items))  # sA[s]: the remaining dimensions whole
        if len(items) != len(dims):
            raise self.err(subs, f"'{name}' has {len(dims)} dimension{'s' if len(dims) != 1 else ''} but "
                                 f"{len(items)} {'were' if len(items) != 1 else 'was'} indexed")
        index = []
        for (_dim, const_extent), item in zip(dims, items, strict=True):
            if item is None:
                index.append(ir.Slice(ir.IConst(0), const_extent, self.sp(subs)))
                continue
            if item.data == "sub_index":
                v = self.value(item.children[0])
                if not isinstance(v, IntVal):
                    raise self.err(item, "an index must be an integer expression")
                index.append(ir.Index(v.expr, self.sp(item)))
                continue
            lo_node, hi_node = item.children
            lo = ir.IConst(0) if lo_node is None else self.int_of(lo_node, "a slice start")
            if hi_node is None:
                if const_extent is None:
                    raise self.err(item, f"'{name}' has a symbolic size here; give the slice an explicit "
                                         "end such as i0 : i0 + 64")
                hi = ir.IConst(const_extent)
            else:
                hi = self.int_of(hi_node, "a slice end")
            extent = constant_difference(hi, lo)
            if extent is None:
                raise self.err(item, "a slice must have a constant extent (write it as start : start + N)")
            if extent <= 0:
                raise self.err(item, f"a slice must have a positive extent, got {extent}")
            if const_extent is not None and extent > const_extent:
                raise self.err(item, f"slice of extent {extent} is larger than the dimension ({const_extent})")
            index.append(ir.Slice(lo, extent, self.sp(item)))
        return ViewVal(ir.View(name, space, tuple(index), self.sp(n)), dtype)

    def int_of(self, node, what) -> ir.IExpr:
        v = self.value(node)
        if not isinstance(v, IntVal):
            raise self.err(node, f"{what} must be an integer expression")
        return v.expr

    def tag_component(self, n, call, subs) -> IntVal:
        fname = str(call.children[0].children[0])
        if not self.in_assert:
            raise self.err(n, f"{fname}(...) can only be used in an assertion")
        args, kwargs = self.split_args(call.children[1])
        if len(args) != 1 or kwargs or args[0].data != "name":
            raise self.err(call, f"{fname}(x) takes one fragment")
        frag = self.lookup(str(args[0].children[0]))
        if not isinstance(frag, FragVal):
            raise self.err(args[0], f"{fname}(...) takes a fragment; '{args[0].children[0]}' is not one")
        if len(subs.children) != 1 or subs.children[0].data != "sub_index":
            raise self.err(subs, f"{fname}(x)[i] takes one constant component index")
        comp = self.const_int(subs.children[0].children[0], "the component index")
        self.assert_frags.append(frag.name)
        if fname == "coord":
            if not 0 <= comp < len(frag.type.tile):
                raise self.err(subs, f"coord(...)[{comp}] is out of range for a rank-{len(frag.type.tile)} tile")
            return IntVal(ir.ICoord(frag.name, comp, self.sp(n)), False)
        if comp < 0:
            raise self.err(subs, "tag components are numbered from 0")
        return IntVal(ir.ITag(frag.name, comp, self.sp(n)), False)

    # -- calls -----------------------------------------------------------------------------
    def call(self, n) -> Val:
        fn_node, args_node = n.children
        if fn_node.data != "name":
            raise self.err(fn_node, "only named functions can be called")
        fname = str(fn_node.children[0])
        args, kwargs = self.split_args(args_node)
        if fname in self.tagfns:
            return self.call_tagfn(n, fname, args, kwargs)
        handler = getattr(self, f"call_{fname}", None) if fname != "tagfn" else None
        if fname in UNARY_MATH:
            self.check_kwargs(n, kwargs, ())
            if len(args) != 1:
                raise self.err(n, f"{fname}(x) takes one fragment")
            v = self.value(args[0])
            if not isinstance(v, FragVal):
                raise self.err(args[0], f"{fname}() applies to fragments")
            if not ir.is_float(v.type.dtype):
                raise self.err(args[0], f"{fname}() needs a floating-point fragment, got {v.type.dtype}")
            return self.elementwise(n, UNARY_MATH[fname], [v])
        if fname in REDUCERS:
            return self.reduce(n, REDUCERS[fname], args, kwargs)
        if fname in SHUFFLES:
            return self.shuffle(n, SHUFFLES[fname], args, kwargs)
        if handler is None:
            if fname in ("store", "copy_async", "commit", "wait", "barrier", "grid", "block"):
                raise self.err(n, f"{fname}(...) is a statement and has no value")
            if fname in ("tag", "coord"):
                raise self.err(n, f"{fname}(x) needs a component, {fname}(x)[k], and can only be used in an "
                                  "assertion")
            raise self.err(fn_node, f"unknown function '{fname}'", note=self.suggest(fname, functions=True))
        return handler(n, args, kwargs)

    def call_tagfn(self, n, fname, args, kwargs) -> IntVal:
        fn = self.tagfns[fname]
        if kwargs or len(args) != len(fn.params):
            raise self.err(n, f"tag function '{fname}' takes {len(fn.params)} argument(s)")
        vals = [self.int_of(a, "a tag function argument") for a in args]
        return IntVal(ir.ICall(fname, tuple(vals), self.sp(n)), False)

    def call_cdiv(self, n, args, kwargs):
        return self.int_pair(n, "cdiv", args, kwargs)

    def call_min(self, n, args, kwargs):
        return self.minmax(n, "min", args, kwargs)

    def call_max(self, n, args, kwargs):
        return self.minmax(n, "max", args, kwargs)

    def minmax(self, n, op, args, kwargs):
        vals = [self.value(a) for a in args]
        if len(vals) == 2 and any(isinstance(v, FragVal) for v in vals):
            self.check_kwargs(n, kwargs, ())
            return self.elementwise(n, op, vals, args)
        return self.int_pair(n, op, args, kwargs)

    def int_pair(self, n, op, args, kwargs):
        self.check_kwargs(n, kwargs, ())
        if len(args) != 2:
            raise self.err(n, f"{op}(a, b) takes two arguments")
        a, b = (self.value(x) for x in args)
        if not isinstance(a, IntVal) or not isinstance(b, IntVal):
            raise self.err(n, f"{op}() takes integers here")
        return self.int_bin(n, op, a, b)

    def call_Swizzle(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ())
        if len(args) != 3:
            raise self.err(n, "Swizzle(B, M, S) takes three constants")
        b, m, s = (self.const_int(a, "a swizzle parameter") for a in args)
        if b < 0 or m < 0:
            raise self.err(n, f"Swizzle({b}, {m}, {s}) needs non-negative B and M")
        if abs(s) < b:
            raise self.err(n, f"Swizzle({b}, {m}, {s}) needs |S| >= B, or the xor reads the bits it writes")
        return LayoutVal(Swizzle(b, m, s))

    def call_row_major(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ())
        return LayoutVal(row_major(tuple(self.const_int(a, "a shape") for a in args)))

    def call_col_major(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ())
        return LayoutVal(col_major(tuple(self.const_int(a, "a shape") for a in args)))

    def tile_type(self, node, what: str) -> DTypeVal:
        v = self.value(node)
        if not isinstance(v, DTypeVal) or v.dims is None:
            raise self.err(node, f"{what} takes a tile type such as f32[64, 64]")
        return v

    def call_shared(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ("layout",))
        if len(args) != 1:
            raise self.err(n, "shared(dtype[dims], layout=...) takes one tile type")
        t = self.tile_type(args[0], "shared()")
        shape = tuple(t.dims)
        if "layout" in kwargs:
            lv = self.value(kwargs["layout"][1])
            if not isinstance(lv, LayoutVal) or isinstance(lv.layout, Swizzle):
                raise self.err(kwargs["layout"][1], "layout= takes a layout (optionally composed with a "
                                                    "Swizzle)")
            layout = lv.layout
            inner = layout.inner if isinstance(layout, ComposedLayout) else layout
            modes = tuple(inner.mode(i).size for i in range(inner.rank)) if inner.rank > 1 else (inner.size,)
            if modes != shape:
                raise self.err(kwargs["layout"][1], f"layout {layout} has shape {fmt_shape(modes)} but the "
                                                    f"allocation is {list(shape)}")
            if any(d < 0 and e > 1 for e, d in inner.flat_modes()):
                raise self.err(kwargs["layout"][1], f"layout {layout} has a negative stride: shared offsets "
                                                    "must be non-negative")
        else:
            layout = row_major(shape)
        nbytes = layout.cosize * ir.DTYPE_BYTES[t.dtype]
        if nbytes > 227 * 1024:
            raise self.err(n, f"shared allocation of {nbytes} bytes exceeds the 227 KB a Hopper block can use")
        return SharedVal(t.dtype, shape, layout)

    def call_zeros(self, n, args, kwargs):
        return self.full(n, args, kwargs, 0.0)

    def call_full(self, n, args, kwargs):
        if len(args) != 2:
            raise self.err(n, "full(dtype[dims], value, tv=...) takes a tile type and a value")
        v = self.value(args[1])
        if isinstance(v, IntVal) and isinstance(v.expr, ir.IConst):
            value = float(v.expr.value)
        elif isinstance(v, FloatVal):
            value = v.value
        else:
            raise self.err(args[1], "full()'s value must be a constant")
        return self.full(n, args[:1], kwargs, value)

    def full(self, n, args, kwargs, value):
        self.check_kwargs(n, kwargs, ("tv",))
        if len(args) != 1:
            raise self.err(n, "zeros(dtype[dims], tv=...) takes a tile type")
        t = self.tile_type(args[0], "zeros()")
        tv = self.tv_arg(n, kwargs, tuple(t.dims))
        return self.emit(n, ir.Full(t.dtype, tv, value), ir.FragType(t.dtype, tv))

    def call_load(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ("tv", "mask", "other", "vec"))
        if len(args) != 1:
            raise self.err(n, "load(view, tv=..., mask=...) takes one view")
        src = self.value(args[0])
        if not isinstance(src, ViewVal):
            raise self.err(args[0], "load() takes a view of a tensor or shared allocation")
        tile = src.view.tile
        if not tile:
            raise self.err(args[0], "load() needs a tile with at least one sliced dimension")
        tv = self.tv_arg(n, kwargs, tile)
        mask = self.kw_bool(kwargs, "mask", False)
        if mask and src.view.space == "shared":
            raise self.err(kwargs["mask"][0], "mask= applies to global tensors; shared tiles have constant "
                                              "shapes")
        other = 0.0
        if "other" in kwargs:
            ov = self.value(kwargs["other"][1])
            if isinstance(ov, FloatVal):
                other = ov.value
            elif isinstance(ov, IntVal) and isinstance(ov.expr, ir.IConst):
                other = float(ov.expr.value)
            else:
                raise self.err(kwargs["other"][1], "other= must be a constant")
        vec = None
        if "vec" in kwargs:
            vec = self.const_int(kwargs["vec"][1], "vec")
            nbytes = vec * ir.DTYPE_BYTES[src.dtype]
            if nbytes not in (1, 2, 4, 8, 16) or tv.values % vec:
                raise self.err(kwargs["vec"][1], f"vec={vec} of {src.dtype} ({nbytes} bytes) is not a "
                                                 f"1/2/4/8/16-byte access dividing {tv.values} values")
            if not row_contiguous(tv, vec):
                raise self.err(kwargs["vec"][1], f"vec={vec}: the tv layout {tv.layout} does not give each thread "
                                                 f"runs of {vec} consecutive elements of one tile row")
        return self.emit(n, ir.Load(src.view, tv, mask, other, vec), ir.FragType(src.dtype, tv))

    def call_cast(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ())
        if len(args) != 2:
            raise self.err(n, "cast(fragment, dtype) takes two arguments")
        if args[1].data == "name" and str(args[1].children[0]) not in DTYPES:
            import difflib
            bad = str(args[1].children[0])
            close = difflib.get_close_matches(bad, DTYPES, n=1)
            raise self.err(args[1], f"cast()'s second argument must be a dtype ({', '.join(DTYPES)}), got "
                                    f"'{bad}'", note=f"did you mean '{close[0]}'?" if close else None)
        v, d = self.value(args[0]), self.value(args[1])
        if not isinstance(v, FragVal):
            raise self.err(args[0], "cast() takes a fragment")
        if not isinstance(d, DTypeVal) or d.dims is not None:
            raise self.err(args[1], "cast()'s second argument is a dtype such as bf16")
        return self.emit(n, ir.Cast(v.name, d.dtype), ir.FragType(d.dtype, v.type.coords))

    def reduce(self, n, op, args, kwargs) -> FragVal:
        self.check_kwargs(n, kwargs, ("axis", "scope", "lanes"))
        if len(args) != 1:
            raise self.err(n, f"reduce_{op}(fragment, axis=..., scope=...) takes one fragment")
        v = self.value(args[0])
        if not isinstance(v, FragVal):
            raise self.err(args[0], f"reduce_{op}() takes a fragment")
        rank = len(v.type.tile)
        if "axis" not in kwargs:
            raise self.err(n, f"reduce_{op}() needs axis=")
        axis = self.const_int(kwargs["axis"][1], "axis")
        if not 0 <= axis < rank:
            raise self.err(kwargs["axis"][1], f"axis {axis} is out of range for a rank-{rank} tile")
        scope = "thread"
        if "scope" in kwargs:
            s = self.keyword_value(kwargs["scope"][1], ("thread", "warp"))
            if not isinstance(s, NameVal) or s.name not in ("thread", "warp"):
                raise self.err(kwargs["scope"][1], "scope= is thread or warp (block reductions go through "
                                                   "shared memory)")
            scope = s.name
        lanes = 0
        if scope == "warp":
            if "lanes" not in kwargs:
                raise self.err(n, "a warp reduction needs lanes=: the lane bits to combine, e.g. 0b11111")
            lanes = self.const_int(kwargs["lanes"][1], "lanes")
            if not 0 < lanes < 32:
                raise self.err(kwargs["lanes"][1], f"lanes= is a mask of lane bits in 1..31, got {lanes}")
        elif "lanes" in kwargs:
            raise self.err(kwargs["lanes"][0], "lanes= applies to scope=warp")
        coords = v.type.coords
        typ = ir.FragType(v.type.dtype, ir.Projected(coords, axis))
        return self.emit(n, ir.Reduce(op, v.name, axis, scope, lanes), typ)

    def shuffle(self, n, mode, args, kwargs) -> FragVal:
        self.check_kwargs(n, kwargs, ())
        if len(args) != 2:
            raise self.err(n, f"shfl_{mode}(fragment, lane) takes two arguments")
        v, lane = self.value(args[0]), self.value(args[1])
        if not isinstance(v, FragVal):
            raise self.err(args[0], "shuffles move fragments")
        if not isinstance(lane, IntVal):
            raise self.err(args[1], "the lane argument must be an integer")
        if isinstance(lane.expr, ir.IConst) and not 0 <= lane.expr.value < 32:
            raise self.err(args[1], f"lane argument {lane.expr.value} is outside 0..31")
        if ir.DTYPE_BYTES[v.type.dtype] > 4:
            raise self.err(args[0], f"shuffles move 32-bit values; {v.type.dtype} is not supported")
        return self.emit(n, ir.Shuffle(v.name, mode, lane.expr), v.type)

    def call_mma(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ("atom",))
        if len(args) != 3:
            raise self.err(n, "mma(a, b, c, atom=...) takes three fragments")
        a, b, c = (self.value(x) for x in args)
        for v, node in zip((a, b, c), args, strict=True):
            if not isinstance(v, FragVal):
                raise self.err(node, "mma() operands must be fragments")
        atom = "fma"
        if "atom" in kwargs:
            av = self.keyword_value(kwargs["atom"][1], ir.MMA_ATOMS)
            if not isinstance(av, NameVal) or av.name not in ir.MMA_ATOMS:
                what = f" '{av.name}'" if isinstance(av, NameVal) else ""
                raise self.err(kwargs["atom"][1], f"unknown mma atom{what}; known: {', '.join(ir.MMA_ATOMS)}")
            atom = av.name
        am, an, ak, pairs = ir.MMA_ATOMS[atom]
        if a.type.dtype != b.type.dtype:
            raise self.err(n, f"mma operands a and b differ in dtype ({a.type.dtype}, {b.type.dtype})")
        if (a.type.dtype, c.type.dtype) not in pairs:
            ok = ", ".join(f"{x}->{y}" for x, y in pairs)
            raise self.err(kwargs["atom"][1] if "atom" in kwargs else n,
                           f"mma atom {atom} does not take {a.type.dtype} operands with a {c.type.dtype} "
                           f"accumulator (it takes {ok})")
        ta, tb, tc = a.type.tile, b.type.tile, c.type.tile
        if len(ta) != 2 or len(tb) != 2 or len(tc) != 2:
            raise self.err(n, "mma() operands must be 2-D tiles")
        if ta[1] != tb[0] or ta[0] != tc[0] or tb[1] != tc[1]:
            raise self.err(n, f"mma shapes do not match: a {list(ta)}, b {list(tb)}, c {list(tc)} "
                              "(need a [M, K], b [K, N], c [M, N])")
        if atom == "fma":
            self.check_thread_local_mma(n, a.type, b.type, c.type)
        else:
            if tc[0] % am or tc[1] % an or ta[1] % ak:
                raise self.err(n, f"mma atom {atom} ({am}x{an}x{ak}) does not tile a {list(ta)} x {list(tb)} "
                                  "product")
        return self.emit(n, ir.Mma(a.name, b.name, c.name, atom), c.type)

    def check_thread_local_mma(self, n, ta: ir.FragType, tb: ir.FragType, tc: ir.FragType):
        """SIMT mma: each thread needs every a[i, :] and b[:, j] for the c[i, j] it holds."""
        K = ta.tile[1]
        ca, cb, cc = ta.coords.coord_table(), tb.coords.coord_table(), tc.coords.coord_table()
        for t in range(tc.threads):
            rows = {}
            for i, k in ca[t]:
                rows.setdefault(int(i), set()).add(int(k))
            cols = {}
            for k, j in cb[t]:
                cols.setdefault(int(j), set()).add(int(k))
            for i, j in cc[t]:
                have_a = rows.get(int(i), set())
                have_b = cols.get(int(j), set())
                if len(have_a) != K or len(have_b) != K:
                    missing = sorted(set(range(K)) - (have_a if len(have_a) != K else have_b))
                    which = f"a[{i}, {missing[0]}]" if len(have_a) != K else f"b[{missing[0]}, {j}]"
                    raise self.err(n, f"thread {t} holds c[{i}, {j}] but not {which}: with atom=fma every "
                                      "thread must hold the rows of a and columns of b its c values need")

    def call_transpose(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ())
        if len(args) != 1:
            raise self.err(n, "transpose(fragment) takes one 2-D fragment")
        v = self.value(args[0])
        if not isinstance(v, FragVal) or len(v.type.tile) != 2:
            raise self.err(args[0], "transpose() takes a 2-D fragment")
        return self.emit(n, ir.Relabel(v.name), ir.FragType(v.type.dtype, ir.Transposed(v.type.coords)))

    def call_reshape(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ())
        if len(args) < 2:
            raise self.err(n, "reshape(fragment, d0, d1, ...) takes a fragment and the new tile shape")
        v = self.value(args[0])
        if not isinstance(v, FragVal):
            raise self.err(args[0], "reshape() takes a fragment")
        dims = tuple(self.const_int(a, "a tile dimension") for a in args[1:])
        if math.prod(dims) != math.prod(v.type.tile) or min(dims) <= 0:
            raise self.err(n, f"cannot reshape a {list(v.type.tile)} tile to {list(dims)}")
        return self.emit(n, ir.Relabel(v.name), ir.FragType(v.type.dtype, ir.Reshaped(v.type.coords, dims)))

    def call_ldmatrix(self, n, args, kwargs):
        self.check_kwargs(n, kwargs, ("trans",))
        if len(args) != 2:
            raise self.err(n, "ldmatrix(shared_view, x1|x2|x4, trans=False) takes a view and a count")
        src, cnt = self.value(args[0]), self.keyword_value(args[1], ("x1", "x2", "x4"))
        if not isinstance(src, ViewVal) or src.view.space != "shared":
            raise self.err(args[0], "ldmatrix reads shared memory: pass a shared view")
        if not isinstance(cnt, NameVal) or cnt.name not in ("x1", "x2", "x4"):
            raise self.err(args[1], "ldmatrix's count is x1, x2 or x4")
        if ir.DTYPE_BYTES[src.dtype] != 2:
            raise self.err(args[0], f"ldmatrix moves 16-bit elements (f16, bf16); '{src.view.base}' is "
                                    f"{src.dtype}")
        count = int(cnt.name[1])
        trans = self.kw_bool(kwargs, "trans", False)
        rows, cols = {1: (8, 8), 2: (16, 8), 4: (16, 16)}[count]
        if src.view.tile != (rows, cols):
            raise self.err(args[0], f"ldmatrix .x{count} reads a [{rows}, {cols}] tile per warp, the view is "
                                    f"{list(src.view.tile)}")
        tv = ldmatrix_tv(count, trans, self.block)
        return self.emit(n, ir.Ldmatrix(src.view, count, trans, tv), ir.FragType(src.dtype, tv))


class SharedVal(Val):
    def __init__(self, dtype, shape, layout):
        self.dtype, self.shape, self.layout = dtype, shape, layout


def ldmatrix_tv(count: int, trans: bool, block: int) -> ir.TVLayout:
    """The fragment layout ldmatrix gives each warp (PTX ISA, "Warp-level matrix load"): lane l
    holds row l // 4 and columns 2 * (l % 4) + {0, 1} of each 8x8 matrix; matrices are ordered
    (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15).
    With .trans each lane holds the transposed positions. Every warp repeats the pattern."""
    warps = block // 32
    rows, cols = {1: (8, 8), 2: (16, 8), 4: (16, 16)}[count]
    if not trans:
        tshape, tstride = (4, 8, warps), (2, cols, 0)
        vshape, vstride = (2,) + ((2,) if count >= 2 else ()) + ((2,) if count == 4 else ()), \
            (1,) + ((8 * cols,) if count >= 2 else ()) + ((8,) if count == 4 else ())
    else:
        tshape, tstride = (4, 8, warps), (2 * cols, 1, 0)
        vshape, vstride = (2,) + ((2,) if count >= 2 else ()) + ((2,) if count == 4 else ()), \
            (cols,) + ((8 * cols,) if count >= 2 else ()) + ((8,) if count == 4 else ())
    return ir.TVLayout(Layout((tshape, vshape), (tstride, vstride)), (rows, cols))


def row_contiguous(tv: ir.TVLayout, width: int) -> bool:
    """Whether every thread's values come in runs of `width` consecutive elements of one tile row
    (what one vector access of `width` elements can move)."""
    if width == 1:
        return True
    flat = tv.flat_table()
    if flat.shape[1] % width:
        return False
    runs = flat.reshape(flat.shape[0], -1, width)
    row = tv.tile[-1] if tv.tile else 1
    steps_ok = bool(np.all(np.diff(runs, axis=-1) == 1))
    same_row = bool(np.all(runs[..., 0] // row == runs[..., -1] // row))
    return steps_ok and same_row


def fmt_shape(t) -> str:
    return "(" + ", ".join(str(x) for x in t) + ")"


def const_of(v: IntVal):
    return v.expr.value if isinstance(v.expr, ir.IConst) else None


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, to rank did-you-mean suggestions."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def fold(op: str, a: int, b: int):
    if op in ("//", "%", "cdiv") and b == 0:
        return None
    if op == "<<":  # only the operator asked for is computed (a << b with a huge b is costly)
        return a << b if b >= 0 else 0
    return {
        "+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0, "%": a % b if b else 0,
        ">>": a >> b if b >= 0 else 0, "&": a & b, "|": a | b, "^": a ^ b,
        "min": min(a, b), "max": max(a, b), "cdiv": -(-a // b) if b else 0, "==": int(a == b),
        "!=": int(a != b), "<": int(a < b), "<=": int(a <= b), ">": int(a > b), ">=": int(a >= b),
        "and": int(bool(a) and bool(b)), "or": int(bool(a) or bool(b)),
    }[op]


def build_tagfn(n: Tree, filename: str) -> ir.TagFn:
    name_tok, names, expr = n.children
    params = tuple(str(x) for x in names.children) if names is not None else ()
    b = KernelBuilder.__new__(KernelBuilder)
    KernelBuilder.__init__(b, n, filename, {}, {})
    for i, p in enumerate(params):
        if p in params[:i]:
            raise b.err(names.children[i], f"duplicate parameter '{p}' of tag function '{name_tok}'")
    b.scopes = [{p: IntVal(ir.IVar(p), True) for p in params}]
    v = b.value(expr)
    if not isinstance(v, IntVal):
        raise b.err(expr, "a tag function computes an integer")
    return ir.TagFn(str(name_tok), params, v.expr, span_of(filename, n))
