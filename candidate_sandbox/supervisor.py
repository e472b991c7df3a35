"""Process 1 of a sandbox's PID namespace: caps on CPU time, on processes and threads, and on resident memory.

It starts the command and watches every process of the namespace (inside it, /proc lists exactly the
sandbox's processes); past a cap it prints one line (LINE: what, how much, the cap) to stderr, kills every
process of the namespace and exits with BREACH_EXIT. As process 1 it cannot be killed or stopped from
inside the namespace, and when it ends the kernel ends the whole namespace. It also reaps orphans, as
process 1 must. Its exit status is the command's (a death by signal N as 128 + N, as a shell reports it).
Standard library only: it runs as a script before anything else is imported.

- Processes and threads (zombies too: each holds its PID until it is reaped): every POLL seconds a full
  scan counts them. Between scans a tripwire (every TRIP seconds, one read of the namespace's last PID,
  /proc/sys/kernel/ns_last_pid) bounds how many tasks can exist: those last counted plus every PID handed
  out since; when that bound passes the cap, it counts at once (stopping as soon as the count is over). A
  fork bomb is thus seen within milliseconds of this process getting a core, not 50; on a loaded machine it
  may not get one for longer, so the kernel backs the count up, with some room (NPROC_ROOM, or an eighth of
  the cap) so that the bomb stays over the cap until it is counted and named: RLIMIT_NPROC for a user other
  than root (since Linux 5.14 it counts a user's tasks per user namespace, so inside the sandbox the
  sandbox's own; the kernel exempts the user root, who stays root inside), and for root pid_max (below).
  When the command ends, one last scan: a sandbox over a cap then (the command's own fork failed, say)
  is a breach all the same.
- CPU time: the largest of any process, from the full scan; RLIMIT_CPU (a little above the cap) is the
  kernel's backstop should this process be starved.
- Resident memory: the memory the sandbox holds that the machine cannot reclaim: each process's anonymous
  and shared-memory pages, plus what no process maps: what its private tmpfs mounts (/tmp, /dev/shm, the
  private build cache) hold, every memfd open in the sandbox (Memfds: once per inode, from /proc/<pid>/fd)
  and its System V segments that no process has attached. File-backed pages
  (libraries, the page cache) are not counted: they are shared and reclaimable. Each scan sums RssAnon +
  RssShmem from /proc/<pid>/status (counters, ~25 us a process), which counts a page shared by several
  processes (copy-on-write after a fork, a mapped segment) once per process: an upper bound. Only when that
  bound passes the cap does it read the exact figure, the proportional set (Pss_Anon + Pss_Shmem of
  /proc/<pid>/smaps_rollup: a shared page split among its sharers), which costs a walk of the page tables
  (~20 ms for a 1 GiB process, too slow for every scan); a process whose smaps_rollup it cannot read counts
  with its upper bound. A tmpfs file that is also mapped counts twice (its file and its mappings). Near a
  cap (half of it) the scans come every FAST seconds.
- The kernel's exact cap for the user root (pid_max, Linux >= 6.14, where a PID namespace has its own): run
  with the word pid_max, and bwrap's CAP_SYS_ADMIN and CAP_SETPCAP in the sandbox's user namespace (which
  owns its PID namespace), this process sets its namespace's pid_max to the cap plus that room plus its own
  PID (at least 301, the kernel's floor), so that no PID is left for one more task; then it binds /proc/sys read-only (which
  bwrap would have done, but then pid_max could not be written) and drops every capability, checks that none
  is left, and only then starts the command (anything amiss: nothing runs, CONFINE_EXIT).

- The environment: the command starts with the variables `allowed` names alone (an allow-list, and never a
  name that holds KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL). bwrap already unsets those of the
  caller's own environment (candidate_sandbox.prefix); a caller that passes another environment gets the same
  filter here, and this process then starts itself again with the filtered one first, so that its own
  /proc/1/environ, which the command may read, holds nothing else either.

Usage: supervisor.py MAX_TASKS CPU_SECONDS MEMORY_BYTES [pid_max] [tmpfs=PATH...] -- COMMAND...
(CPU_SECONDS or MEMORY_BYTES 0: no cap)
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time

POLL = 0.05                       # the full scan, far from the caps
FAST = 0.005                      # the full scan, past half of a cap
TRIP = 0.002                      # the tripwire on new PIDs
RECHECK = 1.0                     # the exact memory figure, at most this often while the bound allows
BREACH_EXIT = 86
CONFINE_EXIT = 87                 # the pid_max confinement failed: the command was not run
PID_MAX_FLOOR = 301               # the kernel refuses a smaller pid_max
LINE = "pkb sandbox: "           # how the breach line starts (candidate_sandbox.breach finds it in a log)
MEMORY_WORDS = "of resident memory"  # in the line of the memory cap alone (candidate_sandbox.on_memory)
BACKSTOP = 2.0                    # RLIMIT_CPU's soft limit is this much above the cap, its hard limit twice
TICK = os.sysconf("SC_CLK_TCK")
NPROC_ROOM = 32                   # RLIMIT_NPROC: the cap plus this, or an eighth of it if more
TMPFS = ("/tmp", "/dev/shm", "/var/tmp")   # the sandbox's own tmpfs mounts (bwrap --tmpfs) where tmpfs (own_tmpfs)
GIB = 2**30
# the environment a sandboxed command may see: these names, and names with these prefixes, unless secret
ALLOWED = frozenset({
    "PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME", "PYTHONPATH", "PYTHONUNBUFFERED",
    "PYTHONUSERBASE", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONFAULTHANDLER", "LD_LIBRARY_PATH",
    "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
    "CC", "CXX", "CUDAHOSTCXX", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TORCH_", "TORCHELASTIC_", "TORCHINDUCTOR_", "TRITON_", "NCCL_", "GLOO_",
                    "NVSHMEM_", "OMP_", "PKB_")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def secret(name: str) -> bool:
    """Whether a variable's name says it holds a secret (never passed into a sandbox)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def allowed(name: str) -> bool:
    """Whether a variable of this name goes into the sandbox."""
    return not secret(name) and (name in ALLOWED or name.startswith(ALLOWED_PREFIXES))


