"""SARIF 2.1.0 output for `argus audit` (and any list of VerifyReports): one run, one rule per
obligation, one result per violated or unknown obligation."""

from __future__ import annotations

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
RULES = {
    "race": "Data race: two threads access the same memory, one writes, nothing orders them",
    "barrier-divergence": "Barrier divergence: a barrier reached by some threads of a block and not others",
    "bounds": "Out-of-bounds access against the declared array size",
    "uninitialised-read": "Read of shared memory that no write produced",
    "cp-async": "cp.async data read before its group was waited for",
    "shuffle": "Warp shuffle from an inactive lane or a lane outside the member mask",
}
LEVEL = {"violated": "error", "unknown": "warning", "vacuous": "warning", "warning": "warning"}


def sarif_log(reports) -> dict:
    names = list(RULES)
    for r in reports:
        for res in r.results:
            if res.obligation not in names:
                names.append(res.obligation)
    rules = [{"id": n, "name": n, "shortDescription": {"text": RULES.get(n, n)},
              "helpUri": "https://github.com/argus-verify/argus/blob/main/docs/audit.md"} for n in names]
    results = []
    for rep in reports:
        for res in rep.results:
            if res.status == "proved":
                continue
            text = res.message
            if res.witness:
                from argus_verify.smt.report import format_witness

                text += " (witness: " + format_witness(res.witness) + ")"
            item = {"ruleId": res.obligation, "ruleIndex": names.index(res.obligation),
                    "level": LEVEL.get(res.status, "note"), "message": {"text": text},
                    "properties": {"kernel": rep.kernel, "status": res.status}}
            loc = res.location
            if loc is not None and loc.file:
                phys = {"artifactLocation": {"uri": loc.file}}
                if loc.line >= 1:
                    phys["region"] = {"startLine": loc.line, "startColumn": max(loc.col, 1)}
                item["locations"] = [{"physicalLocation": phys}]
            if res.witness:
                item["properties"]["witness"] = res.witness
            results.append(item)
    return {"$schema": SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "argus", "version": "0.1.0", "informationUri":
                                          "https://github.com/argus-verify/argus", "rules": rules}},
                      "results": results}]}
