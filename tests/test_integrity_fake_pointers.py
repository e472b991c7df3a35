"""Exploit class: a shape-run artefact. The cost stage times both sides in a full-size shape run, where fake
tensors had no address of their own (every data_ptr() was 0), so a candidate that caches its result keyed on
its input's address found the cache full in the timed call and was predicted faster than it is (before the
fix: an infinite speed-up here, 4.6x in the issue). Now every fake storage has its own address for the length
of a shape run. The cheater's honest twin does the same work without the cache; the two predictions must
agree, and the cheater's is never above the twin's."""
import pathlib

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.timing.topology import load_topology
from pkbsim.standins.fake_pointers import ALIGN, BASE
from pkbsim.world.launcher import RunOptions, run_ranks
from tasks.registry import get

HERE = pathlib.Path(__file__).parent / "fake_pointer_candidates"


def _predict(name: str):
    res = screen(get("all_reduce"), str(HERE / f"{name}.py"), ScreenOptions(2, load_topology("hgx-h100"), seed=5))
    assert res.verdict == "pass" and res.correct, res.reasons      # both are right: only the cost tells them apart
    assert res.predicted is not None and not res.predicted.uncertain, res.predicted
    return res.predicted


def test_a_data_ptr_keyed_cache_gains_nothing_in_the_shape_run():
    cheat, honest = _predict("all_reduce__data_ptr_cache"), _predict("all_reduce__no_cache")
    assert cheat.speedup <= honest.speedup * 1.001, (cheat.speedup, honest.speedup)
    assert cheat.candidate_us >= honest.candidate_us * 0.999, (cheat.candidate_us, honest.candidate_us)


def _addresses(shape_run: bool) -> list[dict]:
    seen: list[dict] = [{} for _ in range(2)]

    def body(ctx):
        a, b = torch.ones(1000), torch.ones(1000)
        view = a[10:]
        again = a.view(10, 100)
        seen[ctx.rank] = {"a": a.data_ptr(), "b": b.data_ptr(), "view": view.data_ptr(), "again": again.data_ptr(),
                          "storage": a.untyped_storage().data_ptr(), "fake": isinstance(a, FakeTensor)}
    assert run_ranks(body, RunOptions(nproc=2, shape_run=shape_run)).verdict == "ok"
    return seen


@pytest.mark.parametrize("shape_run", [True, False])
def test_each_storage_has_its_own_stable_aligned_address(shape_run):
    """The same contract in a shape run as with real memory (the twin): distinct storages, distinct
    addresses; a view at its offset; the same storage, the same address."""
    for s in _addresses(shape_run):
        assert s["fake"] == shape_run
        assert s["a"] != s["b"] and s["a"] == s["again"] == s["storage"] and s["view"] == s["a"] + 10 * 4
        if shape_run:
            assert s["a"] >= BASE and s["a"] % ALIGN == 0 and s["b"] % ALIGN == 0
        else:
            assert 0 < s["a"] < BASE


def test_the_fake_addresses_last_only_for_the_shape_run():
    _addresses(True)
    assert "data_ptr" not in vars(FakeTensor) and "data_ptr" not in vars(torch.UntypedStorage)
    assert 0 < torch.ones(3).data_ptr() < BASE
