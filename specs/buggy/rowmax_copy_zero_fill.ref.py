"""Reference and default shapes for rowmax_copy_zero_fill.arg: row maxima (specs/buggy/rowmax_reference.py)."""

from rowmax_reference import make_inputs, reference

SHAPES = {"M": 16, "N": 1000}

__all__ = ["SHAPES", "make_inputs", "reference"]
