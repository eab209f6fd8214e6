"""Argus kernels inside PyTorch models: `ArgusModule` is an `nn.Module` whose forward calls a
kernel on CUDA tensors (zero-copy, on the current stream).

    from argus_verify.torch import ArgusModule
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.softmax = ArgusModule("specs/row_softmax.arg")
        def forward(self, x):
            return self.softmax(x.contiguous())

No autograd: the outputs carry no gradient, and a call with an input that requires a gradient
while gradients are enabled is refused (wrap inference in `torch.no_grad()` or detach), rather than
silently cutting the graph.
"""

from __future__ import annotations

import os

import torch

from argus_verify.api import CallError, Kernel, load

__all__ = ["ArgusModule", "kernel_function"]


def _kernel(kernel: Kernel | str | os.PathLike, name: str | None, consts: dict) -> Kernel:
    if isinstance(kernel, Kernel):
        if name is not None or consts:
            raise CallError("kernel=/constants apply to a path; this kernel is loaded already")
        return kernel
    return load(kernel, name, **consts)


def _no_grad_inputs(k: Kernel, args, kwargs) -> None:
    if not torch.is_grad_enabled():
        return
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            raise CallError(f"{k.name}: Argus kernels have no autograd; an input requires a gradient. Call it "
                            "under torch.no_grad(), or pass .detach()")


def kernel_function(kernel: Kernel | str | os.PathLike, name: str | None = None, **consts):
    """A plain function of torch tensors that calls the kernel (verified once, on first call)."""
    k = _kernel(kernel, name, consts)

    def call(*args, **kwargs):
        _no_grad_inputs(k, args, kwargs)
        return k(*args, **kwargs)

    call.kernel = k
    call.__name__ = k.name
    return call


class ArgusModule(torch.nn.Module):
    """`forward(*inputs, out=None, **sizes)` runs the kernel; the module has no parameters."""

    def __init__(self, kernel: Kernel | str | os.PathLike, name: str | None = None, **consts):
        super().__init__()
        self.kernel = _kernel(kernel, name, consts)

    def forward(self, *args, **kwargs):
        _no_grad_inputs(self.kernel, args, kwargs)
        return self.kernel(*args, **kwargs)

    def extra_repr(self) -> str:
        return repr(self.kernel)
