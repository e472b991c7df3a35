"""The simulator's errors, in one hierarchy: whose fault a failure is decides the screen's verdict.

    SimulatorError            the root: an error pkbsim raises on purpose
    ├── SimulatorLimit        pkb's own limit (not modelled, not affordable, not installed here): the
    │   │                     screen is inconclusive, naming it in one line (`limit_line`); never the
    │   │                     candidate's fault
    │   ├── NotSimulated      a feature the simulator does not implement; reported, never guessed
    │   └── CannotSimulate    what inline CUDA needs is missing here (nvcc, a CPU build of torch)
    └── CandidateFault        the candidate's own bug: the screen rejects it, with a site in its file
        └── CompileError      its source (Python or CUDA) does not compile

The PTX interpreter's own errors (pkbsim/ptx/errors.py) hang below the root too. The scorer's CompileError
(hwbackend/worker.py) is a root of its own: hwbackend never imports pkbsim, and nothing catches both.
Imports nothing, so every layer of pkbsim can raise these.
"""
from __future__ import annotations


CPU_OOM = "DefaultCPUAllocator: can't allocate memory"  # torch's CPU allocator failing (a RuntimeError)


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is the process running out of memory (Python's, or torch's CPU allocator under an
    address-space cap): every simulated rank's data lives in one process, so that is a limit of pkb."""
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and CPU_OOM in str(exc))


class SimulatorError(Exception):
    """The root of the errors pkbsim raises on purpose; the message is one line a user can act on."""


class SimulatorLimit(SimulatorError):
    """A limit of pkb, not the candidate's fault: the screen calls the candidate inconclusive."""

    def limit_line(self) -> str:
        """The one line the screen names the limit with."""
        return f"{type(self).__name__}: {self}"


class NotSimulated(SimulatorLimit):
    """A feature the simulator does not implement; reported, never guessed. With `where` (the interpreters'
    form: an instruction and its file:line) the message reads 'not simulated: <what> at <where>'; without,
    it is `what` as given."""

    def __init__(self, what: str, where: str | None = None):
        self.what, self.where = what, where
        super().__init__(what if where is None else f"not simulated: {what} at {where}")

    def __reduce__(self):  # picklable with its two arguments (BaseException pickles `args`: the message alone)
        return type(self), (self.what, self.where)

    def limit_line(self) -> str:
        text = str(self)
        return text if text.startswith("not simulated") else f"not simulated: {text}"


class CannotSimulate(SimulatorLimit, RuntimeError):
    """Inline CUDA cannot run on the simulated world here (no nvcc): pkb's limit.
    A RuntimeError too, as the builders' own failures are."""


class CandidateFault(SimulatorError):
    """The candidate's own bug: the screen rejects it."""


class CompileError(CandidateFault):
    """The candidate's source does not compile (or the toolchain rejects it)."""
