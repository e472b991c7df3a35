"""The candidate's process is a principal of its own: it cannot see, signal, trace or write the screen.

A fork alone keeps the verdict out of the candidate's memory, but the forked process still runs as the
same user, in the same PID namespace as the screening process, with every descriptor that process held:
it could ptrace the screen (or write through /proc/<pid>/fd/1) and print a verdict of its choosing,
stop or kill it, or write result lines for itself and later candidates into a worker's protocol pipe.
So, between the fork and the first line of the candidate's code:

- the trusted processes (the screen, a worker and its zygote, the keeper below) are not dumpable, so a
  process of the same user cannot ptrace them or open their /proc/<pid>/{fd,mem,environ} (`seal`);
- every descriptor is closed but stderr (fd 1 points at it too): the result goes to a file the trusted
  side made and opens itself (isolation.py, through candidate_sandbox.untrusted_file);
- the candidate runs as process 1 of a PID namespace of its own (inside a user namespace of its own):
  no process outside it has a number it can name, so it cannot signal the screen, and every process it
  starts dies with it. The process that made the namespace (the keeper) stays outside, waits for it and
  mirrors its end to the trusted side; the candidate dies with its keeper (PR_SET_PDEATHSIG);
- a seccomp filter refuses ptrace, process_vm_readv/writev, pidfd_getfd and clearing the parent-death
  signal, and the candidate holds no capability, even in its own namespaces;
- the folders the trusted side writes into after or beside the candidate (the simulated timelines: in a
  batch, other candidates' too) are read-only in the candidate's own mount namespace, so it can neither
  rewrite another's file nor plant a link or FIFO where the trusted side will write (`read_only`);
- it writes its extension builds into the build cache of its own file (one per file content, kept across
  screens), bound into its working folder (`own_cache`); the folder of every file's cache and pkb's own
  stand-in runtime are among the read-only folders, so what it builds serves later screens of the same
  file, and it can plant nothing for another candidate or for pkb.

Where the kernel refuses new namespaces (user namespaces disabled, some container runtimes) the rest
still applies and `Confinement.namespaced` says so; pkb never blames a candidate for it.
"""
from __future__ import annotations

import ctypes
import os
import platform
import resource
import select
import signal
import struct
from dataclasses import dataclass

from pkbsim.ptx.compile import EXTENSION_CACHE, TRUSTED_CACHE, trusted_cache_root

_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNS = 0x10000000, 0x20000000, 0x00020000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# flags a mount from the parent namespace keeps locked in a user namespace: a remount must repeat them
# (statvfs flag -> mount flag: nosuid, nodev, noexec, noatime, nodiratime, relatime)
_LOCKED = ((2, 2), (4, 4), (8, 8), (1024, 1024), (2048, 2048), (4096, 1 << 21))
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 1, 4, 24
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2

# (audit arch, syscall numbers refused: ptrace, process_vm_readv, process_vm_writev, pidfd_getfd; prctl)
_SYSCALLS = {
    "x86_64": (0xC000003E, (101, 310, 311, 438), 157),
    "aarch64": (0xC00000B7, (117, 270, 271, 438), 167),
}
_X32_BIT = 0x40000000   # x86_64's x32 ABI: the same calls under other numbers, refused whole



