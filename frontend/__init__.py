"""The Argus front end: `.arg` source -> checked, instantiated IR (`argus_verify.ir.Kernel`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from argus_verify import ir
from argus_verify.diagnostics import ArgusError, ArgusTypeError, Span
from argus_verify.frontend import calls, control, header, views
from argus_verify.frontend.builder import KernelBuilder, build_tagfn
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
            fn = build_tagfn(item, filename)
            tagfns[fn.name] = fn
        elif item.data == "kernel":
            kernels.append(item)
    if not kernels:
        raise ArgusTypeError("no kernel in this file", Span(filename, 1, 1))
    if kernel is None:
        chosen = kernels[0]
    else:
        named = [k for k in kernels if str(k.children[0]) == kernel]
        if not named:
            names = ", ".join(str(k.children[0]) for k in kernels)
            raise ArgusError(f"no kernel named '{kernel}' (this file has: {names})", Span(filename, 1, 1))
        chosen = named[0]
    return KernelBuilder(chosen, filename, tagfns, consts or {}).build()


def compile_file(path: str | Path, consts: Mapping[str, int] | None = None,
                 kernel: str | None = None) -> ir.Kernel:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ArgusError(f"cannot read {path}: {e.strerror}") from None
    return compile_source(text, str(path), consts, kernel)


__all__ = ["compile_source", "compile_file", "parse", "span_of", "HANDLERS"]
