"""The tag analysis's handlers of the TMA store and its bulk groups.

Like the other Hopper nodes (smt/hopper.py), the tag encoding does not follow data through them:
a kernel that uses them gets its tag-based obligations from smt/protocol.py, never a proof here.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt.diag import AnalysisError
from argus_verify.smt.hopper import REASON


class HopperStoreMixin:
    def visit_TmaStore(self, s: ir.TmaStore, node, env):
        raise AnalysisError(REASON)

    def visit_BulkGroup(self, s: ir.BulkGroup, node, env):
        raise AnalysisError(REASON)
