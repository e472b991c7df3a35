"""What the scorer records a score into, as it goes: a `Recorder`, handed in by whoever asks for the score
(`ScoreOptions.store`).

The results file and the candidate hash that keys its rows belong to the shell's one store module
(pkb/store.py: its `ScoreStore` is the recorder `pkb score` and `pkb run --score` hand in). hwbackend may not
import the shell (tests/test_layering.py), so it names only the calls it makes: it passes the candidate's
file, and the store hashes it with the hash every table of the file shares. The scorer thus opens no file
and computes no hash of its own; a score without a recorder is kept nowhere.
"""
from __future__ import annotations

from typing import Protocol

from hwbackend.result import ScoreResult


class Recorder(Protocol):
    def completed(self, task: str, candidate: str, nproc: int, backend: str,
                  timed: bool = True) -> ScoreResult | None:
        """The latest finished result for this file's content, task and size (with timed=True, not a
        correctness-only one), or None."""

    def start(self, run_id: str, task: str, candidate: str, label: str, nproc: int, backend: str) -> None:
        """A run begins: the candidate's file (its absolute path) and the group it is ranked in."""

    def trial(self, run_id: str, phase: str, idx: int, rank: int, ok: bool, message: str) -> None:
        """One checked call's outcome on one rank, as it completes."""

    def finish(self, result: ScoreResult) -> None:
        """The run's result, at its end (also after a failure)."""
