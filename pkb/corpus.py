"""The labelled corpus (tests/corpus): read each program's header, run it, score the checker.

Header (leading comment block of each program):
    # pkb-corpus
    # family: C1
    # world_sizes: 2, 4
    # expect: mismatch
    # twin: C1_order_fixed.py
    # options: --lazy-p2p-init          (optional)
Scoring follows the MPI bug-benchmark practice: per family, a buggy case is a true positive when the
verdict equals its label, a fixed twin a true negative when the verdict is ok; a run that hangs or
crashes the checker is inconclusive.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass, field

from pkb.cli import check_cmd
from pkbsim import RunOptions, check_script, install_plugins


@dataclass
class Case:
    path: str
    family: str
    expect: str
    world_sizes: list[int]
    twin: str = ""
    options: list[str] = field(default_factory=list)
    title: str = ""

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def buggy(self) -> bool:
        return self.expect != "ok"


def parse_header(path: str) -> Case | None:
    fields: dict[str, str] = {}
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0].strip() != "# pkb-corpus":
        return None
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        key, _, value = line[1:].partition(":")
        fields[key.strip()] = value.strip()
    missing = {"family", "expect", "world_sizes"} - fields.keys()
    if missing:
        raise ValueError(f"{path}: corpus header lacks {sorted(missing)}")
    return Case(path, fields["family"], fields["expect"], [int(x) for x in fields["world_sizes"].split(",")],
                fields.get("twin", ""), fields.get("options", "").split(), fields.get("title", ""))


def load_corpus(root: str) -> list[Case]:
    cases = [parse_header(os.path.join(root, n)) for n in sorted(os.listdir(root)) if n.endswith(".py")]
    return [c for c in cases if c is not None]


def run_options(case: Case, world_size: int, timeout: float | None = None) -> RunOptions:
    """The header's `options` are `pkb check` flags: parse them the way the command does. The limit per run
    is `pkb check`'s own --timeout default unless `timeout` is given (the corpus scores that command)."""
    limit = [] if timeout is None else ["--timeout", str(timeout)]
    try:
        args = check_cmd.parse([*limit, *case.options, case.path])
    except SystemExit:
        raise ValueError(f"{case.name}: bad options {case.options!r} in the corpus header") from None
    return check_cmd.run_options(args, world_size, io.StringIO())


@dataclass
class Outcome:
    case: Case
    world_size: int
    verdict: str
    wall_s: float
    message: str = ""

    @property
    def correct(self) -> bool:
        return self.verdict == self.case.expect

    @property
    def conclusive(self) -> bool:
        return self.verdict != "timeout" or self.case.expect == "timeout"


def run_case(case: Case, world_size: int, timeout: float | None = None) -> Outcome:
    """One program at one world size, checked as `pkb check` checks it: with the world's plug-ins (symmetric
    memory, Triton, inline CUDA) registered here, so that any caller gets them."""
    install_plugins()  # as `pkb check` does
    res = check_script(case.path, [], run_options(case, world_size, timeout))
    msg = res.findings[0].message if res.findings else ""
    return Outcome(case, world_size, res.verdict, res.wall_s, msg)


def score(outcomes: list[Outcome]) -> dict[str, dict]:
    """Per family: TP/FN over buggy runs, TN/FP over fixed runs, precision, recall, conclusiveness."""
    table: dict[str, dict] = {}
    for o in outcomes:
        row = table.setdefault(o.case.family, {"tp": 0, "fn": 0, "tn": 0, "fp": 0, "runs": 0, "inconclusive": 0})
        row["runs"] += 1
        row["inconclusive"] += not o.conclusive
        if o.case.buggy:
            row["tp" if o.correct else "fn"] += 1
        else:
            row["tn" if o.correct else "fp"] += 1
    for row in table.values():
        flagged = row["tp"] + row["fp"]
        row["precision"] = row["tp"] / flagged if flagged else 1.0
        row["recall"] = row["tp"] / (row["tp"] + row["fn"]) if row["tp"] + row["fn"] else 1.0
        row["conclusiveness"] = 1 - row["inconclusive"] / row["runs"]
    return table
