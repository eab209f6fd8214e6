"""Argus: a verification-first compiler for GPU kernels. From Python:

    import argus_verify
    k = argus_verify.load("specs/vecadd.arg")
    k.verify(); k.ptx; out = k(x, y)

(docs/api.md); the command line is `argus` (argus_verify.cli)."""

from argus_verify.api import CallError, Kernel, VerificationError, load

__all__ = ["CallError", "Kernel", "VerificationError", "load"]
