"""A class-level lock made on first use, and a context manager that deletes it on exit if it made it (the
shape of tqdm's `_lock` and `tqdm.contrib.concurrent.ensure_lock`): in a real launch each rank process has its
own. Imported by the program in tests/test_torch_programs.py."""
import contextlib
import threading


class Bar:
    @classmethod
    def get_lock(cls):
        if not hasattr(cls, "_lock"):
            cls._lock = threading.RLock()
        return cls._lock

    def __init__(self):
        with self.get_lock():
            pass

    def close(self):
        with self._lock:
            pass


@contextlib.contextmanager
def ensure_lock(cls):
    old = getattr(cls, "_lock", None)
    cls._lock = old or cls.get_lock()
    yield cls._lock
    if old is None:
        del cls._lock
