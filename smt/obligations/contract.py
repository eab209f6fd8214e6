"""output-contract: every stored output element carries its declared tag (`*` components dropped).

Declared tags must also say what the contract says (`check_tag_agreement`). The proof compares
tags: out[i, j] receives a value tagged as the output's `tag` says. That proves the contract only
where the tags of the contract's inputs, at the indices the contract reads them, agree with the
output's tag at the contract's indices. With
`tag out[j, i] = (j, i)`, `tag x[i, j] = (i, j)` and `contract out[j, i] = x[i, j]`, a kernel
that copies without transposing carries the tags the output asks for, and the contract is false.
So for an input read at the output's indices alone (an elementwise operand, a broadcast vector),
each component of its declared tag that depends on those indices must equal the output's
component for all indices (Z3 over the integers); `*` matches anything. Inputs read at a
reduction's variable are not compared (their components follow their own axes).
"""

from __future__ import annotations

import time
from functools import partial

import z3

from argus_verify import ir
from argus_verify.printer import fmt_iexpr
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.obligations.common import (
    elem_str,
    fmt_tag,
    point,
    result_from,
    source_of,
    span_of,
    store_elem,
    tag_value,
    trace_path,
    value_var,
    witness_base,
)
from argus_verify.smt.query import solve
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.vacuity import SizeTerms, int_encoding
from argus_verify.smt.zops import OPS, TRUE


def check_contracts(an, timeout) -> list:
    out = [_untagged_output(c) for c in an.k.contracts if an.tagdecls.get(c.tensor) is None]
    out += check_tag_agreement(an.k, timeout)
    for acc, frag in an.out_stores:
        decl = an.tagdecls.get(acc.tensor)
        if decl is None:
            continue
        build = partial(contract_query, an=an, acc=acc, frag=frag, decl=decl)
        res, q, (ctx, inst, t, v, e, tg, declared) = solve(an, timeout, build)
        span = span_of(acc.node)
        missing = ir.untagged_contract_inputs(an.k, acc.tensor)
        if res.status != "violated":
            proved = f"{acc.tensor} receives the declared tags"
            result = result_from(res, "output-contract", span, "output contract could not be proved", proved)
            if result.status == "proved" and missing:  # an untagged element agrees with every tag
                result = _unchecked_inputs(an.k, acc.tensor, missing, span, res.seconds)
            unpaired = ir.unpaired_factors(an.k, acc.tensor)
            if result.status == "proved" and unpaired:
                result = _unpaired(an.k, acc.tensor, unpaired, span, res.seconds)
            untracked = ir.untracked_indices(an.k, acc.tensor)
            if result.status == "proved" and untracked:
                result = _untracked(an.k, acc.tensor, untracked, span, res.seconds)
            out.append(result)
            continue
        violation = contract_violation(an, acc, frag, res, span, (ctx, inst, t, v, e, tg, declared))
        if violation.detail["lhs"] is None and missing:
            # no tag at all: the value may come from the untagged inputs alone, which is no error
            violation = _unchecked_inputs(an.k, acc.tensor, missing, span, res.seconds)
        elif violation.detail["lhs"] is None:
            violation = _mixed_reduction(an, violation, timeout) or violation
        out.append(violation)
    return out


def _mixed_reduction(an, violation: ObligationResult, timeout) -> ObligationResult | None:
    """Unknown in place of `violation` (an output element that receives no tag) where the value came
    through a reduction that may combine tagged elements with untagged ones: a reduction's value
    carries the tag of one element of its group, so a partial sum that a guard left at zero
    (`if c0 + thread_id < N: acc = acc + xs`) stands for the whole group, whose other members are
    tagged. None where every reduction on the path combines elements of one kind (then the whole
    group is untagged and the violation is real)."""
    spans = {(h["line"], h["col"]) for h in violation.path if str(h.get("op", "")).startswith("reduce_")}
    for ck in an.checks:
        sp = span_of(ck.node)
        if ck.kind != "reduce" or (sp.line, sp.col) not in spans:
            continue
        res, _, _ = solve(an, timeout, partial(_mixing_query, ck=ck))
        if res.status != "proved":
            reason = (f"the value stored is a reduction (line {sp.line}) that may combine tagged elements with "
                      "untagged ones (a partial left at its initial constant by a guard): its tag is one "
                      "element's, and the one shown is untagged")
            return ObligationResult("output-contract", "unknown", violation.location,
                                    f"output contract not established: {reason}",
                                    detail={"reason": reason, "mixed_reduction": sp.line},
                                    seconds=violation.seconds + res.seconds)
    return None