class Scan:
    """What one scan of /proc saw (this process excluded). It stops as soon as the processes and threads are
    over `stop_at` (a fork bomb grows while it reads), its other figures then partial; `tasks_only`: it
    counts processes and threads alone (the tripwire's scan)."""

    def __init__(self, me: int, stop_at: int, tasks_only: bool = False, tmpfs: tuple[str, ...] = (),
                 memfds: Memfds | None = None):
        self.procs = self.threads = 0
        self.worst, self.who = 0.0, ""        # the largest CPU time of one process, and that process
        self.pids: list[str] = []
        self.bound = self.tmpfs = 0           # bytes: Σ RssAnon + RssShmem (an upper bound); memory no process maps
        memfds = memfds or Memfds()
        state = None if tasks_only else memfds.start()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    head, rest = f.read().rsplit(")", 1)
                if not tasks_only:
                    with open(f"/proc/{entry}/status") as f:
                        status = f.read()
            except OSError:
                continue
            fields = rest.split()
            self.procs += 1
            # a zombie holds its PID until it is reaped (the kernel's caps count it): at least one task
            self.threads += max(1, int(fields[17]))
            if self.threads > stop_at:
                return
            if tasks_only or fields[0] == "Z":
                continue
            self.pids.append(entry)
            self.bound += _kib(status, ("RssAnon:", "RssShmem:"))
            memfds.add(entry, state)
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            if cpu > self.worst:
                self.worst, self.who = cpu, f"{entry} ({head.split('(', 1)[1]})"
        if not tasks_only:
            self.tmpfs = sum(_used(path) for path in tmpfs) + memfds.end(state) + _sysv_unattached()
            self.bound += self.tmpfs

    def exact(self) -> int:
        """Bytes of resident memory with shared pages split among their sharers (see the module's doc)."""
        total = self.tmpfs
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    total += _kib(f.read(), ("Pss_Anon:", "Pss_Shmem:"))
                continue
            except OSError:
                pass
            try:  # not readable (a process that made itself undumpable): its upper bound
                with open(f"/proc/{pid}/status") as f:
                    total += _kib(f.read(), ("RssAnon:", "RssShmem:"))
            except OSError:
                pass  # gone
        return total