def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def seal() -> None:
    """Make this (trusted) process undumpable: no process of the same user may trace it or open its
    /proc/<pid>/{fd,mem,environ}. Inherited by its forks until they exec."""
    _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _filter() -> bytes | None:
    """The seccomp program: EPERM for the refused calls, prctl(PR_SET_PDEATHSIG) and any foreign ABI."""
    arch = _SYSCALLS.get(platform.machine())
    if arch is None:
        return None
    audit, refused, prctl = arch
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1   # SECCOMP_RET_ALLOW; SECCOMP_RET_ERRNO | EPERM
    prog = [_bpf(ld_w_abs, 0, 0, 4), _bpf(jeq_k, 1, 0, audit), _bpf(ret_k, 0, 0, deny),
            _bpf(ld_w_abs, 0, 0, 0)]
    if audit == 0xC000003E:
        prog += [_bpf(jge_k, 0, 1, _X32_BIT), _bpf(ret_k, 0, 0, deny)]
    for nr in refused:
        prog += [_bpf(jeq_k, 0, 1, nr), _bpf(ret_k, 0, 0, deny)]
    prog += [_bpf(jeq_k, 0, 3, prctl), _bpf(ld_w_abs, 0, 0, 16), _bpf(jeq_k, 0, 1, _PR_SET_PDEATHSIG),
             _bpf(ret_k, 0, 0, deny), _bpf(ret_k, 0, 0, allow)]
    return b"".join(prog)


def _install_filter(libc: ctypes.CDLL) -> bool:
    program = _filter()
    if program is None or libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    buf = ctypes.create_string_buffer(program)

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    prog = Prog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """No capability left, not even in the candidate's own user namespace, and none regained by exec."""
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = struct.pack("Ii", 0x20080522, 0)   # _LINUX_CAPABILITY_VERSION_3, this process
    libc.capset(ctypes.create_string_buffer(header), ctypes.create_string_buffer(24))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _own_namespaces(libc: ctypes.CDLL, mounts: bool) -> bool:
    """Enter a user and a PID namespace of our own (and a mount namespace, with `mounts`), mapping this
    user to itself; the next fork is process 1 of the new PID namespace."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID | (_CLONE_NEWNS if mounts else 0)) != 0:
        return False
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError:
        pass  # unmapped ids show as nobody: still confined
    return True


def _mount(libc: ctypes.CDLL, source: str | None, target: str, flags: int) -> bool:
    return libc.mount(source and source.encode(), target.encode(), None, flags, None) == 0


def _make_read_only(libc: ctypes.CDLL, folders: tuple[str, ...], keep_writable: str) -> bool:
    """In this process's own mount namespace: `folders` read-only (what lies under them included), except
    `keep_writable` (the candidate's working folder) wherever it lies. True when every folder is."""
    # bound onto itself first, the working folder is a mount of its own that the recursive binds below
    # carry along as it is (writable)
    done = _mount(libc, keep_writable, keep_writable, _MS_BIND | _MS_REC)   # its own cache (bound in it) too
    for folder in folders:
        if not os.path.isdir(folder):
            done = False   # the trusted side makes it before the fork: one missing here could be planted
            continue
        locked = os.statvfs(folder).f_flag
        keep = sum(mount for stat, mount in _LOCKED if locked & stat)
        done = (_mount(libc, folder, folder, _MS_BIND | _MS_REC)
                and _mount(libc, None, folder, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | keep)) and done
    return done


def _own_cache_at(libc: ctypes.CDLL, own: str, workdir: str) -> str | None:
    """`own` (this candidate's build cache) bound, writable, at a folder of `workdir`: before the folders
    above it are made read-only, whose binds would carry that to it. The path to use (None: not bound)."""
    seen = os.path.join(workdir, "extension-cache")
    os.makedirs(seen, exist_ok=True)
    return seen if os.path.isdir(own) and _mount(libc, own, seen, _MS_BIND) else None


def _close_descriptors(keep_stderr: int = 2) -> None:
    """stdin from /dev/null, stdout onto stderr, nothing else open."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(keep_stderr, 1)
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


@dataclass(frozen=True)
class Confinement:
    namespaced: bool   # the candidate runs in a PID namespace of its own
    filtered: bool     # the seccomp filter is in place
    read_only: bool    # the folders asked for are read-only to it


def confine(read_only: tuple[str, ...] = (), workdir: str = "/", own_cache: str = "") -> Confinement:
    """Called in the freshly forked child that will run a candidate; returns in the candidate's process.
    `read_only`: folders it must not write (`workdir`, its own working folder, stays writable); `own_cache`:
    its per-candidate build cache, the only one it sees (its builds go there: EXTENSION_CACHE, and every other
    cache pkb's code writes in its process: PTX, compile checks), so that no candidate can plant an entry that a
    later candidate of the same worker would read.

    With namespaces, three processes: the keeper (this one, outside: it waits and ends as the candidate
    did, the same exit code or the same signal), the namespace's process 1 (a waiter holding nothing:
    as process 1 it ignores every signal from inside, and when it ends, the kernel ends every process of
    the namespace) and the candidate. Each dies with its parent, so the trusted side ends all three by
    killing the keeper."""
    libc = _libc()
    _close_descriptors()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    namespaced = protected = False
    mounts = bool(read_only or own_cache)
    if _own_namespaces(libc, mounts):
        namespaced = True
        private = mounts and _mount(libc, None, "/", _MS_REC | _MS_PRIVATE)   # nothing reaches the parent's
        seen = private and own_cache and _own_cache_at(libc, own_cache, workdir)
        protected = bool(read_only) and private and _make_read_only(libc, read_only, workdir)
        if seen:   # every cache its process writes is its own; pkb's own builds are found where they are
            os.environ[TRUSTED_CACHE] = trusted_cache_root()
            os.environ[EXTENSION_CACHE] = os.environ["PKB_CACHE_DIR"] = seen
        report_r, report_w = os.pipe()
        alive_r, alive_w = os.pipe()
        init = os.fork()
        if init:
            os.close(report_w)
            os.close(alive_r)
            _keep(init, report_r)
        os.close(report_r)
        os.close(alive_w)
        _die_with_parent(libc, alive_r)
        candidate = os.fork()
        if candidate:
            _wait_as_init(candidate, report_w)
        os.close(report_w)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)   # process 1's end ends it anyway
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)   # the candidate's own tools (faulthandler, its children) as usual
    _drop_capabilities(libc)
    return Confinement(namespaced, _install_filter(libc), protected or not read_only)


def _die_with_parent(libc: ctypes.CDLL, alive: int) -> None:
    """SIGKILL when the parent ends; if it already has (the read end sees the pipe's end), end now."""
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    readable, _, _ = select.select([alive], [], [], 0)
    if readable:
        os._exit(1)
    os.close(alive)


STOPPED_EXIT = 0x7E   # the keeper's exit status when the candidate stopped itself (the init killed it)


def _wait_as_init(candidate: int, report: int) -> None:
    """Process 1 of the candidate's namespace: reap every process that ends in it until the candidate
    itself does, hand its raw wait status to the keeper, and end (which ends the namespace). A candidate
    that stops (a stop signal can only come from its own namespace: pkb never sends one) is killed and
    reported as stopped, rather than left to wait out the time limit. It never returns."""
    try:
        stopped = False
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WUNTRACED)
            except InterruptedError:
                continue
            if pid != candidate:
                continue
            if os.WIFSTOPPED(raw):
                stopped = True
                os.kill(candidate, signal.SIGKILL)
                continue
            os.write(report, b"stopped\n" if stopped else f"{raw}\n".encode())
            break
    finally:
        os._exit(0)


def _keep(init: int, report: int) -> None:
    """The keeper: outside the candidate's namespace, it waits for it and ends the way the candidate did.
    It never returns (nothing of the caller's may run in it)."""
    try:
        chunks = []
        while chunk := os.read(report, 64):
            chunks.append(chunk)
        os.waitpid(init, 0)
        text = b"".join(chunks).strip()
        if text == b"stopped":
            os._exit(STOPPED_EXIT)
        raw = int(text) if text.isdigit() else None
        if raw is not None and os.WIFSIGNALED(raw):
            sig = os.WTERMSIG(raw)
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        # no status: process 1 was killed before the candidate ended (the keeper's own end, an outside kill)
        os._exit(os.WEXITSTATUS(raw) if raw is not None and os.WIFEXITED(raw) else 1)
    finally:
        os._exit(1)
