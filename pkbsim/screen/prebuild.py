"""Builds a candidate's CUDA extensions before the functional stage, on a limit of their own.

A cold build of an inline-CUDA extension takes tens of seconds (nvcc, then g++ against torch); inside the
functional stage it would run on the simulated world's clock, on one rank while the others wait. So the
candidate is imported once beforehand, outside any world, under the same `load_inline` stand-in: every
extension it builds at import lands in the cache, and the ranks' own imports then find it there. What
fails at this import (code that needs a process group, a device) is left for the ranks to meet again.
"""
from __future__ import annotations

import threading

from pkbsim.screen.candidate import Session, loader

BUILD_MARKERS = ("load_inline", "cpp_extension")


def prebuild(session: Session, reference, limit: float) -> None:
    """Import the candidate once with its extensions built; give up waiting after `limit` seconds (the
    ranks then wait for the build that is still running, with the world's clock stopped)."""
    if not any(map(session.mentions, BUILD_MARKERS)):
        return
    load = loader(session, reference)

    def run() -> None:
        try:
            load()
        except BaseException:  # noqa: BLE001 - the ranks' own import reports it, in the world
            pass

    worker = threading.Thread(target=run, name="pkb-prebuild", daemon=True)
    worker.start()
    worker.join(limit)
