"""The kernel header: signature and compile-time parameters, the launch (grid, block, policy),
requirements, tags, and the launch's built-in values (thread_id, block_id.x, ...)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lark import Tree

from argus_verify import ir
from argus_verify.diagnostics import ArgusTypeError
from argus_verify.frontend.arguments import CallSite, call_site
from argus_verify.frontend.values import RESERVED, FloatVal, IntVal
from argus_verify.instructions import BUILTINS, LAUNCH

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder


def declare(b: KernelBuilder):
    """Read the signature; returns the kernel's name token and its body."""
    children = list(b.tree.children)
    if len(children) == 5:
        children.insert(1, None)  # `const_params?` leaves no placeholder when there is no <...>
    name_tok, const_params, params, _arrow, outputs, suite = children
    b.kname = str(name_tok)
    if const_params is not None:
        for cp in const_params.children:
            _const_param(b, *cp.children)
    unknown = sorted(set(b.overrides) - set(b.consts))
    if unknown:
        known = ", ".join(b.consts) or "none"
        raise ArgusTypeError(f"kernel '{b.kname}' has no compile-time parameter '{unknown[0]}' (it has: {known})",
                             b.sp(name_tok))
    for p in params.children if params is not None else ():
        _param(b, p, output=False)
    if outputs is not None:
        plist = outputs.children[0].children if outputs.children[0].data == "params" else outputs.children
        for p in plist:
            _param(b, p, output=True)
    return name_tok, suite


def _const_param(b: KernelBuilder, name_tok, default):
    name = str(name_tok)
    if name in b.consts:
        raise b.err(name_tok, f"duplicate compile-time parameter '{name}'")
    if name in b.overrides:
        b.consts[name] = int(b.overrides[name])
    else:
        b.consts[name] = b.const_int(default, "a compile-time parameter's default")


def _param(b: KernelBuilder, p, output: bool):
    name_tok, typ = p.children
    name = str(name_tok)
    if name in b.tensors or name in b.consts or any(q.name == name for q in b.params):
        raise b.err(name_tok, f"duplicate parameter '{name}'")
    if name in RESERVED:
        raise b.err(name_tok, f"'{name}' is a built-in name and cannot be a parameter")
    dtype = str(typ.children[0])
    if typ.data == "scalar_type":
        if output:
            raise b.err(name_tok, "an output must be a tensor")
        b.params.append(ir.ScalarParam(name, dtype, b.sp(name_tok)))
        return
    dims = [_dimension(b, d) for d in typ.children[1].children]
    tp = ir.TensorParam(name, dtype, tuple(dims), output, b.sp(name_tok))
    b.tensors[name] = tp
    b.params.append(tp)


def _dimension(b: KernelBuilder, d) -> ir.IExpr:
    """A tensor dimension: a size name (symbolic until run time) or a positive constant."""
    if isinstance(d, Tree) and d.data == "name" and str(d.children[0]) not in b.consts:
        dn = str(d.children[0])
        if dn in RESERVED or any(q.name == dn for q in b.params):
            raise b.err(d, f"'{dn}' cannot be a size name")
        if dn not in b.sizes:
            b.sizes.append(dn)
        return ir.IVar(dn, b.sp(d))
    v = b.const_int(d, "a tensor dimension")
    if v <= 0:
        raise b.err(d, f"tensor dimension must be positive, got {v}")
    return ir.IConst(v, b.sp(d))


def launch(b: KernelBuilder, stmts):
    """grid(...), block(...) and policy(...) at the top level, read before anything else: the block
    size is needed before anything distributes work over threads."""
    for s in stmts:
        call = s.children[0] if isinstance(s, Tree) and s.data == "expr_stmt" else None
        if call is None or call.data != "call" or call.children[0].data != "name":
            continue
        decl = BUILTINS.get(str(call.children[0].children[0]))
        if decl is not None and decl.produces == LAUNCH:
            LAUNCH_HANDLERS[decl.name](call_site(b, decl, call, call.children[1]))
    for name, given in (("block", b.block), ("grid", b.grid)):
        if given is None:
            nested = _nested_call(b.tree, name)  # grid(...) inside an if or a loop: say so, there
            if nested is not None:
                raise b.err(nested, f"{name}(...) belongs at the top level of the kernel, not inside a loop or if")
            raise b.err(b.tree.children[0], f"kernel '{b.kname}' has no {name}(...) statement")


def _nested_call(tree: Tree, name: str):
    for t in tree.iter_subtrees_topdown():
        if t.data == "call" and isinstance(t.children[0], Tree) and t.children[0].data == "name" \
                and str(t.children[0].children[0]) == name:
            return t
    return None


