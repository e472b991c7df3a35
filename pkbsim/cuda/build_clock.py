"""How long extension builds ran in this process, counted once however many ranks waited for them."""
from __future__ import annotations

import contextlib
import threading
import time


class _BuildClock:
    """Wall time during which at least one build (or a wait for one) was running in this process: the
    screen reports it as build time, not as the stage's (8 ranks waiting for one build count once)."""

    def __init__(self):
        self._lock, self._active, self._since, self.total = threading.Lock(), 0, 0.0, 0.0

    @contextlib.contextmanager
    def running(self):
        with self._lock:
            if not self._active:
                self._since = time.perf_counter()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if not self._active:
                    self.total += time.perf_counter() - self._since


BUILD_CLOCK = _BuildClock()
