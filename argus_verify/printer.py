"""Readable text and JSON forms of the IR (`argus ir`)."""

from __future__ import annotations

import attrs

from argus_verify import ir
from argus_verify.semantics import INT_OPS
from argus_verify.visitor import Visitor


class _IntExprs(Visitor, families=("int_exprs",)):
    """An integer expression as source text; `parent` is the precedence of the enclosing operator."""

    def visit_IConst(self, e: ir.IConst, parent: int) -> str:
        return str(e.value)

    def visit_IVar(self, e: ir.IVar, parent: int) -> str:
        return e.name

    def visit_ISpecial(self, e: ir.ISpecial, parent: int) -> str:
        return e.which

    def visit_IBin(self, e: ir.IBin, parent: int) -> str:
        p = INT_OPS[e.op].precedence
        if not p:  # min, max, cdiv: written as calls
            return f"{e.op}({fmt_iexpr(e.a)}, {fmt_iexpr(e.b)})"
        s = f"{fmt_iexpr(e.a, p)} {e.op} {fmt_iexpr(e.b, p + 1)}"
        return f"({s})" if p < parent else s

    def visit_IUn(self, e: ir.IUn, parent: int) -> str:
        return f"-{fmt_iexpr(e.a, 11)}" if e.op == "-" else f"not {fmt_iexpr(e.a, 3)}"

    def visit_ISelect(self, e: ir.ISelect, parent: int) -> str:
        return f"({fmt_iexpr(e.a)} if {fmt_iexpr(e.cond)} else {fmt_iexpr(e.b)})"

    def visit_ITag(self, e: ir.ITag, parent: int) -> str:
        return f"tag({e.frag})[{e.component}]"

    def visit_ICoord(self, e: ir.ICoord, parent: int) -> str:
        return f"coord({e.frag})[{e.axis}]"

    def visit_ICall(self, e: ir.ICall, parent: int) -> str:
        return f"{e.fn}({', '.join(fmt_iexpr(a) for a in e.args)})"


_INT_EXPRS = _IntExprs()


def fmt_iexpr(e: ir.IExpr, parent: int = 0) -> str:
    return _INT_EXPRS.visit(e, parent)


def fmt_view(v: ir.View) -> str:
    items = []
    for it in v.index:
        if isinstance(it, ir.Slice):
            start = fmt_iexpr(it.start)
            items.append(f"{start} : {start} + {it.extent}" if start != "0" else f"0 : {it.extent}")
        else:
            items.append(fmt_iexpr(it.index))
    return f"{v.base}[{', '.join(items)}]"


def hopper_stmt_source(s) -> str:
    """An mbarrier operation, fence, TMA load or wgmma group as the builtin call that makes it."""
    if isinstance(s, ir.MbarrierOp):
        name = {"init": "mbarrier_init", "arrive": "mbarrier_arrive", "expect_tx": "mbarrier_expect_tx",
                "wait": "mbarrier_wait"}[s.kind]
        arg = f", {fmt_iexpr(s.value)}" if s.value is not None else ""
        return f"{name}({fmt_view(s.bar)}{arg})"
    if isinstance(s, ir.Fence):
        return {"proxy_async": "fence_proxy_async()", "mbarrier_init": "fence_mbarrier_init()",
                "wgmma": "wgmma_fence()"}[s.kind]
    if isinstance(s, ir.SetMaxNReg):
        return f"setmaxnreg({s.count})"
    if isinstance(s, ir.TmaLoad):
        return f"tma_load({fmt_view(s.dst)}, {fmt_view(s.src)}, {fmt_view(s.bar)})"
    if isinstance(s, ir.TmaStore):
        return f"tma_store({fmt_view(s.dst)}, {fmt_view(s.src)})"
    if isinstance(s, ir.BulkGroup):
        if s.kind == "commit":
            return "bulk_commit()"
        return f"bulk_wait({s.pending}{'' if s.read else ', writes=True'})"
    if isinstance(s, ir.TmaLoadMulticast):
        return f"tma_load_multicast({fmt_view(s.dst)}, {fmt_view(s.src)}, {fmt_view(s.bar)}, {fmt_iexpr(s.mask)})"
    if isinstance(s, ir.MbarrierArriveCluster):
        return f"mbarrier_arrive_cluster({fmt_view(s.bar)}, {fmt_iexpr(s.cta)})"
    if isinstance(s, ir.ClusterSync):
        return "cluster_sync()"
    return "wgmma_commit()" if s.kind == "commit" else f"wgmma_wait({s.pending})"


