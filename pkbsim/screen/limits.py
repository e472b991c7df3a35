"""Which failures are pkb's own limits, not the candidate's fault: the screen calls those inconclusive
(named in one line) and sends the candidate on to GPU scoring, instead of rejecting it.

Limits are recognised by kind, not by where they are raised: any `SimulatorLimit` (pkbsim/errors.py: the
simulator's NotSimulated, the interpreters' instruction budget, a ParallelKernelBench problem's budgets, a
header not installed here), memory exhaustion (also torch's CPU allocator failing under the worker's
address-space limit), and an optional package missing from this installation.
"""
from __future__ import annotations

import os
import traceback

from candidate_sandbox import on_memory
from pkbsim.errors import SimulatorLimit, out_of_memory
from pkbsim.world.sites import _is_plumbing

CANDIDATE_MODULE = "pkb_candidate_"  # the module name prefix candidate files are imported under (candidate.py)
INSTALL_HINTS = {"triton": "pip install 'pkb[triton]'", "ray": "pip install 'pkb[ray]'"}


def limit_of(exc: BaseException) -> str | None:
    """One line naming the limit of pkb behind `exc`, or None when `exc` is the candidate's own (a class the
    candidate defines never counts, whatever its name)."""
    if type(exc).__module__.startswith(CANDIDATE_MODULE):
        return None
    if isinstance(exc, SimulatorLimit):
        return exc.limit_line()
    if out_of_memory(exc):
        return "the simulation ran out of memory (the worker's --memory-gb)"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return missing_package(exc.name)
    return None


def memory_cap(breach: str) -> str | None:
    """The line that makes a screen ended by the sandbox's cap `breach` inconclusive, or None where the candidate
    broke it (processes, CPU time: a reject). The cap on resident memory counts the simulation's own state
    (simulated device memory, race shadows), not the candidate's memory alone: an honest candidate with large
    buffers can break it on a CPU and run on a GPU, and a hog gains nothing from going on to GPU scoring."""
    if not on_memory(breach):
        return None
    return f"{breach} (the simulation's own state counts against this cap: a limit of pkb, not the candidate's fault)"


def missing_package(module: str) -> str:
    root = module.split(".")[0]
    return f"{root} not installed: {INSTALL_HINTS.get(root, f'pip install {root}')}"


def owns(candidate: str, filename: str) -> bool:
    """Whether `filename` is the candidate's code: its file or a helper module beside it."""
    return not _is_plumbing(filename) and os.path.dirname(os.path.abspath(filename)) == os.path.dirname(candidate)


def own_site(candidate: str, exc: BaseException) -> str | None:
    """'path:line' of the innermost frame of exc's traceback in the candidate's own file (else in a helper
    beside it); None when the candidate's code is not on the traceback (the failure is pkb's)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for pick in (lambda f: os.path.abspath(f.filename) == candidate, lambda f: owns(candidate, f.filename)):
        hits = [f for f in frames if pick(f)]
        if hits:
            return f"{hits[-1].filename}:{hits[-1].lineno}"
    return None
