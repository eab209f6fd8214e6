"""Test oracles and helpers that ship with Argus but are not part of the compiler: the PTX
simulator (the lowering's oracle on machines without a GPU)."""
