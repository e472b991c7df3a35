"""ParallelKernelBench's names, without torch: its dtypes, a checkout as a value (Checkout), its problems'
`<id>_<name>` file stems, and which problem a solution file names.

Imported by the commands' argument parsers and by `pkb score` (which must not load the simulator to name
its task), so it imports nothing heavy at module level: the registry (and torch with it) only when two
problems compete for a file.

In a ParallelKernelBench-style `solutions_*` folder, `<id>_<name>_<backend>.py` is for the problem whose number
and name agree; solution trees made before a renumbering carry stale numbers (ParallelKernelBench's first
commit numbers its solutions from 34 on one above its own reference/), and renamed problems carry stale names.
"""
from __future__ import annotations

import ast
import inspect
import os
import re
import warnings
from dataclasses import dataclass

DTYPES = ("bfloat16", "float16", "float32", "float64")  # PKB's --dtype choices; bfloat16 is its default
DEFAULT_DTYPE = DTYPES[0]


@dataclass(frozen=True)
class Checkout:
    """Where a task's problem comes from: a checkout's root and the dtype its inputs are built in."""
    root: str
    dtype: str

    @classmethod
    def from_json(cls, doc: dict | None) -> Checkout | None:
        """The checkout a job's JSON names (`dataclasses.asdict` wrote it), or None where it names none."""
        return cls(**doc) if doc else None


class PairingWarning(UserWarning):
    """A file whose number and name point at different problems (paired, and said which way)."""


def problem_key(stem: str) -> tuple[int, str] | None:
    """(id, name) of a file stem `<id>_<name>[_<backend>]`, or None."""
    m = re.fullmatch(r"(\d+)_(\w+)", stem)
    return (int(m.group(1)), m.group(2)) if m else None


def parallelkernelbench_task_for(path: str, problem_ids: dict[int, str]) -> str | None:
    """The ParallelKernelBench problem of `<id>_<name>[_<backend>].py`: the one number and name agree on.
    Otherwise, with a PairingWarning: the one of them that names a problem; when they name two, the one whose
    reference takes the parameters of the file's `solution` (the name's when both or neither do)."""
    key = problem_key(os.path.basename(path)[:-3])
    if key is None:
        return None
    pid, rest = key
    names = {_name(slug): slug for slug in problem_ids.values()}
    by_name = names.get(rest) or names.get(rest.rsplit("_", 1)[0])
    by_number = problem_ids.get(pid)
    if by_name == by_number:
        return by_name
    if by_number is None:
        chosen, why = by_name, f"its number matches no problem of the checkout; paired by name with {by_name}"
    elif by_name is None:
        chosen, why = by_number, f"its name matches no problem of the checkout; paired by number with {by_number}"
    else:
        params = _solution_params(path)
        chosen = by_number if params == _params(by_number) != _params(by_name) else by_name
        why = (f"its number is {by_number}, its name {by_name}; paired with " + chosen +
               (" (its solution takes that reference's parameters)" if chosen == by_number else " by name"))
    warnings.warn(PairingWarning(f"{os.path.basename(path)}: {why}"), stacklevel=2)
    return chosen


def _name(slug: str) -> str:
    return problem_key(slug[len("pkb"):])[1]


def _params(slug: str) -> list[str]:
    from tasks.registry import get  # torch: only when a number and a name name two problems
    return list(inspect.signature(get(slug).reference).parameters)


def _solution_params(path: str) -> list[str] | None:
    """The parameter names of the file's top-level `def solution`, read without running the file."""
    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "solution":
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return None