def fmt_operand(o) -> str:
    if isinstance(o, str):
        return o
    if isinstance(o, ir.FConst):
        return repr(o.value)
    return fmt_iexpr(o.expr)


class _Ops(Visitor, families=("fragment_ops",)):
    """A fragment operation as source text."""

    def visit_Load(self, op: ir.Load) -> str:
        extra = (", mask=True" if op.mask else "") + (f", other={op.other}" if op.other else "")
        extra += f", vec={op.vec}" if op.vec else ""
        return f"load({fmt_view(op.src)}, tv={op.tv}{extra})"

    def visit_Ldmatrix(self, op: ir.Ldmatrix) -> str:
        return f"ldmatrix({fmt_view(op.src)}, x{op.count}, rows={op.rows}{', trans=True' if op.trans else ''})"

    def visit_Full(self, op: ir.Full) -> str:
        return f"full({op.dtype}, {op.value}, tv={op.tv})"

    def visit_Elementwise(self, op: ir.Elementwise) -> str:
        if len(op.args) == 2 and op.op in "+-*/":
            return f"{fmt_operand(op.args[0])} {op.op} {fmt_operand(op.args[1])}"
        return f"{op.op}({', '.join(fmt_operand(a) for a in op.args)})"

    def visit_Cast(self, op: ir.Cast) -> str:
        return f"cast({op.arg}, {op.dtype})"

    def visit_Reduce(self, op: ir.Reduce) -> str:
        lanes = f", lanes={op.lanes:#07b}" if op.scope == "warp" else ""
        return f"reduce_{op.op}({op.arg}, axis={op.axis}, scope={op.scope}{lanes})"

    def visit_Shuffle(self, op: ir.Shuffle) -> str:
        return f"shfl_{op.mode}({op.arg}, {fmt_iexpr(op.lane_arg)})"

    def visit_Mma(self, op: ir.Mma) -> str:
        return f"mma({op.a}, {op.b}, {op.c}, atom={op.atom})"

    def visit_Relabel(self, op: ir.Relabel) -> str:
        return f"relabel({op.arg})"

    def visit_Wgmma(self, op: ir.Wgmma) -> str:
        return f"wgmma({fmt_view(op.a)}, {fmt_view(op.b)}, {op.c})"


_OPS = _Ops()


def fmt_op(op) -> str:
    return _OPS.visit(op)


