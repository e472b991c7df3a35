"""Process 1 of a sandbox's PID namespace: caps on CPU time and on the number of processes and threads.

RLIMIT_NPROC cannot cap one sandbox (it counts a user's processes machine-wide, and not at all for root,
whose processes stay root's under a user namespace), so this process counts the namespace's own: inside
it, /proc lists exactly the sandbox's processes. It starts the command, and every POLL seconds sums their
threads and reads each one's CPU time; past a cap it prints one line (LINE: what, how much, the cap) to
stderr, kills every process of the namespace and exits with BREACH_EXIT. RLIMIT_CPU (a little above the
cap) is the kernel's backstop should this process be starved. As process 1 it cannot be killed or stopped
from inside the namespace, and when it ends the kernel ends the whole namespace. It also reaps orphans,
as process 1 must. Its exit status is the command's (a death by signal N as 128 + N, as a shell reports
it). Standard library only: it runs as a script before anything else is imported.

Usage: supervisor.py MAX_TASKS CPU_SECONDS -- COMMAND... (CPU_SECONDS 0: no cap on CPU time)
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time

POLL = 0.05
BREACH_EXIT = 86
LINE = "pkb sandbox: "           # how the breach line starts (candidate_sandbox.breach finds it in a log)
BACKSTOP = 2.0                    # RLIMIT_CPU's soft limit is this much above the cap, its hard limit twice
TICK = os.sysconf("SC_CLK_TCK")


def tasks_and_cpu(me: int) -> tuple[int, int, float, str]:
    """(processes, threads, the largest CPU time of one process in seconds, that process) in view."""
    procs = threads = 0
    worst, who = 0.0, ""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        if fields[0] == "Z":
            continue
        procs += 1
        threads += int(fields[17])
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        if cpu > worst:
            worst, who = cpu, f"{entry} ({head.split('(', 1)[1]})"
    return procs, threads, worst, who


def breach(max_tasks: int, cpu_seconds: float, me: int) -> str:
    """The line naming the first cap the sandbox's processes are over, or ""."""
    procs, threads, worst, who = tasks_and_cpu(me)
    if threads > max_tasks:
        return (f"{LINE}{procs} processes with {threads} threads ran in the sandbox, over its cap of {max_tasks} "
                f"processes and threads (a fork bomb?): every process in the sandbox was killed")
    if cpu_seconds and worst > cpu_seconds:
        return (f"{LINE}process {who} used {worst:.1f} s of CPU time, over the sandbox's cap of {cpu_seconds:g} s: "
                f"every process in the sandbox was killed")
    return ""


def main(argv: list[str]) -> int:
    max_tasks, cpu_seconds, command = int(argv[0]), float(argv[1]), argv[3:]

    def limits() -> None:  # in the command's process (so not in this one), inherited by all it starts
        soft = int(cpu_seconds + BACKSTOP)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + int(BACKSTOP)))
    child = subprocess.Popen(command, preexec_fn=limits if cpu_seconds else None)
    me = os.getpid()
    while True:
        while True:  # reap: the command, and orphans re-parented to process 1
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if pid == child.pid:
                code = os.waitstatus_to_exitcode(status)
                return code if code >= 0 else 128 - code
        line = breach(max_tasks, cpu_seconds, me)
        if line:
            print(line, file=sys.stderr, flush=True)
            os.kill(-1, signal.SIGKILL)  # every process of the namespace but this one
            return BREACH_EXIT
        time.sleep(POLL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
