"""The perf gate's time ratios: two operations measured interleaved, round by round.

A ratio of two separately measured benchmarks moves with whatever else the machine did
between them. Here each round times the subject and then the reference (the next round
the reference first), so both see the same moment of the machine; the ratio of a round
is the reference's time per operation over the subject's (how many times faster the
subject is), and a try's figure is the median of its rounds' ratios. A try below its
minimum is measured again, up to ``TRIES`` tries; every try is kept for the report.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fastlock.tools.bench import Timing
from fastlock.tools.c_floor import load_floor_script, run_c_floor

TRIES = 3
ROUNDS = 15

FLOOR_RETRIED: list[str] = []
"""Every failed C floor run that was run again (``run_c_floor``'s one retry), for the summary."""


@dataclass(frozen=True)
class Side:
    """One side of a pair: ``run_round()`` does one round and returns seconds per operation."""

    name: str
    run_round: Callable[[], float]


def loop_side(name: str, op: Callable[[], object], ops: int) -> Side:
    """A side calling ``op`` ``ops`` times per round in this process, GC off while timed."""

    def run_round() -> float:
        gc.disable()
        try:
            started = time.perf_counter()
            for _ in range(ops):
                op()
            return (time.perf_counter() - started) / ops
        finally:
            gc.enable()

    return Side(name, run_round)


def c_floor_side(name: str, command: Sequence[str], requests: int, url: str) -> Side:
    """A side running the C floor (``command`` sends ``requests`` requests to ``url``) as a
    subprocess, timed by the wall time it reports. The reference script is loaded on ``url``
    now and again before a retry (a run that failed is run once more: ``run_c_floor``)."""
    load_floor_script(url)

    def retried(why: str) -> None:
        FLOOR_RETRIED.append(f"{name}: {why}")
        load_floor_script(url)

    def run_round() -> float:
        timing = Timing(requests)
        run_c_floor(command, timing, on_retry=retried)
        return timing.wall[0] / requests

    return Side(name, run_round)


def interleaved_ratios(subject: Side, reference: Side, rounds: int) -> list[float]:
    """Per-round ratios (reference time per op / subject time per op), the order of the two
    alternating from round to round."""
    ratios = []
    for i in range(rounds):
        if i % 2 == 0:
            mine = subject.run_round()
            theirs = reference.run_round()
        else:
            theirs = reference.run_round()
            mine = subject.run_round()
        ratios.append(theirs / mine)
    return ratios


@dataclass
class PairResult:
    """Every try of one gated pair, each a list of per-round ratios."""

    label: str
    subject: str
    reference: str
    minimum: float
    tries: list[list[float]] = field(default_factory=list)

    @property
    def medians(self) -> list[float]:
        return [statistics.median(ratios) for ratios in self.tries]

    @property
    def passed(self) -> bool:
        return any(median >= self.minimum for median in self.medians)

    def lines(self) -> list[str]:
        """One line per try: its median, the minimum, and the per-round ratios."""
        out = []
        for n, (median, ratios) in enumerate(zip(self.medians, self.tries, strict=True), 1):
            verdict = "ok" if median >= self.minimum else "BELOW"
            rounds = " ".join(f"{r:.2f}" for r in ratios)
            out.append(
                f"{self.label} try {n}: median {median:.2f} (minimum {self.minimum}) {verdict}; "
                f"per round [{rounds}]"
            )
        return out


def measure_pair(
    label: str,
    subject: Side,
    reference: Side,
    minimum: float,
    *,
    tries: int = TRIES,
    rounds: int = ROUNDS,
) -> PairResult:
    """Warm both sides up with one round each, then measure tries until one's median meets
    ``minimum`` or ``tries`` tries are spent."""
    subject.run_round()
    reference.run_round()
    result = PairResult(label, subject.name, reference.name, minimum)
    while len(result.tries) < tries and not result.passed:
        result.tries.append(interleaved_ratios(subject, reference, rounds))
    return result