class _Statements(Visitor, families=("statements",)):
    """A statement as lines of text (nested blocks indented), each after its source line number."""

    def visit_Let(self, s: ir.Let, pad: str, indent: int) -> list[str]:
        return [f"{pad}{s.name}: int = {fmt_iexpr(s.value)}"]

    def visit_Assign(self, s: ir.Assign, pad: str, indent: int) -> list[str]:
        t = s.type
        return [f"{pad}{s.name}: {t.dtype}{list(t.tile)} x{t.values}/thread <{t.coords}> = {fmt_op(s.op)}"]

    def visit_SharedAlloc(self, s: ir.SharedAlloc, pad: str, indent: int) -> list[str]:
        return [f"{pad}{s.name} = shared({s.dtype}{list(s.shape)}, layout={s.layout})  "
                f"# {s.size_elems * ir.DTYPE_BYTES[s.dtype]} bytes"]

    def visit_Store(self, s: ir.Store, pad: str, indent: int) -> list[str]:
        extra = (", mask=True" if s.mask else "") + (f", where={fmt_iexpr(s.where)}" if s.where else "")
        return [f"{pad}store({fmt_view(s.dst)}, {s.value}{extra})"]

    def visit_Stmatrix(self, s: ir.Stmatrix, pad: str, indent: int) -> list[str]:
        return [f"{pad}stmatrix({fmt_view(s.dst)}, {s.value}, x{s.count}, rows={s.rows}"
                f"{', trans=True' if s.trans else ''})"]

    def visit_CopyAsync(self, s: ir.CopyAsync, pad: str, indent: int) -> list[str]:
        return [f"{pad}copy_async({fmt_view(s.dst)}, {fmt_view(s.src)}, tv={s.tv}, vec={s.vec}"
                f"{', mask=True' if s.mask else ''})"]

    def visit_Commit(self, s: ir.Commit, pad: str, indent: int) -> list[str]:
        return [f"{pad}commit()"]

    def visit_Wait(self, s: ir.Wait, pad: str, indent: int) -> list[str]:
        return [f"{pad}wait({s.pending})"]

    def visit_Barrier(self, s: ir.Barrier, pad: str, indent: int) -> list[str]:
        return [f"{pad}barrier()"]

    def visit_MbarrierOp(self, s: ir.MbarrierOp, pad: str, indent: int) -> list[str]:
        return [pad + hopper_stmt_source(s)]

    visit_Fence = visit_TmaLoad = visit_WgmmaGroup = visit_TmaStore = visit_BulkGroup = visit_MbarrierOp
    visit_SetMaxNReg = visit_MbarrierOp
    visit_TmaLoadMulticast = visit_MbarrierArriveCluster = visit_ClusterSync = visit_MbarrierOp

    def visit_Assert(self, s: ir.Assert, pad: str, indent: int) -> list[str]:
        return [f"{pad}assert {fmt_iexpr(s.cond)}"]

    def visit_For(self, s: ir.For, pad: str, indent: int) -> list[str]:
        step = f", {s.step}" if s.step != 1 else ""
        unroll = f", unroll={s.unroll}" if s.unroll else ""
        out = [f"{pad}for {s.var} in range({fmt_iexpr(s.start)}, {fmt_iexpr(s.stop)}{step}{unroll}):"]
        for b in s.body:
            out += fmt_stmt(b, indent + 1)
        return out

    def visit_If(self, s: ir.If, pad: str, indent: int) -> list[str]:
        out = [f"{pad}if {fmt_iexpr(s.cond)}:"]
        for b in s.then:
            out += fmt_stmt(b, indent + 1)
        if s.orelse:
            out.append(f"     {pad}else:")
            for b in s.orelse:
                out += fmt_stmt(b, indent + 1)
        return out


_STATEMENTS = _Statements()


def fmt_stmt(s, indent: int = 1) -> list[str]:
    pad = "    " * indent
    line = f"{s.span.line:4d}" if s.span.line else "    "
    first, *rest = _STATEMENTS.visit(s, pad, indent)
    return [f"{line} {first}", *rest]


def format_kernel(k: ir.Kernel) -> str:
    params, outputs = [], []
    for p in k.params:
        if isinstance(p, ir.TensorParam):
            dims = ", ".join(fmt_iexpr(d) for d in p.shape)
            (outputs if p.output else params).append(f"{p.name}: {p.dtype}[{dims}]")
        else:
            params.append(f"{p.name}: {p.dtype}")
    consts = ", ".join(f"{n}={v}" for n, v in k.consts)
    outs = outputs[0] if len(outputs) == 1 else f"({', '.join(outputs)})"
    lines = [f"kernel {k.name}<{consts}>({', '.join(params)}) -> {outs}",
             f"  sizes: {', '.join(k.sizes) or '-'}",
             f"  grid: ({', '.join(fmt_iexpr(g) for g in k.grid)})   block: {k.block} threads "
             f"({k.block // 32} warps)"]
    for r in k.requires:
        lines.append(f"  requires {fmt_iexpr(r)}")
    for t in k.tags:
        lines.append(f"  {fmt_tag_decl(t)}")
    for f in k.tagfns:
        lines.append(f"  tagfn {f.name}({', '.join(f.params)}) = {fmt_iexpr(f.body)}")
    for c in k.contracts:
        lines.append(f"  contract {c.tensor}[{', '.join(c.index_vars)}] = {fmt_cexpr(c.expr)}")
    for p in k.tensors:
        implied = ir.derived_tag(k, p.name) if k.declared_tag(p.name) is None else None
        if implied is not None:  # a dimension read only at reduction variables prints as `_`
            names = tuple("_" if n.startswith("*") else n for n in implied.index_vars)
            lines.append(f"  {fmt_tag_decl(attrs.evolve(implied, index_vars=names))}   # implied by the contract")
    lines.append("  body:")
    for s in k.body:
        lines += fmt_stmt(s)
    return "\n".join(lines)


