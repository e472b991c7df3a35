"""Exploit class: a candidate that changes its inputs and rewrites the check that would see it, inside its
own process. The screen judges mutation itself, from the inputs it made and those the candidate's process
hands back (a digest of them after each call). Twin: the honest out-of-place all_reduce passes."""
import pytest

from hostile import screen


@pytest.mark.parametrize("name, verdict", [("rewrite_mutation_flag.py", "reject"), ("honest_all_reduce.py", "pass")])
def test_a_candidate_cannot_hide_that_it_changed_its_inputs(name, verdict):
    code, out, _ = screen(name)
    assert out["verdict"] == verdict, out["reasons"]
    if verdict == "reject":
        assert out["reasons"][0]["kind"] == "modified_input", out["reasons"]


def test_a_digest_withheld_or_changed_counts_as_a_change():
    import torch

    from pkbsim.screen.functional import _changed
    from pkbsim.taskrun import input_digest
    made = input_digest((torch.arange(4.0), 3))
    assert _changed(input_digest((torch.arange(4.0), 3)), made) is False
    assert _changed(input_digest((torch.arange(4.0) * 0, 3)), made) is True
    assert _changed(input_digest((torch.arange(4, dtype=torch.int32), 3)), made) is True  # same values, other bytes
    assert _changed(None, made) is True                                                  # withheld
    assert _changed("anything", None) is None                                            # nothing made to compare
