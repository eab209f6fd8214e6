"""Schedules of the numpy interpreter: in which order the threads of a block advance.

A block's threads are cut into scheduling units (whole warps by default, narrower groups where
independent thread scheduling lets a warp's lanes drift apart). Each unit runs the statement stream
as a generator, vectorised over its threads and the batch of blocks, and stops at every statement;
a policy picks which unit advances next. Units wait for each other only where the hardware makes
them: at `barrier()` (the whole block) and at warp collectives (shuffles, warp reductions: the
warp's units). Shared memory is then real memory in that interleaving: a store is visible to
whichever unit reads after it.

`lockstep` is the exception and the default: all threads form one unit, and shared memory follows
docs/language.md's visibility rule (a store is seen by its own thread at once and by the others
after the next barrier), so a missing barrier reads stale NaN without any adversarial order.

Schedule strings: `NAME[:N][,width=W][,copies=late|early][,blocks=batch|serial|reverse]`

    lockstep             every thread together (the default)
    warps                unit 0 runs to its next barrier, then unit 1, ... (each phase)
    reverse              the last unit first
    random:SEED          a random order of the units in each phase, each to its barrier (SEED: 0 .. 2**32-1)
    interleave:SEED      a random unit advances one statement at a time (SEED: 0 .. 2**32-1)
    round-robin          one statement per unit in turn (lockstep over real memory)
    one-warp-ahead[:U]   unit U (default 0; one of the block's units) runs to its barrier first, the
                         others round-robin
    warpgroups[:1]       each warpgroup its own unit, meeting only at barriers and mbarriers (Hopper
                         kernels; runtime/interp_roles.py), with lockstep's memory model: the last
                         ready warpgroup runs first (the producer ahead), with :1 the first (warpgroup 0
                         ahead, the others lagging). Kernels with warpgroup roles run so under lockstep;
                         a kernel without roles runs each 128 threads as one unit (one unit when the
                         block has at most 128 threads: then it is lockstep)

`width` is the number of threads per unit (a divisor of 32; default 32). `copies=early` lands each
async copy at its issue instead of at the wait that retires it (`late`, the default): the two
extremes the hardware allows, late exposing reads before the wait, early exposing a copy that
overwrites a buffer other warps still read. `blocks=serial` runs one block at a time in launch
order, `blocks=reverse` the last block first (the default, `batch`, runs blocks side by side, each
statement in every block before the next): blocks run in no fixed order on the GPU, so a block that
reads what another writes, or two that write one element, give different results under these.
"""

from __future__ import annotations

import attrs
import numpy as np

from argus_verify.diagnostics import ArgusError, ArgusRuntimeError

ORDERS = ("lockstep", "warps", "reverse", "random", "interleave", "round-robin", "one-warp-ahead", "warpgroups")
WIDTHS = (1, 2, 4, 8, 16, 32)


