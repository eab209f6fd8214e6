"""Parse tree -> typed IR: the builder's state, its diagnostics and its names.

One `KernelBuilder` instantiates one kernel: compile-time parameters are substituted first, so
every layout and tile shape is concrete and the checks are exact. The walk itself lives with the
concepts: `header` (signature, launch, tags), `control` (statements, loops, branches),
`expressions` and `integers`, `views`, `layouts`, and the builtins of `memory`, `compute` and
`warp`, which `calls` dispatches through the declarations of `argus_verify.instructions`.

Names bound to compile-time values (layouts, swizzles, shape tuples, integers assigned once to a
constant) are recorded with their binding, so an error at a use can say where the value came from.
"""

from __future__ import annotations

from collections.abc import Mapping

from lark import Tree

from argus_verify import ir
from argus_verify.diagnostics import ArgusTypeError, Span
from argus_verify.frontend import control, expressions, header
from argus_verify.frontend.values import RESERVED, FragVal, IntVal, LayoutVal, Val, describe, int_tuple, span_of

_LITERALS = ("layout", "compose", "tuple", "tuple1")  # layout and shape literals


class KernelBuilder:
    def __init__(self, tree: Tree, filename: str, tagfns: dict, overrides: Mapping[str, int]):
        self.tree = tree
        self.file = filename
        # the file's tag functions: built (ir.TagFn), or their definitions, built once the kernel's
        # compile-time parameters are known (a definition may use them)
        self.tagfns: dict[str, ir.TagFn] = {k: v for k, v in tagfns.items() if isinstance(v, ir.TagFn)}
        self.tagfn_defs: list[Tree] = [v for v in tagfns.values() if not isinstance(v, ir.TagFn)]
        self.overrides = dict(overrides)
        self.scopes: list[dict] = [{}]
        self.sizes: list[str] = []
        self.consts: dict[str, int] = {}
        self.params: list = []
        self.tensors: dict[str, ir.TensorParam] = {}
        self.shared: dict[str, ir.SharedAlloc] = {}
        self.block: int | None = None
        self.grid: tuple | None = None
        self.cluster: tuple | None = None  # from cluster(...)
        self.requires: list = []
        self.policies: list = []
        self.tags: list[ir.TagDecl] = []
        self.contracts: list[ir.Contract] = []
        self.tmp = 0
        self.out: list = []  # statement list being filled
        self.loop_vars: set[str] = set()
        self.divergent = 0  # depth of if-statements whose condition differs between threads
        self.role: tuple | None = None  # the warpgroups of the role being built (argus_verify/roles.py)
        self.role_scope_depth = 0
        self.in_assert = False
        self.assert_frags: list[str] = []
        self.bound_at: dict[str, tuple[Span, Val]] = {}  # compile-time names: where and to what
        self.assignments: dict[str, list] = {}  # every assignment of each name: (node, inside an if)

    def fragment_threads(self) -> int:
        """The threads a fragment is spread over: the role's warpgroups inside a role, else the block."""
        if self.role is None:
            return self.block
        return len(self.role) * 128

    def build(self) -> ir.Kernel:
        name_tok, suite = header.declare(self)
        for d in self.tagfn_defs:
            fn = self.tagfn(d)
            self.tagfns[fn.name] = fn
        stmts = suite.children
        header.launch(self, stmts)
        self.assignments = control.assignments_of(stmts)
        body = control.statements(self, stmts)
        return header.kernel_ir(self, name_tok, body)

    # -- trial builds ----------------------------------------------------------------------
    def checkpoint(self) -> dict:
        """The builder's state, to build a statement a second way after a failed first try.
        Containers are restored in place: callers hold bound methods such as `b.out.append`."""
        state = {}
        for k, v in vars(self).items():
            if k == "scopes":
                state[k] = (v, [(s, dict(s)) for s in v])
            elif isinstance(v, (list, dict, set)):
                state[k] = (v, v.copy())
            else:
                state[k] = (v, None)
        return state

    def restore(self, state: dict) -> None:
        for k, (obj, contents) in state.items():
            if k == "scopes":
                for scope, saved in contents:
                    scope.clear()
                    scope.update(saved)
                obj[:] = [scope for scope, _ in contents]
            elif isinstance(obj, list):
                obj[:] = contents
            elif isinstance(obj, (dict, set)):
                obj.clear()
                obj.update(contents)
            setattr(self, k, obj)

    # -- diagnostics -----------------------------------------------------------------------
    def sp(self, node) -> Span:
        return span_of(self.file, node)

    def err(self, node, msg: str, note: str | None = None) -> ArgusTypeError:
        """An error at `node`. Without a note of its own, an error at a compile-time name (or a
        layout literal using some) notes where they were bound."""
        if note is None and node is not None:
            note = self.binding_note(node)
        return ArgusTypeError(msg, self.sp(node) if node is not None else None, note)

    def binding_note(self, node) -> str | None:
        notes = [self.bound_note(name) for name in dict.fromkeys(_names_in(node)) if name in self.bound_at]
        return "; ".join(notes) or None

    def bound_note(self, name: str) -> str:
        span, val = self.bound_at[name]
        return f"'{name}' is bound at {span} to {describe(val)}"

    def runtime_note(self, node) -> str | None:
        """Why a name used where a constant is needed is not one."""
        if not (isinstance(node, Tree) and node.data == "name"):
            return None
        places = self.assignments.get(str(node.children[0]), [])
        if not places or str(node.children[0]) in self.bound_at:
            return None
        where = ", ".join(str(self.sp(a)) for a, _ in places)
        return (f"'{node.children[0]}' is assigned at {where}: a name is a compile-time constant when it is "
                "assigned once, outside an if, to a constant")

    # -- names -----------------------------------------------------------------------------
    def lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def bind(self, name: str, val: Val, node):
        """Bind `name` in the innermost scope; a fragment keeps its type and layout, a name keeps
        its kind, and a compile-time name its value."""
        self.check_assignable(name, node)
        if name in self.bound_at:
            self.check_rebinding(name, val, node)
            return
        old = self.lookup(name)
        if isinstance(old, FragVal) and isinstance(val, FragVal):
            self.check_same_fragment(name, old.type, val.type, node)
        elif old is not None and type(old) is not type(val) and not (
                isinstance(old, IntVal) and isinstance(val, IntVal)):
            raise self.err(node, f"'{name}' changes kind on reassignment")
        self.scopes[-1][name] = val

    def bind_compile_time(self, name: str, val: Val, node):
        """Bind a layout, shape tuple or constant integer once; later uses read it from here."""
        if name in self.bound_at or self.lookup(name) is not None:
            self.bind(name, val, node)
            return
        self.check_assignable(name, node)
        self.bound_at[name] = (self.sp(node), val)
        self.scopes[-1][name] = val

    def check_assignable(self, name: str, node):
        if name in RESERVED:
            raise self.err(node, f"'{name}' is a built-in name and cannot be assigned")
        if name in self.loop_vars:
            raise self.err(node, f"cannot assign to loop variable '{name}'")
        if name in self.tensors or name in self.consts or name in self.sizes:
            raise self.err(node, f"cannot assign to '{name}': it is a kernel parameter or size")

    def check_rebinding(self, name: str, val: Val, node):
        _, first = self.bound_at[name]
        same = (isinstance(val, LayoutVal) and isinstance(first, LayoutVal) and val.layout == first.layout) or (
            not isinstance(val, LayoutVal) and not isinstance(first, LayoutVal)
            and int_tuple(val) is not None and int_tuple(val) == int_tuple(first))
        if not same:
            raise self.err(node, f"'{name}' is a compile-time value and cannot be rebound to another value",
                           note=self.bound_note(name))

    def check_same_fragment(self, name: str, old: ir.FragType, new: ir.FragType, node):
        if (old.dtype, old.tile, old.threads, old.values) != (new.dtype, new.tile, new.threads, new.values):
            raise self.err(node, f"'{name}' was {old.dtype}{list(old.tile)} with {old.values} values per thread; "
                                 f"cannot reassign it to {new.dtype}{list(new.tile)} with {new.values}")
        if old.coords != new.coords:
            # one name, one register layout: every stage may then read a fragment's coordinates from
            # its type wherever it is used
            raise self.err(node, f"'{name}' was distributed as <{old.coords}>; cannot reassign it with another "
                                 f"thread-value layout <{new.coords}>", note="give the new value another name")

    def fresh(self) -> str:
        self.tmp += 1
        return f"_t{self.tmp}"

    def emit(self, node, op, typ: ir.FragType) -> FragVal:
        """Assign fragment operation `op` to a new temporary."""
        name = self.fresh()
        self.out.append(ir.Assign(name, op, typ, self.sp(node)))
        return FragVal(name, typ)

    # -- values ----------------------------------------------------------------------------
    def value(self, node) -> Val:
        return expressions.evaluate(self, node)

    def const_int(self, node, what: str) -> int:
        v = self.value(node)
        if isinstance(v, IntVal) and v.const is not None:
            return v.const
        raise self.err(node, f"{what} must be a compile-time constant", note=self.runtime_note(node))

    def const_tuple(self, node, what: str):
        """A (nested) tuple of compile-time integers, or one integer."""
        t = int_tuple(self.value(node))
        if t is None:
            # point at the innermost item that is not a constant
            while isinstance(node, Tree) and node.data in ("tuple", "tuple1"):
                node = next(c for c in node.children if int_tuple(self.value(c)) is None)
            raise self.err(node, f"{what} must be made of compile-time constants", note=self.runtime_note(node))
        return t

    def tagfn(self, n: Tree) -> ir.TagFn:
        return build_tagfn(n, self.file, self.consts)

    def int_of(self, node, what: str) -> ir.IExpr:
        v = self.value(node)
        if not isinstance(v, IntVal):
            raise self.err(node, f"{what} must be an integer expression")
        return v.expr


