"""Argus verification: tags, obligations, Z3 proofs and counterexamples.

    report = smt.verify(kernel, timeout_s=10.0, shapes=None)
    report.results      # [ObligationResult]: obligation, status, location, witness, detail, path, hint
    report.exit_code    # 0 proved (warnings allowed), 1 a violation or vacuous, 3 unknown and neither
    report.to_json()    # one object per obligation (the design's JSON)
    report.render_text()

See docs/verify.md for the encoding and what "proved" means.
"""

from __future__ import annotations

import gc
import math
import threading
import time
import traceback

from argus_verify import ir
from argus_verify.smt import vacuity
from argus_verify.smt.forked import in_child
from argus_verify.smt.report import OBLIGATIONS, WARNINGS, ObligationResult, VerifyReport
from argus_verify.smt.unroll import unroll_shared_loops

__all__ = ["verify", "VerifyReport", "ObligationResult", "OBLIGATIONS", "WARNINGS"]

# The launch obligation's proofs join the report once the lead re-records the golden verification
# outputs with them (tests/test_golden.py); until then only its violations and unknowns are shown.
SHOW_PROVED_LAUNCH = False


def verify(
    kernel: ir.Kernel,
    timeout_s: float = 10.0,
    shapes: dict | None = None,
    checks: tuple | None = None,
    jobs: int = 1,
    progress=None,
) -> VerifyReport:
    """Prove every obligation of `kernel`, or find counterexamples.

    `timeout_s` limits each solver query (a timeout is reported as unknown, never as a proof).
    `shapes` (e.g. {"M": 256}) fixes sizes: proofs then hold for those sizes only, and every
    proved result says so. `checks` restricts the obligations checked (names from OBLIGATIONS).
    `jobs` > 1 checks groups of obligations in that many forked processes (POSIX only; do not
    use it from a process that runs other threads). The results are the same, only sooner.
    `progress(done, total, what)`, when given, is called in this process as the stages start and
    the obligation steps finish (the CLI's status line on long verifications).
    """
    if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    # Z3's context is shared by the process and is not thread-safe: one verification at a time
    # (two threads verifying at once crashed the process inside Z3)
    with _ONE_AT_A_TIME:
        return _verify_locked(kernel, timeout_s, shapes, checks, jobs, progress)


_ONE_AT_A_TIME = threading.RLock()


def _verify_locked(kernel, timeout_s, shapes, checks, jobs, progress) -> VerifyReport:
    # Z3 numbers its terms in creation order and reuses the numbers of freed ones; its search, and
    # so the witness it returns, depends on those numbers. Python's cycle collector frees Z3 terms
    # at times set by unrelated allocations, so it is paused here and run only between steps:
    # the witness is then a function of the kernel and the verifier's code alone.
    was_enabled = gc.isenabled()
    gc.disable()
    froze = gc.get_freeze_count() == 0  # a caller's own gc.freeze() is left alone (see _settle)
    _FREEZE[0] = froze
    try:
        return _verify(kernel, timeout_s, shapes, checks, jobs, progress or _silent)
    finally:
        _FREEZE[0] = False
        if froze:
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def _silent(done, total, what) -> None:
    pass


# Whether this verification may gc.freeze(): see _settle.
_FREEZE = [False]


def _settle() -> None:
    """Free the cyclic garbage made so far (the Z3 terms it holds among it), at a fixed point of the
    verification. A full collection walks every object of the process (the front end's, numpy's,
    lark's: tens of thousands), tens of milliseconds each time, and in a forked worker it also
    copies every page it touches. So the survivors are frozen: the next collection walks only the
    objects made since, and still frees all garbage among them. The frozen objects are the kernel,
    the analysis and the modules, which live until the verification ends (unfrozen then)."""
    gc.collect()
    if _FREEZE[0]:
        gc.freeze()