def _mixing_query(q, ck):
    """A point of reduction `ck` whose group holds a tagged and an untagged element (agreeing)."""
    S, ctx, inst, t = point(q, ck.node)
    v = value_var(q, ck.typ.values)
    r = ck.fn(S, ctx, inst, t, v)
    q.add(ck.node.guard(S, ctx, inst, t), r["cons"], r["approx"])
    return ctx, inst, t, v, r


def _untagged_output(contract) -> ObligationResult:
    """A contract whose output has no tag while other tensors have: nothing compares the data that
    reaches the output with the contract (the tags declared may follow another convention than the
    contract's indices, so none is taken from it)."""
    idx = ", ".join(contract.index_vars)
    reason = (f"{contract.tensor} has no tag, so no data is checked against its contract: declare "
              f"tag {contract.tensor}[{idx}] = ({idx}{',' if len(contract.index_vars) == 1 else ''}) once")
    return ObligationResult("output-contract", "unknown", contract.span, f"output contract not established: {reason}",
                            detail={"reason": reason, "untagged": [contract.tensor]})


def _unchecked_inputs(kernel, output: str, missing: list, span, seconds: float) -> ObligationResult:
    """Unknown: the inputs `missing` of `output`'s contract carry no tag, so nothing checks which
    of their elements arrive (an untagged element agrees with every tag)."""
    reason = (f"the contract reads {', '.join(missing)}, which no tag names, so which of "
              f"{'their' if len(missing) > 1 else 'its'} elements reach {output} is not checked: declare "
              f"{_suggested_tag(kernel, kernel.contract_of(output), missing[0])}")
    return ObligationResult("output-contract", "unknown", span, f"output contract not established: {reason}",
                            detail={"reason": reason, "untagged": missing}, seconds=seconds)


def _unpaired(kernel, output: str, unpaired: list, span, seconds: float) -> ObligationResult:
    """Unknown: a reduction of `output`'s contract multiplies elements read at its variable, and the
    tags of `unpaired` do not carry that index, so which elements the kernel multiplies together is
    not checked (each may still be taken once, by reduction-coverage, and paired wrongly)."""
    tensor, var = unpaired[0]
    elem = next(e for e in ir.contract_elements(kernel.contract_of(output).expr) if e.tensor == tensor)
    reason = (f"the contract multiplies elements of {' and '.join(dict.fromkeys(t for t, _ in unpaired))} read at "
              f"'{var}', and the tag of {tensor} does not carry its index {var} ('*' or another function of it), "
              f"so which elements are multiplied together is not checked: tag {tensor}[{', '.join(elem.indices)}] "
              f"with the index itself at that component, as the other factors' tags do")
    return _not_established(span, reason, seconds, unpaired=[list(u) for u in unpaired])


def _untracked(kernel, output: str, untracked: list, span, seconds: float) -> ObligationResult:
    """Unknown: the contract reads an input at an index of the output's own (a batch l) that a tag
    does not carry, so the tags the solver compared agree for every value of it."""
    tensors = ", ".join(dict.fromkeys(t for t, _ in untracked))
    var = untracked[0][1]
    reason = (f"the contract reads its inputs at the output's index '{var}', but the tag of {tensors} does not "
              f"carry it ('*', absent or another function of it), so which '{var}' the kernel reads or writes is "
              f"not checked: add '{var}' as a component of the tags of {output} and of the inputs read at it "
              f"(e.g. a batch index as a third component)")
    return _not_established(span, reason, seconds, untracked=[list(u) for u in untracked])


def _not_established(span, reason: str, seconds: float, **detail) -> ObligationResult:
    """The output contract unknown: the tags the solver compared do not decide it, for `reason`."""
    return ObligationResult("output-contract", "unknown", span, f"output contract not established: {reason}",
                            detail={"reason": reason, **detail}, seconds=seconds)


