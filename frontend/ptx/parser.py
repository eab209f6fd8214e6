"""Parse PTX text (the subset in ptx.lark) into flat per-entry instruction lists.

The result is close to the text: an `Entry` with its parameters, shared variables and a list of
`Line`s (labels and instructions, each with its PTX line and the `.loc` in force). Control flow is
recovered by lift.py.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import lark

from argus_verify import thread_ir as T
from argus_verify.diagnostics import ArgusSyntaxError, Span

_GRAMMAR = Path(__file__).with_name("ptx.lark").read_text()
_PARSER: lark.Lark | None = None


def _parser() -> lark.Lark:
    global _PARSER
    if _PARSER is None:
        _PARSER = lark.Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=False)
    return _PARSER


@attrs.define
class Instr:
    opcode: str
    operands: list
    guard: tuple | None  # (Reg, negated)
    loc: T.Loc


@attrs.define
class Label:
    name: str
    ptx_line: int


@attrs.define
class Entry:
    name: str
    params: list
    shared: list
    regs: dict
    lines: list
    ptx_line: int
    is_kernel: bool = True
    has_body: bool = True


@attrs.define
class Module:
    entries: list
    files: dict  # .file index -> path
    shared: list  # module-level .shared variables


def _tok(t) -> str:
    return str(t)


def _int(text: str) -> int:
    text = text.rstrip("U")
    return int(text, 0)


def _operand(tree):
    if isinstance(tree, lark.Token):
        return T.Sym(str(tree))
    d = tree.data
    ch = tree.children
    if d == "reg_or_pair":
        regs = [_reg_or_special(str(c)) for c in ch]
        return regs[0] if len(regs) == 1 else ("pair", regs[0], regs[1])
    if d == "neg_reg":
        return ("not", _reg_or_special(str(ch[0])))
    if d == "imm":
        text = str(ch[0])
        if text[:2].lower() in ("0f", "0d") and len(text) > 4:
            return T.Imm(text, is_float=True)
        if "." in text:
            return T.Imm(text, is_float=True)
        return T.Imm(_int(text))
    if d == "address":
        base, off = None, 0
        for c in ch:
            if c.data == "addr_base":
                name = str(c.children[0])
                base = _reg_or_special(name) if name.startswith("%") else T.Sym(name)
            elif c.data == "addr_off":
                off = _int(str(c.children[-1]))
                if len(c.children) == 2:  # MINUS INT
                    off = -off
        return T.Addr(base, off)
    if d == "vector":
        return ("vec", [_operand(c) for c in ch])
    if d == "symbol":
        return T.Sym(str(ch[0]))
    if d == "sink":
        return ("sink",)
    raise ValueError(d)


def _reg_or_special(name: str):
    special = name[1:]
    base = special.split(".")[0]
    if base in ("tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "smid", "nsmid", "gridid",
                "clock", "clock64", "lanemask_eq", "lanemask_lt", "lanemask_le", "lanemask_gt", "lanemask_ge",
                "globaltimer", "dynamic_smem_size", "total_smem_size", "cluster_ctaid", "cluster_nctaid",
                "clusterid", "nclusterid", "cluster_ctarank", "cluster_nctarank", "is_explicit_cluster",
                "envreg0", "aggr_smem_size"):
        return T.Special(special)
    return T.Reg(name)


def _qual_words(quals) -> list[str]:
    out = []
    for q in quals:
        out.extend(str(c) for c in q.children)
    return out


def parse_ptx(text: str, filename: str) -> Module:
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as e:
        line, col = getattr(e, "line", 0) or 0, getattr(e, "column", 0) or 0
        got = ""
        tok = getattr(e, "token", None)
        if tok is not None:
            got = f" (at '{tok}')"
        src = text.splitlines()[line - 1].strip() if 0 < line <= len(text.splitlines()) else ""
        what = " ".join(src.split()[:2])[:60] or "end of file"
        raise ArgusSyntaxError(f"not supported: `{what}` at line {line}{got}: the audit's PTX grammar does not "
                               "read it", Span(filename, line, col)) from None
    lines_text = text.splitlines()
    files: dict[int, str] = {}
    entries = []
    module_shared = []
    for item in tree.children:
        if item.data == "file_dir":
            files[int(str(item.children[0]))] = str(item.children[1]).strip('"')
        elif item.data == "module_var":
            decl = item.children[-1]
            sv = _shared_var(decl)
            if sv is not None:
                module_shared.append(sv)
        elif item.data in ("entry", "func"):
            entries.append(_entry(item, lines_text))
    return Module(entries, files, module_shared)


def _shared_var(decl) -> T.SharedVar | None:
    ch = decl.children
    if str(ch[0]) != ".shared":
        return None
    words, align, name, dims = [], 1, None, []
    for c in ch[1:]:
        if isinstance(c, lark.Token):
            name = str(c)
        elif c.data == "qual":
            ws = [str(x) for x in c.children]
            if ws[0] == ".align":
                align = int(ws[1])
            else:
                words.extend(ws)
        elif c.data == "array":
            dims.append(int(str(c.children[0])) if c.children else None)
    elem = 1
    for w in words:
        if w[1:] in ("b8", "u8", "s8"):
            elem = 1
        elif w[1:] in ("b16", "u16", "s16", "f16", "bf16"):
            elem = 2
        elif w[1:] in ("b32", "u32", "s32", "f32"):
            elem = 4
        elif w[1:] in ("b64", "u64", "s64", "f64"):
            elem = 8
    extern = any(d is None for d in dims)
    size = elem
    for d in dims:
        size *= d or 0
    return T.SharedVar(name, 0 if extern else size, align, extern=extern)


def _entry(item, lines_text) -> Entry:
    ch = item.children
    is_kernel = item.data == "entry"
    name = None
    params = []
    for c in ch:
        if isinstance(c, lark.Token) and c.type == "NAME" and name is None:
            name = str(c)
        elif isinstance(c, lark.Tree) and c.data == "param":
            quals = [x for x in c.children if isinstance(x, lark.Tree) and x.data == "qual"]
            pname = next(str(x) for x in c.children if isinstance(x, lark.Token))
            words = [w for w in _qual_words(quals) if not w.startswith(".align") and not w.isdigit()]
            ptype = next((w[1:] for w in words if w[1:] not in ("ptr", "global", "shared", "const", "local")),
                         "b64")
            params.append(T.Param(pname, ptype))
    has_body = any(isinstance(c, lark.Tree) and c.data not in ("param", "perf") for c in ch)
    ent = Entry(name, params, [], {}, [], item.meta.line if hasattr(item, "meta") else 0, is_kernel, has_body)
    state = {"loc": None}
    _body(ch, ent, state)
    return ent


def _body(children, ent: Entry, state) -> None:
    for c in children:
        if not isinstance(c, lark.Tree):
            continue
        d = c.data
        if d == "reg_decl":
            quals = [x for x in c.children if x.data == "qual"]
            typ = _qual_words(quals)[0][1:]
            for it in c.children:
                if it.data == "reg_item":
                    base = str(it.children[0])
                    if len(it.children) > 1:
                        for i in range(int(str(it.children[1]))):
                            ent.regs[f"{base}{i}"] = typ
                    else:
                        ent.regs[base] = typ
        elif d == "var_decl":
            sv = _shared_var(c)
            if sv is not None:
                ent.shared.append(sv)
            elif str(c.children[0]) == ".local":
                ent.lines.append(("local", str([x for x in c.children if isinstance(x, lark.Token)][-1])))
        elif d == "loc":
            vals = [str(x) for x in c.children]
            f, line, col = int(vals[0]), int(vals[1]), int(vals[2])
            inlined = None
            if len(vals) >= 9:
                inlined = (int(vals[6]), int(vals[7]), int(vals[8]))
            state["loc"] = (f, line, col, inlined)
        elif d == "label":
            ent.lines.append(Label(str(c.children[0])[:-1], c.meta.line))
        elif d == "instr":
            guard = None
            ops = []
            opcode = None
            for x in c.children:
                if isinstance(x, lark.Token) and x.type == "OPCODE":
                    opcode = str(x)
                elif isinstance(x, lark.Tree) and x.data == "guard":
                    neg = any(isinstance(y, lark.Token) and y.type == "NOT" for y in x.children)
                    reg = next(str(y) for y in x.children if isinstance(y, lark.Token) and y.type == "REG")
                    guard = (T.Reg(reg), neg)
                elif isinstance(x, lark.Tree):
                    ops.append(_operand(x))
                elif isinstance(x, lark.Token):
                    ops.append(T.Sym(str(x)))
            ent.lines.append(Instr(opcode, ops, guard, ("pending", c.meta.line, state["loc"])))
        elif d == "block":
            _body(c.children, ent, state)
        elif d == "pragma" or d == "callproto":
            pass
