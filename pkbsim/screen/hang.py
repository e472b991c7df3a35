"""Tells a hang of the candidate from a slow simulation when a run reaches its timeout.

A hang the wait-for check can see (every rank blocked) is reported as a deadlock long before the timeout.
What reaches the timeout is a rank running outside any simulated wait: either the candidate's own code
looping (its fault), or the simulator still working for it (an interpreter executing a large kernel,
the CPU doing a GPU's arithmetic): pkb's limit. While the run lasts, `Watch` samples where each rank
thread is; at the timeout, the samples of the last seconds say which it was.
"""
from __future__ import annotations

import collections
import os
import sys
import threading
from dataclasses import dataclass

from pkbsim.screen.limits import owns

PERIOD_S = 0.5
RECENT = 10  # samples per rank kept (the last ~5 s)


@dataclass
class Spot:
    file: str
    line: int


class Watch:
    """Samples the innermost Python frame of every simulated rank thread of this process, in the background."""

    def __init__(self):
        self.recent: dict[str, collections.deque] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pkb-hang-watch", daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(PERIOD_S):
            self._sample()

    def _sample(self) -> None:
        """One sample; no frame outlives it (a frame kept alive keeps the rank's objects, and their files,
        alive past the run)."""
        frames = sys._current_frames()
        try:
            for th in threading.enumerate():
                frame = frames.get(th.ident)
                if th.name.startswith("pkbsim-rank-") and frame is not None:
                    spots = self.recent.setdefault(th.name, collections.deque(maxlen=RECENT))
                    spots.append(Spot(frame.f_code.co_filename, frame.f_lineno))
        finally:
            frames.clear()
            frame = None

    def candidate_loop(self, candidate: str) -> Spot | None:
        """Where the candidate's own code spins, when most recent samples of some rank are in it; None when
        the ranks were in the simulator's (or a library's) code: the simulation was still working."""
        for spots in self.recent.values():
            own = [s for s in spots if owns(candidate, s.file)]
            if spots and len(own) * 2 > len(spots):
                return own[-1]
        return None


def site(spot: Spot) -> str:
    return f"{os.path.abspath(spot.file)}:{spot.line}"
