"""Errors the PTX interpreter raises; each carries one line a user can act on. They hang below the
simulator's root (pkbsim/errors.py), whose NotSimulated and CompileError the interpreter raises too."""
from pkbsim.errors import CompileError, NotSimulated, SimulatorError, SimulatorLimit

__all__ = ["CompileError", "InstructionBudget", "KernelHang", "MemoryFault", "NotSimulated", "PtxError"]


class PtxError(SimulatorError):
    """Base class of the interpreter's own errors: the message is a single line naming the problem and,
    where possible, the fix."""


class MemoryFault(PtxError):
    """An access outside every mapped region (the CPU analogue of an illegal address)."""


class KernelHang(PtxError):
    """Every thread waits on a barrier that cannot open, or the kernel executed a trap."""


class InstructionBudget(KernelHang, SimulatorLimit):
    """The launch ran past the interpreter's instruction budget: it may be an endless loop, but pkb cannot
    tell it from a long kernel, so it is pkb's limit (the screen is inconclusive), not the candidate's fault."""

    def limit_line(self) -> str:
        return f"PTX interpreter limit: {self}"
