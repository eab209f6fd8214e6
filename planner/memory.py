"""In-context memory (ICRL): the run's past candidates with their verdicts, counterexamples and
rewards, best and most instructive first, within a token budget.

Order: passing candidates by reward (best first), then failures, those with a verifier
counterexample or a numerical mismatch before front-end errors, most recent first, one per distinct
feedback (a repeated mistake is said once, with its count). The best candidate and the latest
failure carry their full source; the others a one-line summary. Tokens are estimated at four
characters each (the backend reports the exact counts the budget is charged with).
"""

from __future__ import annotations

__all__ = ["build_memory", "estimate_tokens"]

INSTRUCTIVE = {"violated": 0, "wrong": 1, "fault": 1, "unproved": 2, "crashed": 3, "timeout": 3, "check-error": 4,
               "malformed": 5}


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _summary(c: dict) -> str:
    r = c.get("result") or {}
    verdict = r.get("verdict", "pending")
    meta = c.get("meta") or {}
    knobs = f" knobs {meta['knobs']}" if meta.get("knobs") else ""
    reward = f", reward {r['reward']:.3f}" if r.get("verdict") == "pass" else ""
    return f"candidate {c['id']} (iteration {c['iteration']}{knobs}): {verdict}{reward}"


def _feedback(c: dict, limit: int = 1500) -> str:
    fb = (c.get("result") or {}).get("feedback", "")
    return fb if len(fb) <= limit else fb[:limit] + "\n  ... (cut)"


def build_memory(candidates: list[dict], budget_tokens: int = 3000) -> str:
    """The memory section of the prompt ('' when there is nothing to remember)."""
    done = [c for c in candidates if c.get("result")]
    if not done:
        return ""
    passing = sorted((c for c in done if c["result"].get("verdict") == "pass"),
                     key=lambda c: (-float(c["result"].get("reward", 0.0)), c["id"]))
    failing = sorted((c for c in done if c["result"].get("verdict") != "pass"),
                     key=lambda c: (INSTRUCTIVE.get(c["result"].get("verdict"), 6), -c["id"]))
    seen: dict[str, int] = {}
    distinct = []
    for c in failing:
        key = c["result"].get("feedback", "").split("\n")[0]
        if key in seen:
            seen[key] += 1
            continue
        seen[key] = 1
        distinct.append(c)
    latest_fail = max(failing, key=lambda c: c["id"]) if failing else None
    parts = ["## What this run has tried (best and most instructive first)"]
    used = estimate_tokens(parts[0])
    for i, c in enumerate(passing + distinct):
        full = (i == 0 and passing and c is passing[0]) or c is latest_fail
        lines = [_summary(c)]
        if c["result"].get("verdict") != "pass":
            n = seen.get(c["result"].get("feedback", "").split("\n")[0], 1)
            if n > 1:
                lines[0] += f" (this mistake {n} times)"
            lines.append(_feedback(c, 1500 if full else 300))
        if full and c.get("source"):
            lines += ["```argus", c["source"].rstrip("\n"), "```"]
        text = "\n".join(lines)
        cost = estimate_tokens(text)
        if used + cost > budget_tokens:
            if full:  # fall back to the summary line
                text = "\n".join(lines[:2])[:600]
                cost = estimate_tokens(text)
            if used + cost > budget_tokens:
                parts.append(f"({len(passing) + len(distinct) - i} more candidates left out for the token budget)")
                break
        parts.append(text)
        used += cost
    return "\n\n".join(parts)
