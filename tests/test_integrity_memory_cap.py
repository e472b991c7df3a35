"""Exploit class: a candidate that takes the machine's memory. Every sandbox's process 1
(candidate_sandbox/supervisor.py) sums the resident memory of the sandbox's processes (anonymous and shared
pages, and its private tmpfs mounts) and, past a cap, kills the sandbox and names the cap in one line. Shown
on the bare sandbox (a hog in one process, a hog spread over forked processes, a hog that fills /dev/shm),
on `pkb score` (status "error", a resource_limit finding) and on `pkb screen` (inconclusive naming the cap,
JSON too: the simulation's own state counts against it, so on a CPU it is a limit of pkb's, and the GPU
decides), each with its honest twin under the same cap (PKB_SANDBOX_MEMORY_GB, small so the tests are cheap).
Asserts are on verdicts, never on speed."""
import json
import os
import subprocess
import sys

import pytest

import candidate_sandbox as sandbox
from candidate_sandbox.supervisor import BREACH_EXIT
from hwbackend.score import Protocol, ScoreRequest, score
from pkb.cli.main import main

from conftest import HERE

HOG = os.path.join(HERE, "memory_candidates", "memory_hog.py")
HONEST = os.path.join(HERE, "candidates", "reference_copy.py")
CAP_GB = "2"  # the cap of the scored and screened twins: the honest ones hold well under 1 GiB here
NEEDLE = "of resident memory, over the sandbox's cap of 2 GiB: every process in the sandbox was killed"

# touches 32 MiB at a time up to `limit` MiB (bounded: a broken cap must not take the machine down), then waits
ONE = ("import time\nkept = []\nwhile len(kept) * 32 < {limit}:\n    b = bytearray(32 << 20)\n"
       "    b[::4096] = b'x' * len(b[::4096])\n    kept.append(b)\ntime.sleep(30)\n")
# four processes, each holding a quarter: no process is large, together they are
SPREAD = "import os\nfor _ in range(2):\n    os.fork()\n" + ONE
# a file on the sandbox's own /dev/shm (a tmpfs: memory that no process maps)
SHM = ("import time\nwith open('/dev/shm/fill', 'wb') as f:\n    for _ in range({limit} // 32):\n"
       "        f.write(b'x' * (32 << 20))\ntime.sleep(30)\n")


def _inside(memory_mib, code):
    limits = sandbox.Limits(memory_bytes=memory_mib << 20)
    cmd = [*sandbox.prefix(limits=limits), sys.executable, "-c", code]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("code,limit", [(ONE, 1024), (SPREAD, 256), (SHM, 1024)], ids=["one", "spread", "shm"])
def test_a_memory_hog_is_stopped_at_the_cap_on_resident_memory_and_named(code, limit):
    proc = _inside(512, code.format(limit=limit))  # 1 GiB in all against a cap of 512 MiB
    assert proc.returncode == BREACH_EXIT, proc
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "of resident memory, over the sandbox's cap of 0.5 GiB" in line, line


@pytest.mark.parametrize("code,limit", [(ONE, 128), (SPREAD, 32), (SHM, 128)], ids=["one", "spread", "shm"])
def test_the_same_processes_under_the_cap_run_to_their_end(code, limit):
    proc = _inside(512, code.format(limit=limit).replace("time.sleep(30)", "time.sleep(1)"))
    assert proc.returncode == 0 and proc.stderr == "", proc


def test_the_cap_defaults_to_a_share_of_the_machine_and_an_env_var_overrides_it(monkeypatch):
    monkeypatch.delenv(sandbox.MEMORY_GB, raising=False)
    machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert sandbox.Limits().effective().memory_bytes == int(0.75 * machine)
    assert sandbox.Limits.for_timeout(300).effective().memory_bytes == int(0.75 * machine)
    monkeypatch.setenv(sandbox.MEMORY_GB, "1.5")
    assert sandbox.Limits().effective().memory_bytes == 3 << 29


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setenv(sandbox.MEMORY_GB, CAP_GB)


def _score(path):
    return score(ScoreRequest("all_reduce", path, 2, "gloo"), Protocol(launches=1, batches=1, calls=2, timeout=150))


