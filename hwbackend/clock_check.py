"""The worker's times against the scorer's clock: a candidate can patch anything in the worker it runs in
(its timer's code, the Guard's clock, the channel that reports the times), so the times it reports count
only where they agree with a clock outside its process.

For every timed batch the scorer has its own clock from "go" to the last rank's "done" (`wall`) and the
worker's time for the batch (the slowest rank's: `reported`). The difference is the harness's own work
outside the timed region (barriers, syncs, the round trip of the messages): the same code in the
reference's worker as in the candidate's. It is measured per call on the reference, a process
no candidate ran in, together with how much it varies from batch to batch. A candidate's batch whose
wall time exceeds its reported time plus that overhead by more than the tolerance is time its worker did
not report; when most of its batches do (the median: one preempted batch is noise, a patched clock shows
in every batch) it is an integrity finding naming both numbers. The tolerance is also the largest share
of a batch a patch could hide unseen, so the verdict's noise margin is never below it (timing.summarize):
no patch of a Python name can move a score beyond the margin without a finding. Longer batches amortise
the round trip and make it tighter: the scorer sizes them so (batch_size.py).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

# of a batch's wall time, by backend: the clocks' agreement is never trusted below this. A GPU batch is timed by
# the device's clock over tens of milliseconds, which the host's agrees with far closer than 0.5%; gloo's
# CPU machines are shared and preempt a batch at will
RELATIVE = {"nccl": 0.005, "gloo": 0.02}
# seconds per batch, by backend: what one scheduling delay can add to a batch whatever the reference's batches
# showed (there may be one). NCCL: a GPU host's round trip and wake-ups; gloo: the CPU machines that run it
# are shared (a 2-core test machine at load 13 put 5 ms into one honest batch of 19 ms)
FLOOR = {"nccl": 1e-4, "gloo": 1e-2}
OVER_REPORT = 1.05       # a worker may not report more than the scorer saw (with 5% and 1 ms of slack)
SETTLED = 6              # reference batches from which the harness's overhead per batch counts as measured


@dataclass(frozen=True)
class BatchClock:
    """One timed batch as both clocks saw it (seconds)."""
    wall: float      # the scorer's clock, from "go" to the last rank's "done"
    reported: float  # the worker's per-call times, the slowest rank's per call, summed
    calls: int

    @property
    def gap(self) -> float:
        return self.wall - self.reported


@dataclass(frozen=True)
class Calibration:
    """The harness's overhead outside the timed regions, measured on the reference's batches."""
    per_call: float  # seconds per call: the median of the reference's batches
    jitter: float    # seconds: how far a reference batch's gap strays from per_call * calls (robust: see calibrate)
    floor: float     # seconds per batch (FLOOR)
    relative: float  # of a batch (RELATIVE)

    batches: int = 0  # the reference's batches it was measured on

    def tolerance(self, batch: BatchClock) -> float:
        """How much of `batch` may go unreported before it counts: a share of it, twice the reference's jitter
        and the floor; and half the expected overhead where the reference had too few batches (SETTLED) to
        know it. Measured on 8 batches it is known: on an H100 the reference's batches' overhead varied by
        0.1-0.3 ms of 1.5 ms, and half of it as slack was 2.7% of a 28 ms batch, the whole of the margin."""
        unsure = 0.5 * self.per_call * batch.calls if self.batches < SETTLED else 0.0
        return self.relative * batch.wall + 2 * self.jitter + unsure + self.floor


@dataclass(frozen=True)
class Agreement:
    """What the cross-check found for one job's batches (shares are of a batch's wall time, medians)."""
    unexplained: float   # the share of a batch the worker did not report, beyond the harness's overhead
    tolerance: float     # the share a patched clock could hide without a finding
    findings: list[str] = field(default_factory=list)


def calibrate(reference: list[BatchClock], backend: str) -> Calibration:
    floor, relative = FLOOR.get(backend, max(FLOOR.values())), RELATIVE.get(backend, max(RELATIVE.values()))
    if not reference:
        return Calibration(0.0, 0.0, floor, relative)
    per_call = statistics.median(b.gap / b.calls for b in reference)
    deviations = sorted(abs(b.gap - per_call * b.calls) for b in reference)
    # one preempted reference batch is noise, as one of the candidate's is (cross_check takes medians): the
    # largest deviation left out; on an H200 it made the tolerance 13.8 times a 1.2 ms batch, a noise margin
    # under which no candidate could ever be faster
    return Calibration(per_call, deviations[-2] if len(deviations) > 2 else deviations[-1], floor, relative,
                       len(reference))


def cross_check(reference: list[BatchClock], batches: list[BatchClock], backend: str) -> Agreement:
    """The batches of one job (reference or candidate: the same rule) against the reference's calibration."""
    if not batches:
        return Agreement(0.0, 0.0)
    cal = calibrate(reference, backend)
    findings = [f"the worker's clock reported {b.reported * 1e3:.3f} ms for a batch that took {b.wall * 1e3:.3f} ms "
                f"by the scorer's clock" for b in batches if b.reported > b.wall * OVER_REPORT + 1e-3]
    unexplained = [b.gap - cal.per_call * b.calls for b in batches]
    tolerance = [cal.tolerance(b) for b in batches]
    if statistics.median(u - t for u, t in zip(unexplained, tolerance)) > 0:
        wall, reported = sum(b.wall for b in batches), sum(b.reported for b in batches)
        overhead = cal.per_call * sum(b.calls for b in batches)
        findings.append(f"the worker reported {reported * 1e3:.3f} ms for {len(batches)} batches that took "
                        f"{wall * 1e3:.3f} ms by the scorer's clock: {sum(unexplained) * 1e3:.3f} ms unaccounted "
                        f"for beyond the harness's {overhead * 1e3:.3f} ms (tolerance {sum(tolerance) * 1e3:.3f} ms)")
    return Agreement(statistics.median(u / b.wall for u, b in zip(unexplained, batches)),
                     statistics.median(t / b.wall for t, b in zip(tolerance, batches)), findings)
