"""Exploit class: a candidate that changes the machine's kernel settings (/proc/sys). Run by the user root,
a sandboxed process is still uid 0 to the kernel, and bwrap's /proc left the files of /proc/sys writable to
it (it covers the folder only where the folder itself is writable, and it is not): a candidate could set
vm.swappiness or any other machine-wide setting without a capability (found at 7a289ba). The sandbox binds
/proc/sys read-only now. The probe writes each setting's own value back, so nothing changes even where the
write goes through; with the sandbox off, the same files are writable to this process when it runs as root
(the test's buggy twin, seen without writing)."""
import errno
import os
import subprocess
import sys

import pytest

import candidate_sandbox as sandbox

SETTINGS = ["/proc/sys/vm/swappiness", "/proc/sys/kernel/printk_ratelimit"]
PROBE = ("import sys\nfor path in sys.argv[1:]:\n    try:\n        value = open(path).read()\n"
         "        with open(path, 'w') as f:\n            f.write(value)\n        print('wrote', path)\n"
         "    except OSError as e:\n        print('denied', path, e.errno)\n")


def test_no_kernel_setting_is_writable_inside_the_sandbox():
    proc = subprocess.run([*sandbox.prefix(), sys.executable, "-c", PROBE, *SETTINGS],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc
    lines = proc.stdout.splitlines()
    assert [line.rsplit(" ", 1)[0] for line in lines] == [f"denied {path}" for path in SETTINGS], proc.stdout
    assert {int(line.rsplit(" ", 1)[1]) for line in lines} <= {errno.EROFS, errno.EACCES}, proc.stdout


def test_the_ones_that_exist_are_readable_inside_the_sandbox():
    code = "import sys; print(open('/proc/sys/kernel/ns_last_pid').read().strip())"
    proc = subprocess.run([*sandbox.prefix(), sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and int(proc.stdout) > 1, proc  # the supervisor's tripwire reads it


@pytest.mark.skipif(os.geteuid() != 0, reason="only the user root can write these outside")
def test_outside_the_sandbox_root_could_write_them():
    assert all(os.access(path, os.W_OK) for path in SETTINGS)
