"""The watchdog of a run does not count the wall time other processes took from its cores: a run that
others slow down finishes instead of timing out, a run on an idle machine times out as before, and the
discount never stretches a run beyond MAX_STRETCH times its --timeout."""
import io
import itertools
import subprocess
import sys
import time

import pytest

from pkbsim.world import machine_load
from pkbsim.world.launcher import RunOptions, run_ranks
from pkbsim.world.machine_load import MAX_STRETCH, OthersClock


def spin(seconds: float):
    """A rank body that computes for `seconds` of wall time, outside any simulated wait."""
    def body(ctx):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            sum(range(1000))
    return body


@pytest.mark.parametrize("others_share, verdict", [(0.0, "timeout"), (0.7, "ok")])
def test_the_time_others_took_is_not_counted(monkeypatch, others_share, verdict):
    # 2.5 s of work against a 1.5 s limit: over it on a machine of its own, within it when others took 70%
    monkeypatch.setattr(OthersClock, "taken", lambda self, elapsed: others_share * elapsed)
    res = run_ranks(spin(2.5), RunOptions(nproc=2, timeout=1.5, output=io.StringIO()))
    assert res.verdict == verdict, [f.message for f in res.findings]


def test_a_run_never_gets_more_than_max_stretch_times_its_timeout(monkeypatch):
    busy = itertools.count(0, 1e6)  # every core busy with others a million seconds between two readings
    monkeypatch.setattr(machine_load, "_busy_seconds", lambda cores: next(busy))
    clock = OthersClock()
    assert clock.taken(10.0) == pytest.approx(10.0 * (1 - 1 / MAX_STRETCH))
    res = run_ranks(spin(60), RunOptions(nproc=2, timeout=0.5, output=io.StringIO()))
    assert res.verdict == "timeout" and res.wall_s < 0.5 * MAX_STRETCH + 10


BURN_AND_MEASURE = """
import os, subprocess, sys, time
from pkbsim.world.machine_load import MAX_STRETCH, OthersClock
clock = OthersClock()
t0 = time.perf_counter()
burn = ("import os, time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.0: pass\\n"
        "print(os.times().user + os.times().system)")
# started in the background of a shell that exits at once: not this process's children (whose CPU time the
# clock counts as its own, as an extension build's)
procs = [subprocess.Popen(["sh", "-c", '"$PY" -c "$BURN" &'], stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PY": sys.executable, "BURN": burn}) for _ in clock.cores]
burned = sum(float(p.communicate()[0]) for p in procs)
elapsed = time.perf_counter() - t0
print(clock.taken(elapsed), burned, len(clock.cores), elapsed, MAX_STRETCH)
"""


def test_cpu_another_process_burns_is_counted_as_taken():
    # In a fresh interpreter: a child an earlier test left unwaited, reaped while the clock runs (Popen reaps
    # them), would add all its CPU time to this process's own and hide the burners.
    out = subprocess.run([sys.executable, "-c", BURN_AND_MEASURE], capture_output=True, text=True, check=True)
    taken, burned, cores, elapsed, stretch = (float(x) for x in out.stdout.split())
    # at least what the burners used (others may have used more), spread over the cores, up to the cap
    assert taken >= min(0.9 * burned / cores, 0.99 * elapsed * (1 - 1 / stretch))
    assert OthersClock().taken(0.0) == 0.0  # nothing elapsed, nothing taken


def test_the_cores_counted_are_those_the_ranks_are_pinned_to(monkeypatch):
    seen = []
    real = OthersClock.__init__

    def init(self, cores=None):
        real(self, cores)
        seen.append(self.cores)

    monkeypatch.setattr(OthersClock, "__init__", init)
    last = max(OthersClock().cores)
    run_ranks(spin(0.1), RunOptions(nproc=2, timeout=30, output=io.StringIO(), pin_core=last))
    run_ranks(spin(0.1), RunOptions(nproc=2, timeout=30, output=io.StringIO(), pin_core=None))
    assert seen[1:] == [{last}, OthersClock().cores]