def _verify(kernel, timeout_s, shapes, checks, jobs, progress) -> VerifyReport:
    t0 = time.perf_counter()
    kernel = unroll_shared_loops(kernel)
    shapes = {k: int(v) for k, v in (shapes or {}).items() if k in kernel.sizes}
    report = VerifyReport(kernel.name, kernel.source_file, shapes=shapes or None)
    want = set(checks or OBLIGATIONS)
    from argus_verify.smt.protocol import PROTOCOL
    from argus_verify.smt.protocol_cluster import CLUSTER_PROTOCOL

    # the protocol skeleton (numpy only, no Z3 terms) runs beside the solver's steps when forking is allowed
    proto_job = in_child(_protocol, kernel, want, shapes, jobs) if jobs > 1 and ir.uses_hopper(kernel.body) \
        else None
    solver_wants = want - {"launch"} - set(PROTOCOL) - set(CLUSTER_PROTOCOL)
    # the stages after the solver's steps: launch, the reductions, the protocol (Hopper kernels)
    hopper = ir.uses_hopper(kernel.body)
    tail = 3 if hopper else 2
    stages = (_count_steps(solver_wants) + 1 if solver_wants else 0) + tail  # (+ 1: the analysis)
    report.results, report.notes = _obligations(kernel, timeout_s, shapes, solver_wants, jobs,
                                                lambda done, what: progress(done, stages, what))
    windows = frozenset(w for r in report.results if r.status == "proved" for w in r.detail.get("windows", ()))
    progress(stages - tail, stages, "checking launch")
    launch = _check_launch(kernel, shapes, timeout_s)
    _settle()
    progress(stages - tail + 1, stages, "checking the reduction contracts")
    reductions = _reductions(kernel, timeout_s, want, shapes, windows)
    for r in reductions:  # coverage without a wgmma's k window, where its k agreement is violated
        if r.status == "unknown" and "k window" in r.message and any(
                x.obligation == "tag-assertion" and x.status == "violated" and x.location.line == r.location.line
                for x in report.results):
            r.detail["consequence_of"] = "tag-assertion"
    report.results += reductions
    _settle()
    if hopper:
        progress(stages - 1, stages, "checking the Hopper protocol")
    proto = proto_job() if proto_job is not None else _protocol(kernel, want, shapes, jobs)
    report.results = _merge_protocol(report.results, proto, kernel)
    if launch.vacuous:
        vacuity.mark_vacuous(report.results, launch.vacuous)
    if "launch" in want:
        report.results[:0] = [r for r in launch.results if SHOW_PROVED_LAUNCH or r.status != "proved"]
    if shapes:
        scope = ", ".join(f"{k}={v}" for k, v in shapes.items())
        for r in report.results:
            if r.status == "proved":
                r.message += f" (proved for {scope} only)"
                r.detail.setdefault("sizes", dict(shapes))
    report.seconds = time.perf_counter() - t0
    progress(stages, stages, "done")
    return report


def _merge_protocol(results: list, proto: list, kernel) -> list:
    """The solver's results with the protocol skeleton's (smt/protocol.py). The skeleton also follows
    tags through TMA and wgmma, on bounded runs: its violations are kept, its proofs only for an
    obligation the solver has no result for (the solver's hold for all sizes). A solver proof of how
    data flows through TMA or wgmma relies on the protocol obligations (smt/hopper.py): it says so,
    and is unknown unless they are proved."""
    from argus_verify.smt.hopper import DATAFLOW, RELIANCE_TAGS, RELIES_ON
    from argus_verify.smt.hopper_store import RELIES_ON_STORE
    from argus_verify.smt.protocol import PROTOCOL

    if not proto:
        return results
    # with a TMA store, the data reaches the output only through the store's read of its shared tile,
    # which happens before the tile is rewritten or the block exits (bulk-group)
    stores = any(isinstance(s, ir.TmaStore) for s in ir.walk_stmts(kernel.body))
    relies, why = (RELIES_ON_STORE, RELIANCE_TAGS + ", bulk-group") if stores else (RELIES_ON, RELIANCE_TAGS)
    for r in results:
        if r.status == "proved" and r.obligation in DATAFLOW and "relies_on" not in r.detail:
            r.detail["relies_on"] = list(relies)
            r.message += f" ({why})"
    mine = {r.obligation for r in results}
    broken = {r.obligation: r.status for r in proto if r.obligation in PROTOCOL and r.status != "proved"}
    kept = []
    for r in results:
        relies = [n for n in r.detail.get("relies_on", ()) if n in broken] if r.status == "proved" else []
        if relies:
            why = ", ".join(f"{n} is {broken[n]}" for n in relies)
            r.status = "unknown"
            r.message += f" — not established: {why}"
            r.detail["reason"] = f"relies on {', '.join(relies)}, which are not proved"
            violated = [n for n in relies if broken[n] == "violated"]
            if violated:
                r.detail["consequence_of"] = violated[0]  # unknown because of a violation reported
        kept.append(r)
    bounded = {r.obligation for r in proto if r.obligation in PROTOCOL and r.detail.get("bounded")}
    for r in kept:  # a proof for all sizes that takes a bounded check's result as given is bounded too
        through = [n for n in r.detail.get("relies_on", ()) if n in bounded] if r.status == "proved" else []
        if through and "bounded" not in r.detail:
            r.detail["bounded"] = {"through": through}
    found = {r.obligation for r in proto if r.status == "violated"}
    for r in kept:  # the solver could not decide what the bounded run found violated
        if r.status == "unknown" and r.obligation in found:
            r.detail.setdefault("consequence_of", r.obligation)
    # (the skeleton's bounded results for the solver's obligations count only where they find a violation)
    extra = [r for r in proto if r.obligation in PROTOCOL or r.status == "violated" or r.obligation not in mine]
    return kept + extra