def _suggested_tag(kernel, contract, tensor: str) -> str:
    """A tag for `tensor` in the convention of the contract's tagged inputs: each index variable
    at the component where another input's tag puts it, `*` elsewhere (`tag x[j] = (*, j)` beside
    `tag A[i, j] = (i, j)`)."""
    elems = ir.contract_elements(contract.expr)
    mine = next(e for e in elems if e.tensor == tensor)
    where = {}  # contract variable -> (component, number of components) in some input's declared tag
    for e in elems:
        decl = kernel.declared_tag(e.tensor)
        for dim, var in enumerate(e.indices if decl is not None else ()):
            want = ir.IVar(decl.index_vars[dim])
            comps = [c for c, x in enumerate(decl.components) if x == want]
            if comps:
                where.setdefault(var, (comps[0], len(decl.components)))
    if not where or not all(v in where for v in mine.indices):
        return f"one, e.g. tag {tensor}[{', '.join(mine.indices)}] = (...), with '*' for components it does not set"
    comps = ["*"] * max(n for _, n in where.values())
    for v in mine.indices:
        comps[where[v][0]] = v
    return f"tag {tensor}[{', '.join(mine.indices)}] = ({', '.join(comps)}{',' if len(comps) == 1 else ''})"


def contract_query(q, an, acc, frag, decl):
    """A stored element, in bounds and sound, whose tag is not the declared one."""
    S, ctx, inst, t = point(q, acc.node)
    v = value_var(q, acc.values)
    e, inb = store_elem(an, acc, S, ctx, inst, t, v)
    tg = frag.tag(S, ctx, inst, t, v)
    declared = [an.term(c, dict(zip(decl.index_vars, e, strict=True))) for c in decl.components]
    q.add(
        acc.executes(S, ctx, inst, t),
        inb,
        Z.Not(tg.err),
        tg.cons,
        Z.Not(contract_match(tg, declared)),
    )
    return ctx, inst, t, v, e, tg, declared


def contract_match(tg: V.TagVal, declared: list):
    """Value tag with `*` components dropped equals the declared tag."""
    K = len(tg.comps)
    stars = [s for _, s in tg.comps]
    if all(Z.is_true(s) or Z.is_false(s) for s in stars):
        patterns = [(TRUE, [Z.is_true(s) for s in stars])]
    else:
        patterns = []
        for mask in range(1 << K):
            bits = [bool(mask >> k & 1) for k in range(K)]
            patterns.append((Z.And(*[s if b else Z.Not(s) for s, b in zip(stars, bits, strict=True)]), bits))
    alts = []
    for cond, bits in patterns:
        kept = [tg.comps[k][0] for k in range(K) if not bits[k]]
        if len(kept) != len(declared):
            continue
        alts.append(Z.And(cond, *[Z.Eq(a, b) for a, b in zip(kept, declared, strict=True)]))
    return Z.And(Z.Not(tg.none), Z.Or(*alts))


def contract_violation(an, acc, frag, res, span, terms) -> ObligationResult:
    ctx, inst, t, v, e, tg, declared = terms
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t, v)
    coord = [ev.int(c) for c in acc.coords.coords(t, v, OPS)]
    w["element"] = {"value": ev.int(v), "tile": frag.label, "coord": coord}
    w["fragment"] = frag.name
    ge = [ev.int(x) for x in e]
    got = tag_value(ev, tg)
    want = [ev.int(x) for x in declared]
    detail = {"element": ge, "lhs": got, "rhs": want, "tags": {frag.label: got}}
    expl = [
        f"{elem_str(acc.tensor, ge)} receives {frag.label}[value {ev.int(v)}] of thread {ev.int(t)}, "
        f"which holds {source_of(tg.trace, ev)} (tag {fmt_tag(got)}); the contract says {fmt_tag(want)}"
    ]
    untagged = [x.name for x in an.k.inputs if an.k.tag_of(x.name) is None]
    if got is not None:
        hint = ("the element stored is computed from the wrong inputs: compare the tile offsets and layouts on "
                "the path with the output's view")
    elif untagged:
        one = len(untagged) == 1
        hint = (f"the stored value carries no tag: {', '.join(untagged)} {'has' if one else 'have'} no tag "
                f"declaration (e.g. `tag {untagged[0]}[i] = (i,)`), so {'its' if one else 'their'} elements "
                "carry none")
    else:
        hint = "the stored value carries no tag: it is a constant, or the loop that computes it may not run"
    path = trace_path(tg.trace, ev)
    return ObligationResult(
        "output-contract", "violated", span, "output contract violated", w, detail, path, hint, expl, res.seconds
    )


# -- declared tags against the contract ------------------------------------------------------------

