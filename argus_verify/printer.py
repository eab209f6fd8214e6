"""Readable text and JSON forms of the IR (`argus ir`)."""

from __future__ import annotations

from argus_verify import ir

_PREC = {"or": 1, "and": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4, "|": 5, "^": 6, "&": 7,
         "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "//": 10, "%": 10}


def fmt_iexpr(e: ir.IExpr, parent: int = 0) -> str:
    if isinstance(e, ir.IConst):
        return str(e.value)
    if isinstance(e, ir.IVar):
        return e.name
    if isinstance(e, ir.ISpecial):
        return e.which
    if isinstance(e, ir.IBin):
        if e.op in ("min", "max", "cdiv"):
            return f"{e.op}({fmt_iexpr(e.a)}, {fmt_iexpr(e.b)})"
        p = _PREC[e.op]
        s = f"{fmt_iexpr(e.a, p)} {e.op} {fmt_iexpr(e.b, p + 1)}"
        return f"({s})" if p < parent else s
    if isinstance(e, ir.IUn):
        return f"-{fmt_iexpr(e.a, 11)}" if e.op == "-" else f"not {fmt_iexpr(e.a, 3)}"
    if isinstance(e, ir.ISelect):
        return f"({fmt_iexpr(e.a)} if {fmt_iexpr(e.cond)} else {fmt_iexpr(e.b)})"
    if isinstance(e, ir.ITag):
        return f"tag({e.frag})[{e.component}]"
    if isinstance(e, ir.ICoord):
        return f"coord({e.frag})[{e.axis}]"
    if isinstance(e, ir.ICall):
        return f"{e.fn}({', '.join(fmt_iexpr(a) for a in e.args)})"
    return repr(e)


def fmt_view(v: ir.View) -> str:
    items = []
    for it in v.index:
        if isinstance(it, ir.Slice):
            start = fmt_iexpr(it.start)
            items.append(f"{start} : {start} + {it.extent}" if start != "0" else f"0 : {it.extent}")
        else:
            items.append(fmt_iexpr(it.index))
    return f"{v.base}[{', '.join(items)}]"


def fmt_operand(o) -> str:
    if isinstance(o, str):
        return o
    if isinstance(o, ir.FConst):
        return repr(o.value)
    return fmt_iexpr(o.expr)


def fmt_op(op) -> str:
    if isinstance(op, ir.Load):
        extra = (", mask=True" if op.mask else "") + (f", other={op.other}" if op.other else "")
        extra += f", vec={op.vec}" if op.vec else ""
        return f"load({fmt_view(op.src)}, tv={op.tv}{extra})"
    if isinstance(op, ir.Full):
        return f"full({op.dtype}, {op.value}, tv={op.tv})"
    if isinstance(op, ir.Elementwise):
        if len(op.args) == 2 and op.op in "+-*/":
            return f"{fmt_operand(op.args[0])} {op.op} {fmt_operand(op.args[1])}"
        return f"{op.op}({', '.join(fmt_operand(a) for a in op.args)})"
    if isinstance(op, ir.Cast):
        return f"cast({op.arg}, {op.dtype})"
    if isinstance(op, ir.Reduce):
        lanes = f", lanes={op.lanes:#07b}" if op.scope == "warp" else ""
        return f"reduce_{op.op}({op.arg}, axis={op.axis}, scope={op.scope}{lanes})"
    if isinstance(op, ir.Shuffle):
        return f"shfl_{op.mode}({op.arg}, {fmt_iexpr(op.lane_arg)})"
    if isinstance(op, ir.Mma):
        return f"mma({op.a}, {op.b}, {op.c}, atom={op.atom})"
    if isinstance(op, ir.Ldmatrix):
        return f"ldmatrix({fmt_view(op.src)}, x{op.count}, trans={op.trans})"
    if isinstance(op, ir.Relabel):
        return f"relabel({op.arg})"
    return repr(op)


def fmt_stmt(s, indent: int = 1) -> list[str]:
    pad = "    " * indent
    line = f"{s.span.line:4d}" if s.span.line else "    "
    if isinstance(s, ir.Let):
        return [f"{line} {pad}{s.name}: int = {fmt_iexpr(s.value)}"]
    if isinstance(s, ir.Assign):
        t = s.type
        return [f"{line} {pad}{s.name}: {t.dtype}{list(t.tile)} x{t.values}/thread "
                f"<{t.coords}> = {fmt_op(s.op)}"]
    if isinstance(s, ir.SharedAlloc):
        return [f"{line} {pad}{s.name} = shared({s.dtype}{list(s.shape)}, layout={s.layout})  "
                f"# {s.size_elems * ir.DTYPE_BYTES[s.dtype]} bytes"]
    if isinstance(s, ir.Store):
        extra = (", mask=True" if s.mask else "") + (f", where={fmt_iexpr(s.where)}" if s.where else "")
        return [f"{line} {pad}store({fmt_view(s.dst)}, {s.value}{extra})"]
    if isinstance(s, ir.CopyAsync):
        return [f"{line} {pad}copy_async({fmt_view(s.dst)}, {fmt_view(s.src)}, tv={s.tv}, vec={s.vec}"
                f"{', mask=True' if s.mask else ''})"]
    if isinstance(s, ir.Commit):
        return [f"{line} {pad}commit()"]
    if isinstance(s, ir.Wait):
        return [f"{line} {pad}wait({s.pending})"]
    if isinstance(s, ir.Barrier):
        return [f"{line} {pad}barrier()"]
    if isinstance(s, ir.Assert):
        return [f"{line} {pad}assert {fmt_iexpr(s.cond)}"]
    if isinstance(s, ir.For):
        step = f", {s.step}" if s.step != 1 else ""
        unroll = f", unroll={s.unroll}" if s.unroll else ""
        out = [f"{line} {pad}for {s.var} in range({fmt_iexpr(s.start)}, {fmt_iexpr(s.stop)}{step}{unroll}):"]
        for b in s.body:
            out += fmt_stmt(b, indent + 1)
        return out
    if isinstance(s, ir.If):
        out = [f"{line} {pad}if {fmt_iexpr(s.cond)}:"]
        for b in s.then:
            out += fmt_stmt(b, indent + 1)
        if s.orelse:
            out.append(f"     {pad}else:")
            for b in s.orelse:
                out += fmt_stmt(b, indent + 1)
        return out
    return [f"{line} {pad}{s!r}"]


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
        comps = ", ".join(fmt_iexpr(c) for c in t.components) + ("," if len(t.components) == 1 else "")
        lines.append(f"  tag {t.tensor}[{', '.join(t.index_vars)}] = ({comps}){' once' if t.once else ''}")
    for f in k.tagfns:
        lines.append(f"  tagfn {f.name}({', '.join(f.params)}) = {fmt_iexpr(f.body)}")
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
        "tags": [{"tensor": t.tensor, "index": list(t.index_vars),
                  "components": [fmt_iexpr(c) for c in t.components], "once": t.once} for t in k.tags],
        "body": [stmt(s) for s in k.body],
    }
