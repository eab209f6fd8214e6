"""Dispatch on IR node classes, with every stage's coverage checked up front.

A stage implements one `visit_<NodeClass>` method per node of a family (statements, fragment
operations, integer expressions) by subclassing `Visitor` with the families it handles. The class
records at definition time which nodes lack a handler; tests/test_architecture.py asserts that
every stage's visitors cover their families, so a new IR node without a handler fails the suite,
not a user's run.
"""

from __future__ import annotations

import typing

from argus_verify import ir

# Read off the IR's own unions, so a node added to the IR joins its family's coverage check.
STATEMENTS = typing.get_args(ir.Stmt)
FRAGMENT_OPS = typing.get_args(ir.FragOp)
INT_EXPRS = typing.get_args(ir.IExpr)

FAMILIES = {"statements": STATEMENTS, "fragment_ops": FRAGMENT_OPS, "int_exprs": INT_EXPRS}


class Visitor:
    """Subclass with `families=("statements", ...)`; call `self.visit(node, *args)`.

    Nodes outside the declared families may still have handlers; nodes inside them must.
    """

    families: tuple = ()
    missing: tuple = ()
    _dispatch: dict = {}

    def __init_subclass__(cls, families: tuple = (), **kw):
        super().__init_subclass__(**kw)
        cls.families = tuple(dict.fromkeys(tuple(getattr(cls, "families", ())) + tuple(families)))
        table = {}
        for klass in vars(ir).values():
            if isinstance(klass, type) and hasattr(cls, f"visit_{klass.__name__}"):
                table[klass] = getattr(cls, f"visit_{klass.__name__}")
        cls._dispatch = table
        cls.missing = tuple(
            f"{fam}.{node.__name__}" for fam in cls.families for node in FAMILIES[fam] if node not in table
        )

    def visit(self, node, *args, **kw):
        try:
            handler = self._dispatch[type(node)]
        except KeyError:
            raise NotImplementedError(f"{type(self).__name__} has no handler for {type(node).__name__}") from None
        return handler(self, node, *args, **kw)


def missing_handlers(cls) -> tuple:
    """The nodes of `cls`'s families that it has no handler for (empty when complete)."""
    return cls.missing
