"""The instantiated IR written back as `.arg` source (`argus ir --source`): every layout, tile and
constant concrete, every temporary named, in forms `argus check` accepts; the fragment types the
IR infers are comments. Checking the text again gives the same kernel (tests/test_ir_source.py).
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.layout import row_major
from argus_verify.printer import fmt_cexpr, fmt_iexpr, fmt_operand, fmt_tag_decl, hopper_stmt_source
from argus_verify.visitor import Visitor

__all__ = ["format_source"]


def _tile(dtype: str, dims) -> str:
    return f"{dtype}[{', '.join(str(d) for d in dims)}]"


def fmt_view(v: ir.View) -> str:
    """A view with each slice as `start : start + extent`, the start in parentheses unless atomic
    (so that `c ^ r : c ^ r + 1` is not read as `c ^ (r + 1)`)."""
    items = []
    for it in v.index:
        if isinstance(it, ir.Slice):
            start = fmt_iexpr(it.start, 100)
            items.append(f"{start} : {start} + {it.extent}")
        else:
            items.append(fmt_iexpr(it.index))
    return f"{v.base}[{', '.join(items)}]"


def _float(v: float) -> str:
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


class _Ops(Visitor, families=("fragment_ops",)):
    """A fragment operation as source, given the type of the value it defines."""

    def visit_Load(self, op: ir.Load, t: ir.FragType) -> str:
        extra = (", mask=True" if op.mask else "") + (f", other={_float(op.other)}" if op.other else "")
        extra += f", vec={op.vec}" if op.vec else ""
        return f"load({fmt_view(op.src)}, tv={op.tv}{extra})"

    def visit_Full(self, op: ir.Full, t: ir.FragType) -> str:
        return f"full({_tile(op.dtype, op.tv.tile)}, {_float(op.value)}, tv={op.tv})"

    def visit_Elementwise(self, op: ir.Elementwise, t: ir.FragType) -> str:
        args = [_float(a.value) if isinstance(a, ir.FConst) else fmt_operand(a) for a in op.args]
        if len(args) == 2 and op.op in ("+", "-", "*", "/"):
            return f"{args[0]} {op.op} {args[1]}"
        return f"{op.op}({', '.join(args)})"

    def visit_Cast(self, op: ir.Cast, t: ir.FragType) -> str:
        return f"cast({op.arg}, {op.dtype})"

    def visit_Reduce(self, op: ir.Reduce, t: ir.FragType) -> str:
        lanes = f", lanes={op.lanes:#07b}" if op.scope == "warp" else ""
        return f"reduce_{op.op}({op.arg}, axis={op.axis}, scope={op.scope}{lanes})"

    def visit_Shuffle(self, op: ir.Shuffle, t: ir.FragType) -> str:
        return f"shfl_{op.mode}({op.arg}, {fmt_iexpr(op.lane_arg)})"

    def visit_Mma(self, op: ir.Mma, t: ir.FragType) -> str:
        return f"mma({op.a}, {op.b}, {op.c}, atom={op.atom})"

    def visit_Ldmatrix(self, op: ir.Ldmatrix, t: ir.FragType) -> str:
        trans = ", trans=True" if op.trans else ""
        return f"ldmatrix({fmt_view(op.src)}, x{op.count}, rows={op.rows}{trans})"

    def visit_Wgmma(self, op: ir.Wgmma, t: ir.FragType) -> str:
        return f"wgmma({fmt_view(op.a)}, {fmt_view(op.b)}, {op.c})"

    def visit_Relabel(self, op: ir.Relabel, t: ir.FragType) -> str:
        if isinstance(t.coords, ir.Transposed):
            return f"transpose({op.arg})"
        return f"reshape({op.arg}, {', '.join(str(d) for d in t.tile)})"


_OPS = _Ops()


class _Statements(Visitor, families=("statements",)):
    def visit_Let(self, s: ir.Let, pad: str) -> list[str]:
        return [f"{pad}{s.name} = {fmt_iexpr(s.value)}"]

    def visit_Assign(self, s: ir.Assign, pad: str) -> list[str]:
        t = s.type
        return [f"{pad}{s.name} = {_OPS.visit(s.op, t)}  # {_tile(t.dtype, t.tile)}, {t.values} per thread"]

    def visit_SharedAlloc(self, s: ir.SharedAlloc, pad: str) -> list[str]:
        # the default layout is left implicit: written out, a rank-1 one would read back as a 1-tuple
        given = "" if s.layout == row_major(tuple(s.shape)) else f", layout={s.layout}"
        return [f"{pad}{s.name} = shared({_tile(s.dtype, s.shape)}{given})"]

    def visit_Store(self, s: ir.Store, pad: str) -> list[str]:
        extra = (", mask=True" if s.mask else "") + (f", where={fmt_iexpr(s.where)}" if s.where is not None else "")
        return [f"{pad}store({fmt_view(s.dst)}, {s.value}{extra})"]

    def visit_Stmatrix(self, s: ir.Stmatrix, pad: str) -> list[str]:
        trans = ", trans=True" if s.trans else ""
        return [f"{pad}stmatrix({fmt_view(s.dst)}, {s.value}, x{s.count}, rows={s.rows}{trans})"]

    def visit_CopyAsync(self, s: ir.CopyAsync, pad: str) -> list[str]:
        return [f"{pad}copy_async({fmt_view(s.dst)}, {fmt_view(s.src)}, tv={s.tv}, vec={s.vec}"
                f"{', mask=True' if s.mask else ''})"]

    def visit_Commit(self, s: ir.Commit, pad: str) -> list[str]:
        return [f"{pad}commit()"]

    def visit_Wait(self, s: ir.Wait, pad: str) -> list[str]:
        return [f"{pad}wait({s.pending})"]

    def visit_Barrier(self, s: ir.Barrier, pad: str) -> list[str]:
        return [f"{pad}barrier()"]

    def visit_MbarrierOp(self, s: ir.MbarrierOp, pad: str) -> list[str]:
        return [pad + hopper_stmt_source(s)]

    visit_Fence = visit_TmaLoad = visit_WgmmaGroup = visit_TmaStore = visit_BulkGroup = visit_MbarrierOp
    visit_SetMaxNReg = visit_MbarrierOp
    visit_TmaLoadMulticast = visit_MbarrierArriveCluster = visit_ClusterSync = visit_MbarrierOp

    def visit_Assert(self, s: ir.Assert, pad: str) -> list[str]:
        return [f"{pad}assert {fmt_iexpr(s.cond)}"]

    def visit_For(self, s: ir.For, pad: str) -> list[str]:
        step = f", {s.step}" if s.step != 1 else ""
        unroll = f", unroll={s.unroll}" if s.unroll else ""
        out = [f"{pad}for {s.var} in range({fmt_iexpr(s.start)}, {fmt_iexpr(s.stop)}{step}{unroll}):"]
        return out + _block(s.body, pad + "    ")

    def visit_If(self, s: ir.If, pad: str) -> list[str]:
        out = [f"{pad}if {fmt_iexpr(s.cond)}:", *_block(s.then, pad + "    ")]
        if s.orelse:
            out += [f"{pad}else:", *_block(s.orelse, pad + "    ")]
        return out


_STATEMENTS = _Statements()


def _block(body, pad: str) -> list[str]:
    out = [line for s in body for line in _STATEMENTS.visit(s, pad)]
    return out or [f"{pad}pass"]


def format_source(k: ir.Kernel) -> str:
    """`k` as `.arg` source text."""
    params, outputs = [], []
    for p in k.params:
        if isinstance(p, ir.TensorParam):
            (outputs if p.output else params).append(f"{p.name}: {_tile(p.dtype, [fmt_iexpr(d) for d in p.shape])}")
        else:
            params.append(f"{p.name}: {p.dtype}")
    consts = f"<{', '.join(f'{n}={v}' for n, v in k.consts)}>" if k.consts else ""
    outs = "" if not outputs else f" -> {outputs[0]}" if len(outputs) == 1 else f" -> ({', '.join(outputs)})"
    lines = [f"# {k.name} from {k.source_file}, instantiated (argus ir --source)"]
    for f in k.tagfns:
        lines.append(f"tagfn {f.name}({', '.join(f.params)}) = {fmt_iexpr(f.body)}")
    lines.append(f"kernel {k.name}{consts}({', '.join(params)}){outs}:")
    pad = "    "
    lines += [f"{pad}requires {fmt_iexpr(r)}" for r in k.requires]
    grid = list(k.grid)
    while len(grid) > 1 and isinstance(grid[-1], ir.IConst) and grid[-1].value == 1:
        grid.pop()
    lines.append(f"{pad}grid({', '.join(fmt_iexpr(g) for g in grid)})")
    lines.append(f"{pad}block({k.block})")
    if ir.uses_cluster(k):
        lines.append(f"{pad}cluster({', '.join(str(c) for c in k.cluster)})")
    if k.policies:
        lines.append(f"{pad}policy({', '.join(f'{n}={v!r}' for n, v in k.policies)})")
    for t in k.tags:
        lines.append(f"{pad}{fmt_tag_decl(t)}")
    for c in k.contracts:
        lines.append(f"{pad}contract {c.tensor}[{', '.join(c.index_vars)}] = {fmt_cexpr(c.expr)}")
    lines += _block(k.body, pad)
    return "\n".join(lines) + "\n"
