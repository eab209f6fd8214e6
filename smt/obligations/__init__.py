"""The obligations: each becomes a query whose unsatisfiability is the proof.

One module per obligation; `STEPS` lists them in report order. A new obligation is a module with
a `check_<name>(an, timeout) -> [ObligationResult]` and one line in `STEPS` (and its name in
`smt.report.OBLIGATIONS`).

Formulas (every one also assumes sizes in 1..2**20, `requires`, and ranges for blocks, loop
counters, threads and values; `err` marks elements already wrong because of an upstream
violation, so each bug is reported at its root):

* tag-assertion   exists point: guard, tags present, not err, not cond
                  (and, as implicit assertions, the agreement rules of elementwise, reduce, mma)
* output-contract exists point: stored in bounds, not err, not (tag with `*` dropped == declared)
* output-once     exists two distinct (block, thread, statement/iteration) writing one element;
                  exists an in-bounds element that no (block, thread, value, iteration) writes
* bounds          exists point: executed, unmasked, coordinate outside the tensor / allocation
* race            exists two threads, two accesses to one shared offset, one a write, not
                  ordered by a barrier (async copies: by a retiring wait then a barrier);
                  exists two accesses to one output element, one a store, by two blocks or by
                  two threads of a block not ordered by a barrier (global_races.py)
* barrier-divergence  exists two threads of a block that disagree on the barrier's guard
* uninitialised-read  exists a read with no write before it, or whose last write is an async
                  copy not yet retired by a wait
* bank-conflict   exists two lanes of one warp, one access phase, same bank, different words
* uncoalesced     a warp's access instruction touches more 32-byte sectors than needed
"""

from __future__ import annotations

from argus_verify.smt.obligations.agreement import check_agreements
from argus_verify.smt.obligations.assertions import check_assertions
from argus_verify.smt.obligations.banks import check_banks
from argus_verify.smt.obligations.bounds import check_bounds
from argus_verify.smt.obligations.coalescing import check_coalescing
from argus_verify.smt.obligations.contract import check_contracts
from argus_verify.smt.obligations.divergence import check_divergence
from argus_verify.smt.obligations.global_races import check_global_races
from argus_verify.smt.obligations.matrix_rows import check_matrix_rows
from argus_verify.smt.obligations.once import check_once
from argus_verify.smt.obligations.races import check_races
from argus_verify.smt.obligations.reductions import check_contract_reductions
from argus_verify.smt.obligations.uninit import check_uninit

# (obligation name, check(analysis, timeout_s) -> [ObligationResult]), in report order
STEPS = (
    ("tag-assertion", check_assertions),
    ("tag-assertion", check_agreements),
    ("output-contract", check_contracts),
    ("output-once", check_once),
    ("bounds", check_bounds),
    ("bounds", check_matrix_rows),
    ("barrier-divergence", check_divergence),
    ("race", check_races),
    ("race", check_global_races),
    ("uninitialised-read", check_uninit),
    ("bank-conflict", check_banks),
    ("uncoalesced", check_coalescing),
    # reduction-coverage, reduction-operator and padding: independent of the analysis, run last
    ("reduction-coverage", check_contract_reductions),
)

__all__ = [
    "STEPS",
    "check_agreements",
    "check_assertions",
    "check_banks",
    "check_bounds",
    "check_coalescing",
    "check_contracts",
    "check_divergence",
    "check_global_races",
    "check_matrix_rows",
    "check_once",
    "check_contract_reductions",
    "check_races",
    "check_uninit",
]
