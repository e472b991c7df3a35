"""Compare one tree's refactor_identity.sh folder against one or more folders of the tree before the change.

    python benchmarks/refactor_identity_compare.py AFTER BEFORE [BEFORE ...]

Each file: identical to some BEFORE folder's, or not. A batch's rows (`pkb run --json`, `pkb report --json`)
are also compared one by one, since the simulated world names whichever rank got there first in some
findings (the broken candidates' mismatch, race and error rows differ between two runs of one tree): a row is
'as before' where it equals that row of some BEFORE run; for the others the verdict, stage and reason kinds
are printed beside each BEFORE run's. Prints numbers, asserts nothing (two BEFORE runs show what varies).
"""
from __future__ import annotations

import json
import pathlib
import sys

BATCHES = ("run_default.out", "report_json.out")


def rows(folder: pathlib.Path, name: str) -> dict[tuple[str, str], dict]:
    doc = json.loads((folder / name).read_text())
    return {(r["task"], r["candidate"]): r for r in doc["results" if "results" in doc else "rows"]}


def summary(row: dict) -> tuple:
    return row["verdict"], row["stage"], [r["kind"] for r in row["reasons"]]


def main(after: pathlib.Path, befores: list[pathlib.Path]) -> None:
    for f in sorted(after.iterdir()):
        same = any((b / f.name).exists() and (b / f.name).read_bytes() == f.read_bytes() for b in befores)
        print(f"{f.name}: {'identical' if same else 'differs'}")
        if same or f.name not in BATCHES:
            continue
        now, then = rows(after, f.name), [rows(b, f.name) for b in befores]
        other = [k for k in now if not any(t.get(k) == now[k] for t in then)]
        print(f"  {len(now) - len(other)} of {len(now)} rows as before")
        for k in other:
            print(f"  {k[1].rsplit('/', 1)[-1]}: {summary(now[k])}; before: "
                  f"{[summary(t[k]) if k in t else None for t in then]}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), [pathlib.Path(p) for p in sys.argv[2:]])