class Memfds:
    """The memfds open in the sandbox, found through /proc/<pid>/fd (a link to "/memfd:NAME"): each one once by
    its inode, with the bytes it holds (st_blocks: its pages, not its nominal size). What a descriptor is takes
    one readlink (a few microseconds); a descriptor number seen before is taken as what it was then, but every
    RECHECK seconds each is looked at again (a number closed and opened again as a memfd in between is found
    then)."""

    def __init__(self):
        self.known: dict[tuple[str, str], bool] = {}   # (pid, fd) -> whether it was a memfd
        self.full_at = 0.0

    def start(self) -> tuple[dict, dict, bool]:
        """A scan's state: the descriptors seen now, the memfds' bytes by inode, and whether to look again at all."""
        return {}, {}, time.monotonic() >= self.full_at

    def add(self, pid: str, state: tuple[dict, dict, bool]) -> None:
        seen, sizes, full = state
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
        except OSError:
            return
        for fd in fds:
            key = (pid, fd)
            path = f"{folder}/{fd}"
            memfd = None if full else self.known.get(key)
            try:
                if memfd is None:
                    memfd = os.readlink(path).startswith("/memfd:")
                seen[key] = memfd
                if memfd:
                    st = os.stat(path)
                    sizes[(st.st_dev, st.st_ino)] = st.st_blocks * 512
            except OSError:
                continue  # closed meanwhile

    def end(self, state: tuple[dict, dict, bool]) -> int:
        seen, sizes, full = state
        self.known = seen
        if full:
            self.full_at = time.monotonic() + RECHECK
        return sum(sizes.values())


def _sysv_unattached() -> int:
    """Bytes held by the sandbox's System V shared-memory segments that no process has attached (it has an IPC
    namespace of its own; an attached one is in its processes' RssShmem)."""
    try:
        with open("/proc/sysvipc/shm") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return 0
    total = 0
    for row in rows:
        fields = row.split()
        if len(fields) >= 15 and fields[6] == "0":   # nattch
            total += int(fields[14])                 # rss, bytes
    return total


def _kib(text: str, keys: tuple[str, ...]) -> int:
    """The sum of these fields (in kB) of a /proc file, in bytes."""
    return sum(int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith(keys))