@pytest.mark.slow
def test_a_scored_memory_hog_is_an_error_naming_the_cap(small_cap):
    res = _score(HOG)
    assert res.status == "error", res
    (finding,) = [f for f in res.findings if f.kind == "resource_limit"]
    assert NEEDLE in finding.message and "\n" not in finding.message, finding


@pytest.mark.slow
def test_the_honest_twin_is_scored_under_the_same_cap(small_cap):
    res = _score(HONEST)
    assert res.correct and res.status in ("slower", "faster"), res
    assert not [f for f in res.findings if f.kind == "resource_limit"], res


def _screen(capsys, path):
    code = main(["screen", path, "--task", "all_reduce", "--world-size", "2", "--no-cost", "--json"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_screened_memory_hog_is_inconclusive_naming_the_cap(capsys, small_cap):
    code, out, err = _screen(capsys, HOG)
    res = json.loads(out)  # a JSON verdict although the screening process died with the sandbox
    assert code == 3 and res["verdict"] == "inconclusive" and res["reasons"][0]["kind"] == "memory_limit", (code, out)
    assert NEEDLE in res["reasons"][0]["message"], res
    assert [line for line in err.splitlines() if NEEDLE in line], err


def test_the_screened_honest_twin_passes_under_the_same_cap(capsys, small_cap):
    code, out, err = _screen(capsys, HONEST)
    assert (code, json.loads(out)["verdict"]) == (0, "pass"), err


@pytest.mark.parametrize("path,verdict", [(HOG, "inconclusive"), (HONEST, "pass")], ids=["hog", "honest"])
def test_a_batch_names_the_cap_on_memory(tmp_path, capsys, small_cap, path, verdict):
    # `pkb run`'s worker has its own limit too (--memory-gb, address space per process); both are pkb's: the
    # sandbox's cap, on all the worker's processes together, counts the simulation's state as well
    code = main(["run", path, "--tasks", "all_reduce", "--world-size", "2", "--no-cost", "--json",
                 "--db", str(tmp_path / "r.sqlite"), "--workers", "1"])
    (res,) = json.loads(capsys.readouterr().out)["results"]
    assert res["verdict"] == verdict, res
    if verdict == "inconclusive":
        assert res["reasons"][0]["kind"] == "memory_limit" and NEEDLE in res["reasons"][0]["message"], res
    assert code == 0


def test_only_the_sandboxs_own_tmpfs_counts_as_its_memory():
    """A working folder of /tmp itself is bound over the sandbox's private /tmp: that is the machine's disk
    there, whose used space is no memory of the sandbox (counted, every screen started in /tmp was killed at
    its first scan for "24 GiB"). The buggy twin: the same mount table with /tmp still a tmpfs counts it."""
    from candidate_sandbox.supervisor import own_tmpfs
    mounts = ("22 1 254:0 / / ro,relatime - ext4 /dev/vda rw\n"
              "30 22 0:40 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw\n"
              "31 22 0:41 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw\n")
    assert own_tmpfs(mounts) == ("/tmp", "/dev/shm")
    bound_over = mounts + "40 30 254:0 /tmp /tmp ro,relatime - ext4 /dev/vda rw\n"
    assert own_tmpfs(bound_over) == ("/dev/shm",)


@pytest.mark.parametrize("how", ["started in /tmp", "/tmp writable"])
def test_a_sandbox_in_the_machines_tmp_can_write_and_is_not_charged_its_disk(how):
    """Started in /tmp, the command keeps its private /tmp (the working folder was bound read-only over it:
    no temporary file could be made); given /tmp as a writable folder (an output beside it), the machine's
    /tmp covers the private one and its disk is not the sandbox's memory."""
    st = os.statvfs("/tmp")
    used_mib = (st.f_blocks - st.f_bfree) * st.f_frsize >> 20
    if used_mib < 1024:
        pytest.skip(f"/tmp's file system holds {used_mib} MiB here: too little to show the bug")
    limits = sandbox.Limits(memory_bytes=(used_mib // 2) << 20)   # below the disk's use, far above the command's
    code = "import os, tempfile; fd, path = tempfile.mkstemp(); os.close(fd); os.unlink(path); print('ok')"
    cwd = os.getcwd()
    try:
        os.chdir("/tmp")
        writable = ["/tmp"] if how == "/tmp writable" else []
        cmd = [*sandbox.prefix(writable=writable, limits=limits), sys.executable, "-c", code]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        os.chdir(cwd)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc
