"""Errors the PTX interpreter raises; each carries one line a user can act on."""


class PtxError(Exception):
    """Base class: the message is a single line naming the problem and, where possible, the fix."""


class CompileError(PtxError):
    """nvcc (or the toolchain) rejected the source or is missing."""


class NotSimulated(PtxError):
    """The kernel uses something the interpreter does not model; never guessed."""

    def __init__(self, what: str, where: str = "?"):
        self.what, self.where = what, where
        super().__init__(f"not simulated: {what} at {where}")


class MemoryFault(PtxError):
    """An access outside every mapped region (the CPU analogue of an illegal address)."""


class KernelHang(PtxError):
    """The launch ran past its instruction budget or every thread waits on a barrier that cannot open."""