def own_tmpfs(mountinfo: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Those of TMPFS (and `extra`: the private build cache, tmpfs=PATH) that are tmpfs mounts in this mount
    namespace (/proc/self/mountinfo). A folder bound over
    one (the command's working folder /tmp itself) is the machine's file system there: its used space is the
    machine's disk, not the sandbox's memory (counted, a screen started in /tmp was killed at its first scan
    for "24 GiB" on a machine with 25 GB on its disk)."""
    fstype = {}
    for line in mountinfo.splitlines():   # later mounts on a point cover earlier ones
        fields, _, tail = line.partition(" - ")
        parts = fields.split()
        if len(parts) > 4 and tail:
            fstype[parts[4]] = tail.split()[0]
    return tuple(p for p in (*TMPFS, *extra) if fstype.get(p) == "tmpfs")


def _used(path: str) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class Supervisor:
    def __init__(self, max_tasks: int, cpu_seconds: float, memory: int, me: int):
        self.max_tasks, self.cpu_seconds, self.memory, self.me = max_tasks, cpu_seconds, memory, me
        self.cleared = None  # (bound, exact) when the exact memory figure was last under the cap, and when
        self.cleared_at = 0.0

    def breach(self, scan: Scan) -> str:
        """The line naming the first cap the sandbox's processes are over, or ""."""
        if scan.threads > self.max_tasks:
            return (f"{LINE}{scan.procs} processes with {scan.threads} threads ran in the sandbox, over its cap of "
                    f"{self.max_tasks} processes and threads (a fork bomb?): every process in the sandbox was killed")
        if self.cpu_seconds and scan.worst > self.cpu_seconds:
            return (f"{LINE}process {scan.who} used {scan.worst:.1f} s of CPU time, over the sandbox's cap of "
                    f"{self.cpu_seconds:g} s: every process in the sandbox was killed")
        if self.memory and scan.bound > self.memory:
            exact = self.resident(scan)
            if exact > self.memory:
                return (f"{LINE}{scan.procs} process{'es' if scan.procs != 1 else ''} held {exact / GIB:.2f} GiB {MEMORY_WORDS}, over the "
                        f"sandbox's cap of {self.memory / GIB:.3g} GiB: every process in the sandbox was killed")
        return ""

    def resident(self, scan: Scan) -> int:
        """The exact figure, or an estimate from the last exact one while the upper bound has not grown past
        the cap since (the bound grows at least as fast as the exact figure but for copy-on-write breaks,
        which the re-check every RECHECK seconds catches)."""
        now = time.monotonic()
        if self.cleared and now - self.cleared_at < RECHECK:
            bound, exact = self.cleared
            if exact + scan.bound - bound <= self.memory:
                return exact + scan.bound - bound
        exact = scan.exact()
        if exact <= self.memory:
            self.cleared, self.cleared_at = (scan.bound, exact), now
        return exact

    def near(self, scan: Scan) -> bool:
        """Past half of a cap: the next scan comes sooner."""
        return (2 * scan.threads > self.max_tasks or (self.cpu_seconds and 2 * scan.worst > self.cpu_seconds)
                or (self.memory and 2 * scan.bound > self.memory))


def confine(pid_max: int) -> None:
    """This PID namespace's pid_max; /proc/sys read-only; no capability left (see the module's doc). Raises
    OSError when /proc/sys stays writable or a capability is left; a pid_max the kernel refuses is skipped
    (the count above still holds)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")
    try:
        with open("/proc/sys/kernel/pid_max", "w") as f:
            f.write(str(max(pid_max, PID_MAX_FLOOR)))
    except OSError:
        pass
    ms_rdonly, ms_nosuid, ms_nodev, ms_noexec, ms_remount, ms_bind = 1, 2, 4, 8, 32, 4096
    check(libc.mount(b"/proc/sys", b"/proc/sys", None, ms_bind, None), "bind /proc/sys")
    check(libc.mount(None, b"/proc/sys", None, ms_remount | ms_bind | ms_rdonly | ms_nosuid | ms_nodev | ms_noexec,
                     None), "remount /proc/sys read-only")
    if os.access("/proc/sys/kernel/pid_max", os.W_OK) and _writable("/proc/sys/kernel/pid_max"):
        raise OSError(0, "/proc/sys is still writable")
    pr_capbset_drop, pr_cap_ambient, pr_cap_ambient_clear_all = 24, 47, 4
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        check(libc.prctl(pr_capbset_drop, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    check(libc.prctl(pr_cap_ambient, pr_cap_ambient_clear_all, 0, 0, 0), "clear the ambient capabilities")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
    with open("/proc/self/status") as f:
        left = [line for line in f if line.startswith("Cap") and int(line.split()[1], 16)]
    if left:
        raise OSError(0, f"capabilities left: {' '.join(line.split()[0] for line in left)}")


def _writable(path: str) -> bool:
    try:
        with open(path, "r+"):
            return True
    except OSError:
        return False


def _last_pid(fd: int | None) -> int:
    """The last PID this namespace handed out (-1 when unreadable)."""
    if fd is None:
        return -1
    try:
        return int(os.pread(fd, 32, 0))
    except (OSError, ValueError):
        return -1


def _filter_environment(argv: list[str]) -> None:
    """Start this process again with the allowed variables alone, where it got any other (see the module's doc;
    the filter is idempotent, so the second start goes on)."""
    clean = {k: v for k, v in os.environ.items() if allowed(k)}
    if len(clean) < len(os.environ):
        os.execve(sys.executable, [sys.executable, "-I", "-S", os.path.abspath(__file__), *argv], clean)


def main(argv: list[str]) -> int:
    _filter_environment(argv)
    split = argv.index("--")
    max_tasks, cpu_seconds, memory, command = int(argv[0]), float(argv[1]), int(argv[2]), argv[split + 1:]
    room = max(NPROC_ROOM, max_tasks // 8)
    if "pid_max" in argv[3:split]:
        try:
            confine(max_tasks + room + 2)  # this process's PID, and room for every other task up to the limit
        except OSError as e:
            # not LINE: pkb's failure, never the candidate's (sandbox.check() meets it first, with `python -c pass`)
            print(f"pkb sandbox error: cannot set the sandbox's pid_max and drop its capabilities ({e}): nothing "
                  f"was run; PKB_SANDBOX_NO_PID_MAX=1 goes without", file=sys.stderr, flush=True)
            return CONFINE_EXIT

    def limits() -> None:  # in the command's process (so not in this one), inherited by all it starts
        if cpu_seconds:
            soft = int(cpu_seconds + BACKSTOP)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + int(BACKSTOP)))
        # some room over the cap, so that a fork bomb stays over it (its failing forks end some of its
        # processes) until this process counts it and names the cap, as it does where the kernel exempts root
        nproc = max_tasks + room
        _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        if hard == resource.RLIM_INFINITY or hard >= nproc:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    child = subprocess.Popen(command, preexec_fn=limits)
    me = os.getpid()
    sup = Supervisor(max_tasks, cpu_seconds, memory, me)
    try:
        pids = os.open("/proc/sys/kernel/ns_last_pid", os.O_RDONLY)
    except OSError:
        pids = None
    with open("/proc/self/mountinfo") as f:
        tmpfs = own_tmpfs(f.read(), tuple(w[len("tmpfs="):] for w in argv[3:split] if w.startswith("tmpfs=")))
    memfds = Memfds()
    scan, tasks, seen, due = None, 0, -1, 0.0  # the last full scan, the last count of tasks and last PID then
    while True:
        while True:  # reap: the command, and orphans re-parented to process 1
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if pid == child.pid:  # the command ended; if its sandbox is over a cap (the kernel's pid_max failed
                code = os.waitstatus_to_exitcode(status)  # its fork, say), that is the verdict
                line = sup.breach(Scan(me, max_tasks, tmpfs=tmpfs, memfds=Memfds()))
                if line:
                    print(line, file=sys.stderr, flush=True)
                    os.kill(-1, signal.SIGKILL)
                    return BREACH_EXIT
                return code if code >= 0 else 128 - code
        last = _last_pid(pids)
        # tasks that may exist now: those last counted, and one per PID handed out since (a wrap: count again)
        if scan is None or time.monotonic() >= due:
            seen, scan = last, Scan(me, max_tasks, tmpfs=tmpfs, memfds=memfds)
            tasks = scan.threads
            line = sup.breach(scan)
            due = time.monotonic() + (FAST if sup.near(scan) else POLL)
        elif last < seen or tasks + last - seen > max_tasks:
            seen, count = last, Scan(me, max_tasks, tasks_only=True)
            tasks = count.threads
            line = sup.breach(count)
        else:
            line = ""
        if line:
            print(line, file=sys.stderr, flush=True)
            os.kill(-1, signal.SIGKILL)  # every process of the namespace but this one
            return BREACH_EXIT
        time.sleep(TRIP)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
