"""Warp builtins: shuffles, one per lane rule of the semantics table (shfl_xor, shfl_idx, ...)."""

from __future__ import annotations

from argus_verify import ir
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.values import FragVal, IntVal
from argus_verify.instructions import BUILTINS, shuffle_mode


def shuffle(site: CallSite) -> FragVal:
    b, (x, arg) = site.b, site.args
    v, lane = b.value(x), b.value(arg)
    if not isinstance(v, FragVal):
        raise b.err(x, "shuffles move fragments")
    if not isinstance(lane, IntVal):
        raise b.err(arg, "the lane argument must be an integer")
    if lane.const is not None and not 0 <= lane.const < 32:
        raise b.err(arg, f"lane argument {lane.const} is outside 0..31")
    if ir.DTYPE_BYTES[v.type.dtype] > 4:
        raise b.err(x, f"shuffles move 32-bit values; {v.type.dtype} is not supported")
    return b.emit(site.node, ir.Shuffle(v.name, shuffle_mode(site.name), lane.expr), v.type)


HANDLERS = {name: shuffle for name in BUILTINS if shuffle_mode(name)}
