"""Exploit class: a candidate that traces the screening process, or writes through its /proc/<pid>/fd/1,
to print a PASS of its own and exit 0 while returning zeros. The candidate runs in PID and user namespaces
of its own, under a seccomp filter refusing ptrace, and the screen is not dumpable: stdout holds the
screen's one verdict, a reject. Twin: the honest all_reduce passes under the same confinement."""
from hostile import screen


def test_a_candidate_cannot_write_or_trace_the_verdict():
    code, res, _ = screen("trace_the_judge.py")
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output")


def test_the_honest_twin_passes():
    code, res, _ = screen("honest_all_reduce.py")
    assert (code, res["verdict"]) == (0, "pass"), res["reasons"]