def block(site: CallSite):
    b = site.b
    if b.block is not None:
        raise b.err(site.node, "block(...) given twice")
    n = b.const_int(site.args[0], "the block size")
    if n <= 0 or n > 1024 or n % 32:
        raise b.err(site.args[0], f"block size must be a multiple of 32 between 32 and 1024, got {n}")
    b.block = n


def grid(site: CallSite):
    b = site.b
    if b.grid is not None:
        raise b.err(site.node, "grid(...) given twice")
    dims = []
    for a in site.args:
        v = b.value(a)
        if not isinstance(v, IntVal) or not launch_uniform(b, v.expr):
            raise b.err(a, "a grid extent must be an integer expression of sizes and constants")
        dims.append(v.expr)
    b.grid = tuple(dims) + tuple(ir.IConst(1) for _ in range(3 - len(dims)))


MAX_CLUSTER = 8  # blocks per cluster a kernel may ask for portably (CUDA's limit without opting in)


def cluster(site: CallSite):
    b = site.b
    if b.cluster is not None:
        raise b.err(site.node, "cluster(...) given twice")
    dims = [b.const_int(a, "a cluster extent") for a in site.args]
    for a, d in zip(site.args, dims, strict=True):
        if d < 1:
            raise b.err(a, f"a cluster extent must be at least 1, got {d}")
    dims += [1] * (3 - len(dims))
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER:
        raise b.err(site.node, f"a cluster holds at most {MAX_CLUSTER} blocks, got {dims[0] * dims[1] * dims[2]}")
    b.cluster = tuple(dims)


_POLICY_LIMITS = {"min_blocks_per_sm": 32, "maxnreg": 255}  # the integer policies; prefetch is a flag


def policy(site: CallSite):
    """policy(min_blocks_per_sm=2, maxnreg=128, prefetch=False): code-generation choices."""
    b = site.b
    for key in site.kwargs:
        if any(name == key for name, _ in b.policies):
            raise b.err(site.key(key), f"policy '{key}' given twice")
        if key in _POLICY_LIMITS:
            value, limit = site.const(key, f"policy {key}"), _POLICY_LIMITS[key]
            if not 1 <= value <= limit:
                raise b.err(site.arg(key), f"policy {key} must be between 1 and {limit}, got {value}")
        else:
            value = site.flag(key)
        b.policies.append((key, value))


LAUNCH_HANDLERS = {"grid": grid, "block": block, "policy": policy, "cluster": cluster}


def launch_uniform(b: KernelBuilder, e: ir.IExpr) -> bool:
    """Whether `e` is fixed at launch: made of sizes, integer parameters and constants."""
    for sub in ir.walk_iexpr(e):
        if isinstance(sub, ir.ISpecial | ir.ITag | ir.ICoord):
            return False
        if isinstance(sub, ir.IVar) and sub.name not in b.sizes and not _is_int_param(b, sub.name):
            return False
    return True


def _is_int_param(b: KernelBuilder, name: str) -> bool:
    return any(isinstance(p, ir.ScalarParam) and p.name == name and not ir.is_float(p.dtype) for p in b.params)


def requires(b: KernelBuilder, n: Tree):
    v = b.value(n.children[0])
    if not isinstance(v, IntVal) or not launch_uniform(b, v.expr):
        raise b.err(n.children[0], "'requires' takes a condition on sizes and constants")
    b.requires.append(v.expr)


def tag_decl(b: KernelBuilder, n: Tree):
    """`tag A[i, k] = (i, k) [once]`: the tags of an input's elements, or an output's contract."""
    name_tok, names, expr, once = n.children
    name = str(name_tok)
    tp = b.tensors.get(name)
    if tp is None:
        raise b.err(name_tok, f"'tag' names unknown tensor '{name}'")
    if any(t.tensor == name for t in b.tags):
        raise b.err(name_tok, f"tensor '{name}' is tagged twice")
    idx = index_variables(b, names, "tag", name, tp.rank)
    if once is not None and not tp.output:
        raise b.err(once, "'once' applies to outputs only")
    b.scopes.append({i: IntVal(ir.IVar(i), True) for i in idx})
    try:
        items = expr.children if expr.data in ("tuple", "tuple1") else [expr]
        comps = [_tag_component(b, c, tp.output) for c in items]
    finally:
        b.scopes.pop()
    if all(c is None for c in comps):
        raise b.err(expr, "a tag needs a component that is not '*' (leave the tensor untagged instead)")
    b.tags.append(ir.TagDecl(name, tuple(idx), tuple(comps), once is not None, b.sp(n)))


