"""The tag analysis's handlers of Hopper nodes (mbarriers, TMA, wgmma, fences, groups).

The tag encoding does not follow data through TMA copies and wgmma yet: a kernel that uses them
gets every tag-based obligation reported as unknown (never a proof), and its protocol and layout
obligations from smt/protocol.py.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt.diag import AnalysisError

REASON = "the tag encoding does not follow data through TMA copies and wgmma yet (see smt/protocol.py)"


class HopperMixin:
    def _hopper(self, s, *rest):
        raise AnalysisError(REASON)

    def visit_MbarrierOp(self, s: ir.MbarrierOp, node, env):
        self._hopper(s)

    visit_Fence = visit_TmaLoad = visit_WgmmaGroup = visit_SetMaxNReg = visit_MbarrierOp

    def visit_Wgmma(self, op: ir.Wgmma, s, node, env, label, ld):
        self._hopper(s)
