"""A factored UCB1 bandit over the knowledge base's parametric transformations.

Each knob (tile, stages, vec, rows, swizzle, unroll, ...) is an independent arm set: a value's score
is its mean reward over the candidates that used it plus an exploration bonus; untried values come
first (in the knowledge base's order). A configuration already evaluated is never proposed again:
the bandit then changes one knob at a time, best-scoring changes first.
"""

from __future__ import annotations

import itertools
import json
import math

__all__ = ["Bandit"]


def _key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


class Bandit:
    def __init__(self, knobs: dict[str, list], defaults: dict, c: float = 0.5):
        self.knobs = {k: list(v) for k, v in knobs.items()}
        self.defaults = {k: defaults[k] for k in self.knobs if k in defaults}
        self.c = c
        self.stats: dict[tuple[str, str], list] = {}  # (knob, value json) -> [count, total reward]
        self.seen: set[str] = set()
        self.total = 0

    def observe(self, config: dict, reward: float) -> None:
        self.seen.add(_key(config))
        self.total += 1
        for k, v in config.items():
            s = self.stats.setdefault((k, json.dumps(v)), [0, 0.0])
            s[0] += 1
            s[1] += float(reward)

    def mark(self, config: dict) -> None:
        """A configuration proposed (its result may come later): never propose it twice."""
        self.seen.add(_key(config))

    def score(self, knob: str, value) -> float:
        n, tot = self.stats.get((knob, json.dumps(value)), [0, 0.0])
        if n == 0:
            return math.inf
        return tot / n + self.c * math.sqrt(math.log(max(self.total, 1) + 1) / n)

    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values()) if self.knobs else 1

    def propose(self) -> dict | None:
        """The next configuration, or None when every one has been tried."""
        if not self.seen:
            first = {k: self.defaults.get(k, v[0]) for k, v in self.knobs.items()}
            if _key(first) not in self.seen:
                return first
        best = {k: max(v, key=lambda x, k=k: (self.score(k, x), -v.index(x))) for k, v in self.knobs.items()}
        if _key(best) not in self.seen:
            return best
        # change one knob at a time away from the best, the highest-scoring changes first
        moves = sorted(((self.score(k, x), k, x) for k, v in self.knobs.items() for x in v if x != best[k]),
                       key=lambda m: -m[0])
        for _, k, x in moves:
            cand = {**best, k: x}
            if _key(cand) not in self.seen:
                return cand
        for combo in itertools.product(*self.knobs.values()):
            cand = dict(zip(self.knobs, combo, strict=True))
            if _key(cand) not in self.seen:
                return cand
        return None