def index_variables(b: KernelBuilder, names, kind: str, tensor: str, rank: int) -> list:
    """`[i, j]` of a `kind` ("tag", "contract") of `tensor`: distinct names, one per dimension."""
    idx = [str(x) for x in names.children]
    for i, x in enumerate(idx):
        if x in idx[:i]:
            raise b.err(names.children[i], f"index variable '{x}' appears twice in the {kind} of '{tensor}'")
    if len(idx) != rank:
        what = "tensor" if kind == "tag" else "output"
        raise b.err(names, f"{what} '{tensor}' has rank {rank} but the {kind} binds {len(idx)} "
                           f"index variable{'s' if len(idx) != 1 else ''}")
    return idx


def _tag_component(b: KernelBuilder, c, output: bool) -> ir.IExpr | None:
    """One component of a tag: an integer expression, or None for `*` (an input's component that
    matches any value, as a reduced one does: `tag bias[j] = (*, j)` broadcasts along the rows)."""
    if isinstance(c, Tree) and c.data == "star":
        if output:
            raise b.err(c, "an output's tag names every component; '*' is for inputs (a broadcast vector)")
        return None
    v = b.value(c)
    if not isinstance(v, IntVal):
        raise b.err(c, "a tag component must be an integer expression")
    return v.expr


def kernel_ir(b: KernelBuilder, name_tok, body: list) -> ir.Kernel:
    return ir.Kernel(
        name=b.kname, params=tuple(b.params), consts=tuple(b.consts.items()), sizes=tuple(b.sizes),
        requires=tuple(b.requires), grid=b.grid, block=b.block, tags=tuple(b.tags), contracts=tuple(b.contracts),
        tagfns=tuple(b.tagfns.values()),
        body=tuple(body), source_file=b.file, span=b.sp(name_tok), policies=tuple(b.policies),
        cluster=b.cluster or (1, 1, 1))


# -- the launch's built-in values: handlers take the builder, the name's node and the component
# (`block_id.x`: "x"; None for a bare name)

def thread_index(b: KernelBuilder, node, component: str | None) -> IntVal:
    name = _bare(b, node, component)
    return IntVal(ir.ISpecial(name, b.sp(node)), False)


def grid_index(b: KernelBuilder, node, component: str | None) -> IntVal:
    name = str((node.children[0] if component is not None else node).children[0])
    if component is None:
        raise b.err(node, f"'{name}' needs a component: {name}.x, {name}.y or {name}.z")
    if component not in ("x", "y", "z"):
        raise b.err(node, f"{name} has components x, y and z, not '{component}'")
    return IntVal(ir.ISpecial(f"{name}.{component}", b.sp(node)), True)


def cluster_rank(b: KernelBuilder, node, component: str | None) -> IntVal:
    """%cluster_ctarank as what it is for a cluster launch (clusters tile the grid in order):
    block_id.x % cx + cx * (block_id.y % cy) + cx * cy * (block_id.z % cz)."""
    _bare(b, node, component)
    shape = b.cluster
    if shape is None:
        raise b.err(node, "cluster_rank needs a cluster(...) shape in the kernel's header")
    sp = b.sp(node)
    rank, scale = None, 1
    for axis, extent in zip("xyz", shape, strict=True):
        if extent == 1:
            continue
        term = ir.IBin("%", ir.ISpecial(f"block_id.{axis}", sp), ir.IConst(extent, sp), sp)
        if scale != 1:
            term = ir.IBin("*", term, ir.IConst(scale, sp), sp)
        rank = term if rank is None else ir.IBin("+", rank, term, sp)
        scale *= extent
    return IntVal(rank if rank is not None else ir.IConst(0, sp), True)


def float_constant(b: KernelBuilder, node, component: str | None) -> FloatVal:
    return FloatVal(math.inf if _bare(b, node, component) == "inf" else math.nan)


def _bare(b: KernelBuilder, node, component: str | None) -> str:
    if component is not None:
        raise b.err(node, f"unknown attribute '{component}'")
    return str(node.children[0])


def warpgroup_index(b: KernelBuilder, node, component: str | None) -> IntVal:
    """warpgroup_id is thread_id // 128 (argus_verify/roles.py reads role splits off it)."""
    _bare(b, node, component)
    return IntVal(ir.IBin("//", ir.ISpecial("thread_id", b.sp(node)), ir.IConst(128), b.sp(node)), False)


VALUE_HANDLERS = {"thread_id": thread_index, "warp_id": thread_index, "lane_id": thread_index,
                  "warpgroup_id": warpgroup_index,
                  "block_id": grid_index, "num_blocks": grid_index, "inf": float_constant, "nan": float_constant,
                  "cluster_rank": cluster_rank}
