"""The PTX front end of `argus audit`: a lark grammar for the PTX nvcc emits for hand-written
kernels (ptx.lark, parser.py) and the lifter to the thread-level form (lift.py)."""

from argus_verify.frontend.ptx.lift import lift_module
from argus_verify.frontend.ptx.parser import parse_ptx

__all__ = ["lift_module", "parse_ptx"]
