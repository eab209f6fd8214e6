"""The Argus front end: `.arg` source -> checked, instantiated IR (`argus_verify.ir.Kernel`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from argus_verify import ir, roles
from argus_verify.diagnostics import ArgusError, ArgusTypeError, Span
from argus_verify.frontend import calls, control, header, views
from argus_verify.frontend.builder import KernelBuilder
from argus_verify.frontend.parser import parse
from argus_verify.frontend.values import span_of

# every builtin's handler, whatever its form (calls, the launch, built-in values, tag/coord
# components, range); tests check it against the declarations of argus_verify.instructions
HANDLERS = {**calls.HANDLERS, **header.LAUNCH_HANDLERS, **header.VALUE_HANDLERS, **views.COMPONENT_HANDLERS,
            **control.LOOP_HANDLERS}


def compile_source(text: str, filename: str = "<string>", consts: Mapping[str, int] | None = None,
                   kernel: str | None = None) -> ir.Kernel:
    """Parse and check `text`, and instantiate one kernel with compile-time `consts`."""
    tree = parse(text, filename)
    tagfns = {}
    kernels = []
    for item in tree.children:
        if item.data == "tagfn_def":
            name_tok = item.children[0]
            if str(name_tok) in HANDLERS:
                raise ArgusTypeError(f"tag function '{name_tok}' has the name of a builtin; rename it",
                                     _token_span(filename, name_tok))
            if str(name_tok) in tagfns:
                first = tagfns[str(name_tok)].children[0].line
                raise ArgusTypeError(f"tag function '{name_tok}' is defined twice (first at line {first})",
                                     _token_span(filename, name_tok))
            tagfns[str(name_tok)] = item  # built with the kernel (it may use its compile-time parameters)
        elif item.data == "kernel":
            name_tok = item.children[0]
            first = next((k for k in kernels if str(k.children[0]) == str(name_tok)), None)
            if first is not None:
                raise ArgusTypeError(f"kernel '{name_tok}' is defined twice in this file (first at line "
                                     f"{first.children[0].line}); give each kernel its own name",
                                     _token_span(filename, name_tok))
            kernels.append(item)
    if not kernels:
        raise ArgusTypeError("no kernel in this file", Span(filename, 1, 1))
    if kernel is None:
        chosen = kernels[0]
    else:
        named = [k for k in kernels if str(k.children[0]) == kernel]
        if not named:
            names = ", ".join(str(k.children[0]) for k in kernels)
            raise ArgusError(f"{filename}: no kernel named '{kernel}' (this file has: {names})")
        chosen = named[0]
    built = KernelBuilder(chosen, filename, tagfns, consts or {}).build()
    _check_shared_total(built)
    return _register_policy(built)


def _token_span(filename: str, tok) -> Span:
    return Span(filename, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + len(tok))


def kernel_declarations(text: str, filename: str = "<string>") -> dict[str, list[str]]:
    """The kernels of a source (it must parse), in order, each with the compile-time parameters it
    declares (`<BLOCK=1024, ...>`)."""
    out: dict[str, list[str]] = {}
    for item in parse(text, filename).children:
        if item.data == "kernel":
            cps = item.children[1]
            out[str(item.children[0])] = [str(cp.children[0]) for cp in cps.children] \
                if getattr(cps, "data", None) == "const_params" else []
    return out


def _register_policy(k: ir.Kernel) -> ir.Kernel:
    """Warpgroup roles with setmaxnreg: the counts must fit the register file, and the kernel launches
    with a fixed count (.maxnreg) that setmaxnreg's .inc/.dec are chosen against."""
    if not any(isinstance(s, ir.SetMaxNReg) for s in ir.walk_stmts(k.body)):
        return k
    try:
        launch, _ = roles.register_plan(k)
    except ValueError as e:
        raise ArgusTypeError(e.args[0], e.args[1]) from None
    if k.policy("maxnreg") is None:
        k = attrs.evolve(k, policies=k.policies + (("maxnreg", launch),))
    return k


def _check_shared_total(k: ir.Kernel) -> None:
    """All shared allocations together (each 128-byte aligned, as the lowering places them) must fit
    in what one Hopper block can use; each one alone is checked where it is made."""
    from argus_verify.frontend.memory import SHARED_BYTES

    total = 0
    for a in k.shared_allocs():
        total = -(-total // 128) * 128 + a.size_elems * ir.DTYPE_BYTES[a.dtype]
        if total > SHARED_BYTES:
            raise ArgusTypeError(f"shared memory of {k.name} reaches {total} bytes with this allocation, over the "
                                 f"{SHARED_BYTES // 1024} KB ({SHARED_BYTES} bytes) a Hopper block can use", a.span)


def compile_file(path: str | Path, consts: Mapping[str, int] | None = None,
                 kernel: str | None = None) -> ir.Kernel:
    return compile_source(read_source(path), str(path), consts, kernel)


MAX_SOURCE_BYTES = 1 << 22  # 4 MiB: far above any kernel; an endless file (/dev/zero) stops here


def read_source(path: str | Path) -> str:
    """The text of a kernel file: UTF-8, at most MAX_SOURCE_BYTES; anything else is an ArgusError."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as e:
        raise ArgusError(f"cannot read {path}: {e.strerror}") from None
    if len(raw) > MAX_SOURCE_BYTES:
        raise ArgusError(f"{path} is larger than {MAX_SOURCE_BYTES >> 20} MiB: not a kernel source")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ArgusError(f"{path} is not UTF-8 text: byte 0x{raw[e.start]:02x} cannot be decoded",
                         Span(str(path), line, col)) from None


__all__ = ["compile_source", "compile_file", "read_source", "parse", "span_of", "HANDLERS"]
