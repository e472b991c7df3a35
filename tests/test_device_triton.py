"""Triton kernels on simulated ranks: peer pointers, spin waits in the deadlock check, co-residency,
per-peer byte counts, and the lowering of host symmetric-memory calls into the protocol IR."""
import io
import os

import pytest

from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

from conftest import HERE

triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")
CORPUS = os.path.join(HERE, "corpus")


def check(name: str, nproc: int = 2):
    return check_script(os.path.join(CORPUS, name), [], RunOptions(nproc=nproc, output=io.StringIO()))


def test_one_shot_all_reduce_follows_peer_pointers_and_counts_peer_bytes():
    res = check("dev_D6_triton_one_shot_no_exit_barrier_fixed.py", nproc=4)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    launches = [r for r in res.traces[0].records if r["kind"] == "compute" and r["op"] == "one_shot_all_reduce"]
    assert len(launches) == 2  # one per call
    read, written = launches[0]["peer_bytes"]["read"], launches[0]["peer_bytes"]["write"]
    assert read == {1: 128 * 4, 2: 128 * 4, 3: 128 * 4}  # each peer's whole buffer, once
    assert written == {1: 16, 2: 16, 3: 16}  # 2 programs x 2 barriers x one 4-byte flag per peer


def test_spin_on_a_slot_nobody_signals_is_reported_with_kernel_line_and_slot():
    # at 4 ranks (at 2, program 1 consumes its own program 0's signal and reads rank 0's buffer unordered:
    # the stale read is reported before the hang)
    res = check("dev_D1_triton_wait_wrong_slot_bug.py", nproc=4)
    assert res.verdict == "protocol" and res.exit_code == 3
    details = "\n".join(res.findings[0].details)
    assert "signal pad, channel" in details and "slot" in details
    assert "dev_D1_triton_wait_wrong_slot_bug.py:" in details and "one_shot_all_reduce[program" in details


def test_waiting_for_a_later_program_of_the_same_launch_is_co_residency_not_a_hang():
    res = check("dev_D7_triton_grid_wait_co_residency_bug.py")
    assert {f.kind for f in res.findings} == {"co_residency"} and res.verdict == "protocol"  # one per rank
    assert "partial_sums" in res.findings[0].message
    assert check("dev_D7_triton_grid_wait_co_residency_fixed.py").verdict == "ok"


def test_relaxed_flags_are_reported_as_missing_release_acquire():
    res = check("dev_D4_triton_relaxed_barrier_flags_bug.py")
    race = next(f for f in res.findings if f.kind == "race")
    assert "release" in race.message and len(race.sites) == 2


def test_host_symmetric_memory_calls_lower_to_signal_wait_barrier_events(run_program):
    res = run_program("""
        import torch.distributed._symmetric_memory as symm_mem
        from pkbsim.device.protocol import device_state
        from pkbsim.world.context import require
        buf = symm_mem.empty(16, device="cuda")
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
        hdl.barrier(channel=0)
        buf.fill_(1.0)
        hdl.put_signal((rank + 1) % world)
        hdl.wait_signal((rank - 1) % world)
        if rank == 0:
            kinds = device_state(require().world).log.kinds(0)
            assert kinds[0] == "barrier" and kinds[-3:] == ["put", "signal", "wait"], kinds
    """)
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_missing_triton_gives_one_clear_line(monkeypatch):
    import sys

    from pkbsim.device.install import MISSING, _TritonImportHook
    from pkbsim.world.patching import Patches

    hook = _TritonImportHook(Patches())
    monkeypatch.setattr(sys, "meta_path", [hook])
    with pytest.raises(ModuleNotFoundError) as err:
        hook.find_spec("triton", None)
    assert str(err.value) == MISSING and "pip install" in MISSING
