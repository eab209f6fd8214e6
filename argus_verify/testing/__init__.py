"""Test oracles and helpers that ship with Argus but are not part of the compiler: the PTX
simulator (the lowering's oracle on machines without a GPU), hypothesis strategies for a kernel's
sizes and inputs (for your own pytest properties), and the case runner behind `argus test`."""

from argus_verify.testing.check import Case, KernelFamily, reproducer, run_case, search
from argus_verify.testing.strategies import VALUE_KINDS, consts_for, input_arrays, inputs_for, shapes_for

__all__ = ["VALUE_KINDS", "Case", "KernelFamily", "consts_for", "input_arrays", "inputs_for", "reproducer",
           "run_case", "search", "shapes_for"]