def check_tag_agreement(kernel: ir.Kernel, timeout_s: float) -> list:
    """One result per declared input tag that a contract reads and that disagrees with (violated)
    or cannot be compared with (unknown) its output's tag; nothing where they agree."""
    out = []
    for contract in kernel.contracts:
        target = kernel.tag_of(contract.tensor)
        if target is None:
            continue
        seen = set()
        for elem in ir.contract_elements(contract.expr):
            decl = kernel.declared_tag(elem.tensor)
            if decl is None or (elem.tensor, elem.indices) in seen:
                continue  # an implied tag agrees by construction
            if not set(elem.indices) <= set(contract.index_vars):
                # read at a reduction's variable: its components follow its own axes, which the
                # reduction stars and drops, so they need not line up with the output's one by one
                continue
            seen.add((elem.tensor, elem.indices))
            res = _compare(kernel, contract, target, elem, decl, timeout_s)
            if res is not None:
                out.append(res)
    return out


def _compare(kernel, contract, target, elem, decl, timeout_s) -> ObligationResult | None:
    start = time.perf_counter()
    with int_encoding():
        terms = SizeTerms(kernel)
        sizes = {n: Z.var(n) for n in kernel.sizes}
        idx = {v: Z.var(f"index {v}") for v in (*contract.index_vars, *elem.indices)}
        cons = [s >= 1 for s in sizes.values()] + [s <= Z.MAX_SIZE for s in sizes.values()]
        cons += [x >= 0 for x in idx.values()]
        cons += _inside(kernel, contract.tensor, contract.index_vars, idx, sizes, terms)
        cons += _inside(kernel, elem.tensor, elem.indices, idx, sizes, terms)
        cons += [Z.i2b(terms.term(r, sizes)) for r in kernel.requires]
        at_out = dict(zip(target.index_vars, contract.index_vars, strict=True))
        at_elem = dict(zip(decl.index_vars, elem.indices, strict=True))
        for k, comp in enumerate(decl.components):
            if comp is None or k >= len(target.components):
                continue
            used = {at_elem[x.name] for x in ir.walk_iexpr(comp) if isinstance(x, ir.IVar) and x.name in at_elem}
            if not used <= set(contract.index_vars):
                continue  # a reduction's variable: the reduction stars this component
            mine = terms.term(comp, {**sizes, **{n: idx[v] for n, v in at_elem.items()}})
            theirs = terms.term(target.components[k], {**sizes, **{n: idx[v] for n, v in at_out.items()}})
            if mine is None or theirs is None:
                continue  # a component the encoding cannot express: no claim either way
            s = z3.Solver()
            s.set("timeout", max(1, int(timeout_s * 1000)))
            s.add(*cons, mine != theirs)
            verdict = s.check()
            if verdict == z3.unsat:
                continue
            where = f"{elem.tensor}[{', '.join(elem.indices)}]"
            what = (f"component {k} of the tag of {where} ({fmt_iexpr(comp)}) and of "
                    f"{contract.tensor}[{', '.join(contract.index_vars)}] ({fmt_iexpr(target.components[k])})")
            seconds = time.perf_counter() - start
            if verdict != z3.sat:
                return ObligationResult("output-contract", "unknown", decl.span,
                                        f"output contract not established: could not compare {what} "
                                        f"(the contract reads {where}): {s.reason_unknown()}",
                                        detail={"reason": s.reason_unknown()}, seconds=seconds)
            m = s.model()
            values = {v: m.eval(x, model_completion=True).as_long() for v, x in idx.items()}
            values.update({n: m.eval(x, model_completion=True).as_long() for n, x in sizes.items()})
            shown = ", ".join(f"{n} = {v}" for n, v in values.items())
            return ObligationResult(
                "output-contract", "violated", decl.span,
                f"the declared tags disagree with the contract: {what} differ",
                witness={"sizes": {n: values[n] for n in sizes}},
                detail={"tensor": elem.tensor, "component": k, "values": values},
                hint=f"the contract reads {where} into {contract.tensor}[{', '.join(contract.index_vars)}], so "
                     "their tags must name the same output element; a proof about these tags would be about "
                     "another computation than the contract's",
                explanation=[f"at {shown}"], seconds=seconds)
    return None


def _inside(kernel, tensor, indices, idx, sizes, terms) -> list:
    """index < extent for each dimension of `tensor` read at the contract variables `indices`."""
    param = kernel.param(tensor)
    out = []
    for v, d in zip(indices, param.shape, strict=True):
        extent = terms.term(d, sizes)
        if extent is not None:
            out.append(idx[v] < extent)
    return out
