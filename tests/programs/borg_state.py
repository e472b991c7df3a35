"""A "Borg" state: every instance takes one class-level dict as its `__dict__` and the first one fills it
(the shape of accelerate's PartialState): in a real launch each rank process has its own. Imported by the
program in tests/test_torch_programs.py."""
import os


class State:
    _shared_state: dict = {}

    def __init__(self):
        self.__dict__ = self._shared_state
        if not self.__dict__:
            self.rank = int(os.environ["RANK"])