@attrs.frozen
class Schedule:
    order: str = "lockstep"
    arg: int | None = None  # random/interleave: the seed; one-warp-ahead: the unit that runs ahead
    width: int = 32
    copies: str = "late"
    blocks: str = "batch"

    @classmethod
    def parse(cls, text: str | Schedule) -> Schedule:
        if isinstance(text, Schedule):
            return text
        head, *options = [p.strip() for p in str(text).split(",")]
        order, colon, arg = head.partition(":")
        if colon and not arg:
            raise ArgusError(f"schedule {text!r}: nothing after ':' (give a number, e.g. {order}:1, or leave out the "
                             "':')")
        fields: dict = {"order": order, "arg": _integer(arg, text) if colon else None}
        for opt in options:
            key, _, value = opt.partition("=")
            if key == "width":
                fields["width"] = _integer(value, text)
            elif key == "copies":
                fields["copies"] = value
            elif key == "blocks":
                fields["blocks"] = value
            else:
                raise ArgusError(f"schedule {text!r}: unknown option {key!r} (width=, copies=, blocks=)")
        return cls(**fields).checked(text)

    def checked(self, text) -> Schedule:
        if self.order not in ORDERS:
            raise ArgusError(f"unknown schedule {text!r} (one of {', '.join(ORDERS)})")
        if self.width not in WIDTHS:
            raise ArgusError(f"schedule {text!r}: width must be one of {WIDTHS}")
        if self.copies not in ("late", "early"):
            raise ArgusError(f"schedule {text!r}: copies must be late or early")
        if self.blocks not in ("batch", "serial", "reverse"):
            raise ArgusError(f"schedule {text!r}: blocks must be batch, serial or reverse")
        if self.order in ("lockstep", "warpgroups") and self.width != 32:
            raise ArgusError(f"schedule {text!r}: lockstep runs every thread together; it takes no width")
        if self.order == "warpgroups" and self.arg not in (None, 0, 1):
            raise ArgusError(f"schedule {text!r}: warpgroups takes 0 (last ready first) or 1 (first ready first)")
        if self.arg is not None and self.order not in ("random", "interleave", "one-warp-ahead", "warpgroups"):
            raise ArgusError(f"schedule {text!r}: {self.order} takes no argument")
        if self.order in ("random", "interleave") and self.arg is not None and not 0 <= self.arg < 2**32:
            raise ArgusError(f"schedule {text!r}: the seed must be an integer from 0 to {2**32 - 1}")
        if self.order == "one-warp-ahead" and self.arg is not None and self.arg < 0:
            raise ArgusError(f"schedule {text!r}: the unit that runs ahead is a number from 0 (the first)")
        return self

    def check_block(self, threads: int, text=None) -> Schedule:
        """Arguments that depend on the kernel: one-warp-ahead's unit must be one of the block's
        units (`threads` / width of them)."""
        units = -(-threads // self.width)
        if self.order == "one-warp-ahead" and self.arg is not None and self.arg >= units:
            raise ArgusError(f"schedule {str(text or self)!r}: unit {self.arg} runs ahead, but a block of {threads} "
                             f"threads has {units} units of {self.width} threads (0 to {units - 1})")
        return self

    @property
    def lockstep(self) -> bool:
        return self.order == "lockstep"

    @property
    def lockstep_memory(self) -> bool:
        """docs/language.md's visibility rule for shared memory (lockstep and warpgroups)."""
        return self.order in ("lockstep", "warpgroups")

    def policy(self) -> Policy:
        arg = self.arg if self.arg is not None else 0
        return {"lockstep": InOrder, "warps": InOrder, "warpgroups": InOrder, "reverse": Reverse,
                "round-robin": RoundRobin, "random": lambda: RandomOrder(arg), "interleave": lambda: RandomSteps(arg),
                "one-warp-ahead": lambda: Ahead(arg)}[self.order]()

    def __str__(self) -> str:
        text = self.order + (f":{self.arg}" if self.arg is not None else "")
        text += f",width={self.width}" if self.width != 32 else ""
        text += ",copies=early" if self.copies == "early" else ""
        return text + (f",blocks={self.blocks}" if self.blocks != "batch" else "")


def _integer(text: str, whole) -> int:
    try:
        return int(text)
    except ValueError:
        raise ArgusError(f"schedule {whole!r}: {text!r} is not an integer") from None


# ---------------------------------------------------------------------------------------------
# policies: which ready unit advances next


class Policy:
    def begin(self, units: int) -> None:
        """A batch of `units` scheduling units starts."""

    def pick(self, ready: list[int]) -> int:
        raise NotImplementedError

    def next_phase(self) -> None:
        """A barrier released every unit."""


class InOrder(Policy):
    def pick(self, ready):
        return ready[0]


class Reverse(Policy):
    def pick(self, ready):
        return ready[-1]


class RoundRobin(Policy):
    last = -1

    def pick(self, ready):
        later = [i for i in ready if i > self.last]
        self.last = later[0] if later else ready[0]
        return self.last


class RandomOrder(Policy):
    """A fresh random priority of the units in every phase; the first ready unit by priority runs."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def begin(self, units):
        self.rank = self.rng.permutation(units)

    def pick(self, ready):
        return min(ready, key=lambda i: self.rank[i])

    def next_phase(self):
        self.begin(len(self.rank))


class RandomSteps(Policy):
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def pick(self, ready):
        return ready[int(self.rng.integers(len(ready)))]


class Ahead(RoundRobin):
    def __init__(self, unit: int):
        self.unit = unit

    def begin(self, units):
        self.ahead = self.unit % units

    def pick(self, ready):
        return self.ahead if self.ahead in ready else super().pick(ready)


# ---------------------------------------------------------------------------------------------
# what units stop at


@attrs.frozen
class Arrival:
    """A unit at `barrier()`: its threads that arrive, [blocks, threads of the unit]."""

    stmt: object
    loop: tuple
    active: np.ndarray


@attrs.frozen
class WarpSync:
    """A unit at a warp collective: `compute(*payload)` over the whole warp, each payload array with
    the threads on axis 1, gives the result for the warp's threads (axis 1 again)."""

    stmt: object
    loop: tuple
    payload: tuple
    compute: object


READY, AT_BARRIER, AT_SYNC, DONE = "ready", "barrier", "sync", "done"


@attrs.define
class UnitState:
    unit: object  # a ThreadGroup: .first_thread, .count, .run()
    steps: object  # its generator
    status: str = READY
    event: object = None
    resume: object = None

    @property
    def warp(self) -> int:
        return self.unit.first_thread // 32

    def advance(self) -> None:
        try:
            event = self.steps.send(self.resume)
        except StopIteration:
            self.status = DONE
            return
        self.resume = None
        self.event = event
        self.status = AT_BARRIER if isinstance(event, Arrival) else AT_SYNC if isinstance(event, WarpSync) else READY


def drive(units: list, policy: Policy, batch) -> None:
    """Run one batch's units to the end under `policy`; `batch.barrier()` publishes at barriers."""
    states = [UnitState(u, u.run()) for u in units]
    policy.begin(len(states))
    while True:
        ready = [i for i, st in enumerate(states) if st.status == READY]
        if ready:
            st = states[policy.pick(ready)]
            st.advance()
            if st.status == AT_SYNC:
                meet_in_warp(states, st.warp)
            continue
        if all(st.status == DONE for st in states):
            return
        release_barrier(states, batch)
        policy.next_phase()


def meet_in_warp(states: list[UnitState], warp: int) -> None:
    """Run a warp collective once every unit of the warp has reached it."""
    members = [st for st in states if st.warp == warp]
    if any(st.status == READY for st in members):
        return
    first = next(st.event for st in members if st.status == AT_SYNC)
    stuck = [st for st in members
             if st.status != AT_SYNC or st.event.stmt is not first.stmt or st.event.loop != first.loop]
    if stuck:
        raise ArgusRuntimeError(
            f"warp collective reached by only some lanes of warp {warp} (threads from "
            f"{stuck[0].unit.first_thread} on are elsewhere): shfl.sync would hang or misbehave", first.stmt.span)
    parts = [np.concatenate(arrays, axis=1) for arrays in zip(*(st.event.payload for st in members), strict=True)]
    result = first.compute(*parts)
    start = 0
    for st in members:
        st.resume = result[:, start:start + st.unit.count]
        start += st.unit.count
        st.status = READY


def release_barrier(states: list[UnitState], batch) -> None:
    """Every unit is at a barrier or done: check that each block's threads all arrived at one
    barrier (or none did), then let them go on."""
    waiting = [st for st in states if st.status != DONE]
    if any(st.status == AT_SYNC for st in waiting):
        # a warp whose last unit stopped at a barrier (or ended) instead of joining the collective
        meet_in_warp(states, next(st.warp for st in waiting if st.status == AT_SYNC))
    first = waiting[0].event
    arrived = np.zeros((batch.G, batch.threads), dtype=bool)
    for st in waiting:
        if st.event.stmt is first.stmt and st.event.loop == first.loop:
            arrived[:, st.unit.first_thread:st.unit.first_thread + st.unit.count] = st.event.active
    partial = arrived.any(axis=1) & ~arrived.all(axis=1)
    if partial.any():
        g = int(np.nonzero(partial)[0][0])
        t = int(np.nonzero(~arrived[g])[0][0])
        raise ArgusRuntimeError(
            f"barrier reached by only some threads of block {tuple(int(b) for b in batch.blocks[g])} "
            f"(thread {t} does not arrive): the kernel would hang or misbehave", first.stmt.span)
    batch.barrier()
    for st in waiting:
        st.status = READY