def kernel_json(k: ir.Kernel) -> dict:
    def stmt(s) -> dict:
        d: dict = {"stmt": type(s).__name__, "line": s.span.line, "text": fmt_stmt(s, 0)[0].strip()}
        if isinstance(s, ir.Assign):
            d.update(name=s.name, dtype=s.type.dtype, tile=list(s.type.tile), values=s.type.values,
                     coords=str(s.type.coords), op=type(s.op).__name__)
        if isinstance(s, ir.For):
            d["body"] = [stmt(b) for b in s.body]
        if isinstance(s, ir.If):
            d["then"] = [stmt(b) for b in s.then]
            d["else"] = [stmt(b) for b in s.orelse]
        return d

    return {
        "kernel": k.name, "file": k.source_file, "consts": dict(k.consts), "sizes": list(k.sizes),
        "block": k.block, "grid": [fmt_iexpr(g) for g in k.grid],
        "params": [{"name": p.name, "dtype": p.dtype, "output": getattr(p, "output", False),
                    "shape": [fmt_iexpr(d) for d in getattr(p, "shape", ())]} for p in k.params],
        "requires": [fmt_iexpr(r) for r in k.requires],
        "contracts": [{"tensor": c.tensor, "index": list(c.index_vars), "expr": fmt_cexpr(c.expr)}
                      for c in k.contracts],
        "tags": [{"tensor": t.tensor, "index": list(t.index_vars),
                  "components": [_fmt_tag_component(c) for c in t.components], "once": t.once} for t in k.tags],
        "body": [stmt(s) for s in k.body],
    }


def _fmt_tag_component(c) -> str:
    return "*" if c is None else fmt_iexpr(c)


def fmt_tag_decl(t: ir.TagDecl) -> str:
    """`tag x[i, j] = (i, j) once`, with `*` for a component that matches any value."""
    comps = ", ".join(_fmt_tag_component(c) for c in t.components) + ("," if len(t.components) == 1 else "")
    return f"tag {t.tensor}[{', '.join(t.index_vars)}] = ({comps}){' once' if t.once else ''}"


def fmt_cexpr(e, parent_prec: int = 0) -> str:
    """A contract expression in the language's own syntax (fully parenthesised where needed)."""
    if isinstance(e, ir.CElem):
        return f"{e.tensor}[{', '.join(e.indices)}]"
    if isinstance(e, ir.CReduce):
        return f"{e.op}({fmt_cexpr(e.body)} for {e.var})"
    if isinstance(e, ir.CUn):
        return f"-{fmt_cexpr(e.a, 3)}" if e.op == "neg" else f"{e.op}({fmt_cexpr(e.a)})"
    if isinstance(e, ir.CBin):
        if e.op.isalpha():
            return f"{e.op}({fmt_cexpr(e.a)}, {fmt_cexpr(e.b)})"
        prec = 1 if e.op in "+-" else 2
        text = f"{fmt_cexpr(e.a, prec)} {e.op} {fmt_cexpr(e.b, prec + 1)}"
        return f"({text})" if prec < parent_prec else text
    if isinstance(e, ir.CScalar):
        return e.name
    if isinstance(e, ir.CConst):
        return repr(e.value) if e.value == e.value and abs(e.value) != float("inf") else (
            "nan" if e.value != e.value else ("inf" if e.value > 0 else "-inf"))
    raise TypeError(f"not a contract expression: {e!r}")
