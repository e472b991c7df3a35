"""Exploit class: memory held where no process maps it and no file system of the sandbox shows it, to escape
the sandbox's cap on resident memory: a memfd written and never mapped (and one handed to a child, the parent's
copy closed), System V shared-memory segments detached after they were filled. The supervisor counts each memfd
open in the sandbox once by its inode (/proc/<pid>/fd, st_blocks) and every unattached segment of the
sandbox's own IPC namespace (/proc/sysvipc/shm); a hog of 1 GiB under a cap of 512 MiB is killed with the
cap named. The honest twins: the same code at an eighth of the size runs to its end. (A memfd that is mapped
is in its mappers' RssShmem, like a mapped /dev/shm file.)"""
import subprocess
import sys

import pytest

import candidate_sandbox as sandbox
from candidate_sandbox.supervisor import BREACH_EXIT

# writes {limit} MiB into a memfd, 32 MiB at a time (bounded: a broken cap must not take the machine down)
MEMFD = ("import os, time\nfd = os.memfd_create('hog')\nfor _ in range({limit} // 32):\n"
         "    os.write(fd, b'x' * (32 << 20))\ntime.sleep(30)\n")
# the same memfd held by a child only: the parent closes its own descriptor
HANDED = ("import os, time\nfd = os.memfd_create('hog')\nfor _ in range({limit} // 32):\n"
          "    os.write(fd, b'x' * (32 << 20))\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\n"
          "os.close(fd)\nos.wait()\n")
# System V segments of 32 MiB, each filled through a mapping, then detached: no process maps any of them
SYSV = ("import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
        "for _ in range({limit} // 32):\n    id_ = libc.shmget(0, ctypes.c_size_t(32 << 20), 0o1600)\n"
        "    assert id_ >= 0\n    addr = libc.shmat(id_, None, 0)\n    ctypes.memset(addr, 1, 32 << 20)\n"
        "    libc.shmdt(ctypes.c_void_p(addr))\ntime.sleep(30)\n")
# a descriptor number the supervisor has seen as /dev/null, closed and made a memfd (it looks again each second)
REUSED = ("import os, time\nfd = os.open('/dev/null', os.O_RDONLY)\ntime.sleep(0.5)\nos.close(fd)\n"
          "assert os.memfd_create('hog') == fd\nfor _ in range({limit} // 32):\n    os.write(fd, b'x' * (32 << 20))\n"
          "time.sleep(30)\n")
CASES = [(MEMFD, 1024), (HANDED, 1024), (SYSV, 1024), (REUSED, 1024)]
IDS = ["memfd", "handed_to_a_child", "sysv_detached", "reused_descriptor"]


def _inside(memory_mib, code):
    limits = sandbox.Limits(memory_bytes=memory_mib << 20)
    cmd = [*sandbox.prefix(limits=limits), sys.executable, "-c", code]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("code,limit", CASES, ids=IDS)
def test_memory_held_outside_any_mapping_is_counted_and_the_cap_named(code, limit):
    proc = _inside(512, code.format(limit=limit))  # twice the cap
    assert proc.returncode == BREACH_EXIT, proc
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "of resident memory, over the sandbox's cap of 0.5 GiB" in line, line


@pytest.mark.parametrize("code,limit", [(c, n // 8) for c, n in CASES], ids=IDS)
def test_the_same_under_the_cap_runs_to_its_end(code, limit):
    proc = _inside(512, code.format(limit=limit).replace("time.sleep(30)", "time.sleep(1)"))
    assert proc.returncode == 0 and proc.stderr == "", proc