def _check_launch(kernel, shapes, timeout_s) -> vacuity.Launch:
    """The launch obligation. It runs after the others: its Z3 terms must not renumber theirs (the
    witnesses depend on the order in which terms are created)."""
    try:
        return vacuity.check_launch(kernel, shapes, timeout_s)
    except Exception as e:  # noqa: BLE001 - an internal error must not look like a proof
        message = f"internal verifier error: {type(e).__name__}: {e}"
        return vacuity.Launch(
            [ObligationResult("launch", "unknown", kernel.span, message, detail={"reason": traceback.format_exc()})]
        )


def _protocol(kernel, want, shapes, jobs=1) -> list:
    """The Hopper protocol obligations (smt/protocol.py), for kernels that use mbarriers, TMA or wgmma
    (`jobs` > 1: the lockstep skeleton's runs and its lemmas in two processes)."""
    from argus_verify.smt.protocol import PROTOCOL, check_protocol
    from argus_verify.smt.protocol_cluster import CLUSTER_PROTOCOL, check_cluster_protocol

    names, run = PROTOCOL, lambda: check_protocol(kernel, shapes, jobs=jobs)
    if ir.uses_cluster(kernel):  # the CTAs of a cluster run together
        names, run = PROTOCOL + CLUSTER_PROTOCOL, lambda: check_cluster_protocol(kernel, shapes)
    if not ir.uses_hopper(kernel.body) or not set(names) & want:
        return []
    try:
        return [r for r in run() if r.obligation in want]  # (and followed tags)
    except Exception as e:  # noqa: BLE001 - an internal error must not look like a proof
        return [ObligationResult(n, "unknown", kernel.span, f"internal verifier error: {type(e).__name__}: {e}",
                                 detail={"reason": traceback.format_exc()}) for n in names if n in want]


def _reductions(kernel, timeout_s, want, shapes, windows=frozenset()) -> list:
    """The contract obligations (after the others: their Z3 terms must not renumber theirs).
    `windows`: the wgmma operand k windows the solver proved (smt/hopper.py); they anchor the
    coverage of wgmma's k sums."""
    from argus_verify.smt.obligations.reductions import check_reductions

    names = {"reduction-coverage", "reduction-operator", "padding"}
    if not names & want:
        return []
    try:
        return [r for r in check_reductions(kernel, timeout_s, shapes, windows) if r.obligation in want]
    except Exception as e:  # noqa: BLE001 - an internal error must not look like a proof
        return [ObligationResult(n, "unknown", kernel.span, f"internal verifier error: {type(e).__name__}: {e}",
                                 detail={"reason": traceback.format_exc()}) for n in sorted(names & want)]


def _obligations(kernel, timeout_s, shapes, want, jobs, progress=lambda done, what: None) -> tuple[list, list]:
    """The results of every obligation in `want` but launch, and the analysis's notes.
    `progress(done, what)`: `done` counts the analysis and the steps finished."""
    from argus_verify.smt import obligations as O
    from argus_verify.smt.analysis import Analysis, AnalysisError

    steps = _steps(O)
    if not want:
        return [], []
    todo = [i for i, (name, _) in enumerate(steps) if name in want]
    progress(0, "analysing the kernel")
    try:
        an = Analysis(kernel, shapes)
        an.finish(timeout_s)
    except AnalysisError as e:
        return _all_unknown(want, kernel, f"beyond the verifier's encoding: {e}", str(e)), []
    except Exception as e:  # noqa: BLE001 - an internal error must not look like a proof
        return _all_unknown(want, kernel, f"internal verifier error: {type(e).__name__}: {e}",
                            traceback.format_exc()), []
    _settle()  # the analysis's garbage: what the first step's collection freed before
    done = [1]

    def run_step(i):
        name, fn = steps[i]
        _settle()
        try:
            return fn(an, timeout_s)
        except AnalysisError as e:
            return [
                ObligationResult(
                    name,
                    "unknown",
                    kernel.span,
                    f"beyond the verifier's encoding: {e}",
                    detail={"reason": str(e)},
                )
            ]
        except Exception as e:  # noqa: BLE001 - an internal error must not look like a proof
            message = f"internal verifier error: {type(e).__name__}: {e}"
            if isinstance(e, RecursionError) or "RecursionError" in str(e):
                # (a value carried through nested loops whose encoding refers to the previous iteration
                # without end: a limit of the encoding, not a crash of the kernel's check)
                message = ("beyond the verifier's encoding: a value carried through nested loops refers to its "
                           "earlier iterations too deeply (hoisted out of an outer loop?)")
            return [ObligationResult(name, "unknown", kernel.span, message, detail={"reason": traceback.format_exc()})]

    def finished(i):  # (forked steps run two at a time: each is named as it finishes)
        done[0] += 1
        progress(done[0], f"{steps[i][0]} done")

    forked = jobs > 1 and len(todo) > 1 and _worth_forking(kernel)
    if forked:
        progress(1, f"analysis done; {len(todo)} steps in {min(jobs, len(todo))} processes")
    parts = _parallel(run_step, todo, jobs, finished) if forked else None
    if parts is None:
        parts = {}
        done[0] = 1  # (a pool that failed part way: the steps run again here)
        for i in todo:
            progress(done[0], f"checking {steps[i][0]}")
            parts[i] = run_step(i)
            done[0] += 1
    return [r for i in todo for r in parts[i]], list(dict.fromkeys(an.notes))


def _steps(O) -> list:
    """The solver's obligation steps, in the order they run (the witnesses depend on it)."""
    return [
        ("tag-assertion", O.check_assertions),
        ("tag-assertion", O.check_agreements),
        ("output-contract", O.check_contracts),
        ("output-once", O.check_once),
        ("bounds", O.check_bounds),
        ("bounds", O.check_matrix_rows),
        ("barrier-divergence", O.check_divergence),
        ("race", O.check_races),
        ("race", O.check_global_races),
        ("uninitialised-read", O.check_uninit),
        ("bank-conflict", O.check_banks),
        ("uncoalesced", lambda an, _t: O.check_coalescing(an)),
    ]


def _count_steps(want) -> int:
    """How many of the solver's steps check an obligation in `want` (the progress total)."""
    from argus_verify.smt import obligations as O

    return sum(1 for name, _ in _steps(O) if name in want) if want else 0


def _worth_forking(kernel) -> bool:
    """Forked workers pay for themselves only where the steps are long: kernels that read shared
    memory written inside a loop (pipelines, k-loops), whose reads resolve to many candidate
    writes. Elsewhere the whole verification takes less than the fork, and on a 2-core machine
    (measured: vecadd, reduce_sum, row_softmax, gemm_simt) running the steps here is faster."""
    return any(isinstance(s, ir.For) and any(isinstance(x, (ir.CopyAsync, ir.Store)) and
                                             _writes_shared(x) for x in ir.walk_stmts(s.body))
               for s in ir.walk_stmts(kernel.body))


def _writes_shared(stmt) -> bool:
    return isinstance(stmt, ir.CopyAsync) or stmt.dst.space == "shared"


_WORK = None  # the step function of the verification being run in forked workers


def _work(i):
    return i, _WORK(i)


def _parallel(run_step, todo, jobs, finished=lambda i: None):
    """Run the obligation steps in forked processes (they inherit the analysis); None if that is
    not possible here, and the caller runs them in this process. `finished(i)` as each step's
    result arrives."""
    import multiprocessing as mp

    global _WORK
    try:
        ctx = mp.get_context("fork")
    except ValueError:
        return None
    # the usually slowest steps first, so that the two queues finish together
    order = sorted(todo, key=lambda i: {1: 0, 6: 1, 2: 2, 8: 3, 3: 4}.get(i, 9))
    _WORK = run_step
    try:
        # one fresh fork per step: each step starts from the same state as in any other run
        with ctx.Pool(min(jobs, len(todo)), maxtasksperchild=1) as pool:
            out = {}
            for i, res in pool.imap_unordered(_work, order):
                out[i] = res
                finished(i)
            return out
    except Exception:  # noqa: BLE001 - fall back to running here
        return None
    finally:
        _WORK = None


def _all_unknown(want, kernel, message, reason) -> list:
    """Every obligation the analysis would have checked (the contract obligations and launch have
    their own steps: listing them here would report them twice)."""
    own = {"reduction-coverage", "reduction-operator", "padding", "launch"}
    return [
        ObligationResult(name, "unknown", kernel.span, message, detail={"reason": reason})
        for name in OBLIGATIONS
        if name in want and name not in own
    ]