def _names_in(node) -> list[str]:
    """The names an error at `node` is about: the name itself, or those a layout literal uses."""
    if not isinstance(node, Tree):
        return []
    if node.data == "name":
        return [str(node.children[0])]
    if node.data in _LITERALS:
        return [str(t.children[0]) for t in node.iter_subtrees_topdown() if t.data == "name"]
    return []


def build_tagfn(n: Tree, filename: str, consts: Mapping[str, int] | None = None) -> ir.TagFn:
    """`tagfn name(params) = expr`: a pure integer function of its parameters and of the kernel's
    compile-time parameters `consts` (folded in as constants)."""
    name_tok, names, expr = n.children
    params = tuple(str(x) for x in names.children) if names is not None else ()
    b = KernelBuilder(n, filename, {}, {})
    b.consts = dict(consts or {})
    for i, p in enumerate(params):
        if p in params[:i]:
            raise b.err(names.children[i], f"duplicate parameter '{p}' of tag function '{name_tok}'")
        if p in b.consts:
            raise b.err(names.children[i], f"parameter '{p}' of tag function '{name_tok}' has the name of a "
                                           f"compile-time parameter of the kernel; rename it")
    b.scopes = [{p: IntVal(ir.IVar(p), True) for p in params}]
    v = b.value(expr)
    if not isinstance(v, IntVal):
        raise b.err(expr, "a tag function computes an integer")
    return ir.TagFn(str(name_tok), params, v.expr, span_of(filename, n))

