"""The labelled corpus: every program gets its labelled verdict at every world size it lists."""
import importlib.util
import os
import subprocess
import sys

import pytest

from pkb.corpus import load_corpus, run_case, score

from conftest import HERE

CORPUS = os.path.join(HERE, "corpus")
CASES = load_corpus(CORPUS)


def test_corpus_is_paired_and_large_enough():
    names = {c.name: c for c in CASES}
    assert len(CASES) >= 60
    for c in CASES:
        assert c.twin in names, f"{c.name}: twin {c.twin!r} missing"
        twin = names[c.twin]
        assert twin.twin == c.name and twin.family == c.family
        assert (c.expect == "ok") != (twin.expect == "ok"), f"{c.name} and its twin must be one buggy, one fixed"
        assert c.expect in {"ok", "deadlock", "mismatch", "protocol", "error"}


@pytest.mark.parametrize("case,world_size", [(c, n) for c in CASES for n in c.world_sizes],
                         ids=lambda x: x.name if hasattr(x, "name") else str(x))
def test_corpus_verdict(case, world_size):
    if "triton" in case.name and importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install 'pkb[triton]'): Triton corpus programs need its interpreter")
    outcome = run_case(case, world_size, timeout=60)
    assert outcome.verdict == case.expect, outcome.message


def test_scoring_counts_true_and_false_positives():
    bug = next(c for c in CASES if c.buggy)
    fixed = next(c for c in CASES if not c.buggy)
    from pkb.corpus import Outcome
    table = score([Outcome(bug, 2, bug.expect, 0.1), Outcome(bug, 4, "ok", 0.1),
                   Outcome(fixed, 2, "deadlock", 0.1), Outcome(fixed, 4, "timeout", 0.1)])
    rows = list(table.values())
    tp = sum(r["tp"] for r in rows)
    fn = sum(r["fn"] for r in rows)
    fp = sum(r["fp"] for r in rows)
    assert (tp, fn, fp) == (1, 1, 2)
    assert sum(r["inconclusive"] for r in rows) == 1


def test_run_case_registers_the_worlds_plug_ins_itself():
    """pkb/corpus.py registers the plug-ins (as `pkb check` does), so a caller that did not (here a fresh
    process, without this suite's conftest.py) still gets a symmetric-memory program's labelled verdict."""
    case = next(c for c in CASES if c.name == "D1_wait_wrong_src_bug.py")
    code = ("import sys; from pkb.corpus import parse_header, run_case; "
            f"print(run_case(parse_header({case.path!r}), {case.world_sizes[0]}, timeout=60).verdict)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(HERE))
    assert out.stdout.strip().splitlines()[-1:] == [case.expect], out.stderr[-2000:]
