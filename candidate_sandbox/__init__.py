"""Candidates run inside a bubblewrap sandbox: no network, no other process in view, a read-only system.

A package of its own, below both pkbsim (the screen) and hwbackend (GPU scoring), which both start
candidate processes in it.

A process fork keeps a candidate away from the verdict (screen/isolation.py) but not from the machine: it
could read the user's files, write to their home, open connections, or signal the screening process. So
the processes that run candidates (`pkb screen`, `pkb run`'s workers, `pkb score`'s rank workers,
`pkb check --sandbox`) start inside
`bwrap` with new user, PID, network (loopback only), IPC and UTS namespaces, every capability dropped, the
whole file system read-only except a private /tmp and the folders pkb must write (its build cache and the
output paths the user named), and die with their parent. GPU device nodes are passed through where they
exist; /proc/sys (the kernel's settings) is read-only. Process 1 of the sandbox is the supervisor
(supervisor.py), which caps CPU time per process, the number of processes and threads (with the kernel's
help) and the sandbox's resident memory (`Limits`), and names a breach in one line. Without bwrap a command
that needs it stops with one line naming the package; `--no-sandbox` (or PKB_NO_SANDBOX=1) runs without
it, by the user's explicit choice.
"""
from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass

from candidate_sandbox.supervisor import LINE, MEMORY_WORDS, allowed

INSIDE = "PKB_SANDBOXED"       # set inside the sandbox: a command never wraps itself twice
DISABLE = "PKB_NO_SANDBOX"     # "1": run without the sandbox (what --no-sandbox sets)
MISSING = ("the candidate sandbox needs bubblewrap (bwrap), which is not installed: apt-get install bubblewrap "
           "(or dnf/pacman install bubblewrap), or pass --no-sandbox to run candidates unconfined")
MAX_TASKS = "PKB_SANDBOX_MAX_TASKS"  # overrides the default cap on processes and threads
CPU_SECONDS = "PKB_SANDBOX_CPU_S"    # overrides the default cap on CPU time per process
MEMORY_GB = "PKB_SANDBOX_MEMORY_GB"  # overrides the default cap on the sandbox's resident memory (GiB)
NO_PID_MAX = "PKB_SANDBOX_NO_PID_MAX"  # "1": no pid_max confinement (the supervisor's count alone, for comparison)
MEMORY_SHARE = 0.75                  # the default cap on resident memory: this share of the machine's
SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervisor.py")
SPARE_TMP = "/var/tmp"   # a private tmpfs here when the machine's /tmp covers the sandbox's own (TMPDIR points to it)
# folders of the machine covered by an empty read-only tmpfs inside: where its services keep their Unix sockets
# (a read-only bind does not stop connect()) and the users keep their files. What pkb needs below them (the
# Python install, its packages, the repository, the candidate, the build cache, output folders) is bound back.
HIDDEN = ("/run", "/var/run", "/var/lib", "/var/tmp", "/root", "/home")
CACHE_BINDS = 64   # entries of the machine's build cache bound into a sandbox's private one, at most (_private_cache)
OWN_BUILDS = ("cuda-rt", "cuda-pch", "cuda-driver", "thunderkittens")  # kinds of the cache that hold pkb's own builds
# the build cache's folder of per-candidate caches (one folder per candidate file's content, kept across
# sandboxes): bound writable into screen and run sandboxes; a candidate's process may write its own folder
# alone (pkbsim/screen/confinement.py)
CANDIDATE_CACHES = "by-candidate"
# kinds of pkb's own builds that the trusted screening process makes before a candidate's process starts, and
# that this process sees read-only: bound writable whole into screen and run sandboxes, so they are kept
TRUSTED_BUILDS = ("cuda-rt", "cuda-pch", "cuda-driver")


@dataclass(frozen=True)
class Limits:
    """Caps for every process of one sandbox. The defaults: 4096 processes and threads (an 8-rank NCCL job
    with its builds runs a few hundred); where the caller knows no time limit, 6 hours of CPU time per
    process (a long-lived screening worker runs many candidates), and a job with a time limit derives its
    cap from it (for_timeout); resident memory (`memory_bytes`, all the sandbox's processes together; 0: the
    default) 3/4 of the machine's physical memory: room for an honest 8-rank GPU job's host memory, above a
    `pkb run` worker's own limit (--memory-gb, 12 GB of address space per process, pkb's limit and not the
    candidate's fault) on any machine of 16 GiB or more, and short of the machine's out-of-memory killer."""
    max_tasks: int = 4096
    cpu_seconds: float = 6 * 3600.0
    memory_bytes: int = 0

    @classmethod
    def for_timeout(cls, timeout: float) -> Limits:
        """A job that may run `timeout` seconds: each process may use two cores for all of it (a rank's own
        thread and its communication library's), plus a minute for builds."""
        return cls(cpu_seconds=2 * timeout + 60)

    def effective(self) -> Limits:
        """These caps, or what PKB_SANDBOX_MAX_TASKS / PKB_SANDBOX_CPU_S / PKB_SANDBOX_MEMORY_GB set instead."""
        memory = os.environ.get(MEMORY_GB)
        return Limits(int(os.environ.get(MAX_TASKS) or self.max_tasks),
                      float(os.environ.get(CPU_SECONDS) or self.cpu_seconds),
                      int(float(memory) * 2**30) if memory else self.memory_bytes or default_memory())


def default_memory() -> int:
    """The default cap on a sandbox's resident memory, in bytes: MEMORY_SHARE of the machine's."""
    return int(MEMORY_SHARE * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def breach(log: str) -> str | None:
    """The supervisor's line naming a breached cap, if `log` (a sandbox's stderr) holds one."""
    for line in log.splitlines():
        if line.startswith(LINE):
            return line.strip()
    return None


def on_memory(breach: str) -> bool:
    """Whether the supervisor's line `breach` names the cap on resident memory (not processes or CPU time)."""
    return MEMORY_WORDS in breach


class SandboxUnavailable(Exception):
    """bwrap is missing or cannot create namespaces here; the message names the fix."""


def wanted() -> bool:
    """Whether this process should start candidate processes in a sandbox (not already inside one, not
    disabled by the user)."""
    return os.environ.get(INSIDE) != "1" and os.environ.get(DISABLE) != "1"


def bwrap() -> str:
    path = os.environ.get("PKB_BWRAP") or shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable(MISSING)
    return path


def build_cache() -> str:
    """pkb's build cache, by the rule of pkbsim.ptx.compile.cache_root (which this package may not import: a
    test checks that the two agree): $PKB_CACHE_DIR, else $XDG_CACHE_HOME/pkb, else ~/.cache/pkb."""
    return os.environ.get("PKB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pkb")


def prefix(writable: list[str] = (), readable: list[str] = (), limits: Limits = Limits(),
           network: bool = False, cwd: str | None = None, candidate_caches: bool = False) -> list[str]:
    """The bwrap command line that runs a command inside the sandbox, under the supervisor's `limits`.
    `writable` folders (created if missing: the caller's build caches, its output folders) stay writable;
    `readable` ones stay visible although under /tmp (the private /tmp hides the machine's own). `network`:
    keep the machine's network (a job across nodes needs it), else only a loopback of its own. `cwd`: where
    the command starts (a folder visible inside; by default this process's own). `candidate_caches`: bind the
    per-candidate build caches writable (only for a command that confines each candidate's process to its
    own: `pkb screen` and `pkb run`'s workers), with pkb's TRUSTED_BUILDS, which the screening process makes
    and shows its candidates read-only.

    The environment: only the variables supervisor.allowed names go in (none whose name holds KEY, TOKEN,
    SECRET, PASSWORD or CREDENTIAL); HOME is a private folder of the sandbox's own /tmp; where the build
    cache is among `writable`, PKB_CACHE_DIR names it (HOME no longer leads there)."""
    args = [bwrap(), "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--as-pid-1", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    hidden = hidden_roots()
    for root in hidden:
        args += ["--tmpfs", root]
    for path in _install_paths(hidden):
        args += ["--ro-bind", path, path]
    # the kernel's settings read-only: bwrap covers /proc/sys only where the folder itself is writable, but
    # its files let uid 0 (the user root, still root inside) write machine-wide settings. Where the kernel
    # caps the number of tasks by a PID namespace's own pid_max, the supervisor sets it first and makes
    # /proc/sys read-only itself, then drops the two capabilities it was given for that (supervisor.py).
    own_pid_max = confines_pids()
    args += (["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"] if own_pid_max else
             ["--ro-bind", "/proc/sys", "/proc/sys"])
    if not network:
        args.append("--unshare-net")
    for node in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri")):
        args += ["--dev-bind", node, node]
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]  # e.g. packages under /tmp
    # the Python install and CUDA toolchain where the private /tmp would hide them (a venv made under /tmp)
    below_tmp = [p for p in (sys.prefix, sys.exec_prefix, *toolchain_roots()) if p.startswith("/tmp/")]
    shown = [os.path.abspath(p) for p in [os.getcwd(), os.path.dirname(SUPERVISOR), *python_path, *below_tmp,
                                          *readable]]
    for path in shown:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    cache, counted = os.path.abspath(build_cache()), []
    for path in writable:
        path = os.path.abspath(path)
        os.makedirs(path, exist_ok=True)
        if path == cache:  # never writable as it is: see _private_cache
            args += _private_cache(cache, candidate_caches)
            counted.append(cache)
        else:
            args += ["--bind", path, path]
    tmp = "/tmp"
    if any(_covers_private_tmp(p) for p in [*shown, *map(os.path.abspath, writable)]) and os.path.isdir(SPARE_TMP):
        tmp = SPARE_TMP   # the machine's /tmp is shown over the private one: temporary files go to another
        args += ["--tmpfs", tmp, "--setenv", "TMPDIR", tmp]
    for root in hidden:
        if root != tmp:   # the tmpfs over each, read-only once what is bound below it is in place
            args += ["--remount-ro", root]
    args += _environment(tmp, [os.path.abspath(p) for p in writable])
    caps = limits.effective()
    args += ["--setenv", INSIDE, "1", "--setenv", "TRITON_CACHE_DIR", f"{tmp}/triton-cache", "--chdir",
             os.path.abspath(cwd or os.getcwd()),
             "--", sys.executable, "-I", "-S", SUPERVISOR, str(caps.max_tasks), f"{caps.cpu_seconds:g}",
             str(caps.memory_bytes), *(["pid_max"] if own_pid_max else []), *(f"tmpfs={p}" for p in counted), "--"]
    return args


def _private_cache(cache: str, candidate_caches: bool = False) -> list[str]:
    """pkb's build cache inside a sandbox: a private tmpfs at its place, with entries the machine's cache holds
    now bound into it read-only. Builds made inside go to the tmpfs (counted as the sandbox's memory) and end
    with the sandbox, so nothing a candidate writes there (a build planted for another candidate's content
    hash, or for pkb's own stand-in libraries) is ever seen by another sandbox, and no entry bound in can be
    changed. Entries are the cache's files and folders two levels down (<kind>/<key>: ptx/, cuda-ext/,
    cuda-rt/, ...); scratch names (a lock, a build in progress, a temporary file) are left out. Each bind
    costs bwrap about 2 ms on a loaded machine, so at most CACHE_BINDS entries are bound: every entry of pkb's
    own builds (OWN_BUILDS: one per toolchain), then the most recently made of the candidates' builds; one
    left out is built again inside if needed. The price: a build made inside is not kept for the next sandbox
    (the machine's cache fills from builds made outside, such as `--no-sandbox` runs), except in the
    per-candidate caches (CANDIDATE_CACHES), bound writable: each is writable by its own candidate's process
    alone, so what one candidate builds there serves later screens of the same file, and nobody else."""
    entries: list[tuple[bool, float, str]] = []   # (not pkb's own, -mtime, path)
    for kind in sorted(os.listdir(cache)):
        top = os.path.join(cache, kind)
        if (_scratch(kind) or os.path.islink(top) or kind == CANDIDATE_CACHES
                or candidate_caches and kind in TRUSTED_BUILDS):
            continue
        paths = [top] if not os.path.isdir(top) else [
            os.path.join(top, e) for e in sorted(os.listdir(top)) if not _scratch(e)]
        for path in paths:
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not os.path.islink(path):
                entries.append((kind not in OWN_BUILDS, -st.st_mtime, path))
    args = ["--tmpfs", cache]
    for _, _, path in sorted(entries)[:CACHE_BINDS]:
        args += ["--ro-bind", path, path]
    if not candidate_caches:
        return args
    for kind in (CANDIDATE_CACHES, *TRUSTED_BUILDS):
        path = os.path.join(cache, kind)
        os.makedirs(path, exist_ok=True)
        args += ["--bind", path, path]
    return args


def _scratch(name: str) -> bool:
    """A name in the build cache that is no finished entry: a lock, a build in progress, a temporary file."""
    return (name.startswith(".") or name.endswith((".lock", ".tmp"))
            or name.rsplit(".", 1)[-1].isdigit() and "." in name)


def hidden_roots() -> list[str]:
    """Those of HIDDEN that are folders here (a link, such as /var/run to /run, is covered with its target)."""
    return [p for p in HIDDEN if os.path.isdir(p) and not os.path.islink(p)]


def _install_paths(hidden: list[str]) -> list[str]:
    """What a sandboxed Python and its tools need from below the hidden folders: the interpreter's install and
    the virtual environment, the module search path, the user's site folder, PATH, LD_LIBRARY_PATH and the
    loader's configured folders, the CUDA toolkit. Only those below a hidden folder (not one itself), outermost
    first, none inside another."""
    import site

    wanted = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable)), *sys.path]
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        wanted.append(site.getusersitepackages())
    for var in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH"):
        wanted += os.environ.get(var, "").split(os.pathsep)
    wanted += [os.environ.get("CUDA_PATH", ""), *toolchain_roots(), *_loader_folders()]
    roots = [h.rstrip("/") + "/" for h in hidden]
    found: list[str] = []
    for path in sorted({os.path.abspath(p) for p in wanted if p and os.path.isabs(p)}, key=len):
        if (any(path.startswith(r) for r in roots) and os.path.exists(path)
                and not any(path == f or path.startswith(f.rstrip("/") + "/") for f in found)):
            found.append(path)
    return found


def toolchain_roots() -> list[str]:
    """The CUDA toolchains pkb may compile with, by the rule of pkbsim.ptx.compile.find_nvcc (which this package
    may not import): $PKB_NVCC's and $CUDA_HOME's toolkit folders and NVIDIA's wheels (nvidia/cu13) in this
    interpreter's `nvidia` namespace package. Bound read-only wherever they are: a toolchain under /tmp or a
    hidden folder was invisible inside, and every inline-CUDA candidate came out 'nvcc not found'."""
    pinned = os.environ.get("PKB_NVCC", "")
    roots = [os.environ.get("CUDA_HOME", ""), os.path.dirname(os.path.dirname(pinned)),
             os.path.dirname(os.path.dirname(os.path.realpath(pinned))) if pinned else ""]
    roots += [os.path.join(folder, "cu13") for folder in nvidia_wheel_folders()]
    return [os.path.abspath(r) for r in roots if r and os.path.isabs(r) and os.path.isdir(r)]


def nvidia_wheel_folders() -> list[str]:
    """The folders of the `nvidia` namespace package this interpreter imports (where NVIDIA's wheels unpack:
    a venv, the user's site folder, PYTHONPATH)."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _loader_folders() -> list[str]:
    """The folders /etc/ld.so.conf names (one level of `include`)."""
    out: list[str] = []
    try:
        with open("/etc/ld.so.conf") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include "):
            for conf in sorted(glob.glob(line.split(None, 1)[1])):
                try:
                    with open(conf) as f:
                        out += [x.split("#", 1)[0].strip() for x in f]
                except OSError:
                    pass
        elif line:
            out.append(line)
    return [x for x in out if x]


def _environment(tmp: str, writable: list[str]) -> list[str]:
    """bwrap's options for the sandbox's environment: every variable of this process's that is not allowed
    unset (the supervisor filters whatever else a caller passes), HOME a fresh folder of the private `tmp`,
    PYTHONUSERBASE kept where Python finds packages in the user's own site folder (found from HOME), and
    PKB_CACHE_DIR where the build cache is among the `writable` folders."""
    args = []
    for name in sorted(os.environ):
        if not allowed(name):
            args += ["--unsetenv", name]
    home = f"{tmp}/home"
    args += ["--dir", home, "--setenv", "HOME", home]
    import site
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        args += ["--setenv", "PYTHONUSERBASE", site.getuserbase()]
    cache = os.path.abspath(build_cache())
    if cache in writable:
        args += ["--setenv", "PKB_CACHE_DIR", cache]
    return args


def _covers_private_tmp(path: str) -> bool:
    """/tmp itself or a folder above it (a command started in /tmp, a candidate in /tmp): bound over the private
    /tmp, it leaves the command no private temporary folder there (read-only: a `pkb screen` started in /tmp
    crashed on its first tempfile)."""
    return path == "/tmp" or "/tmp".startswith(path.rstrip("/") + "/")


def confines_pids() -> bool:
    """Whether the supervisor caps the sandbox's tasks through its PID namespace's pid_max: where only that
    works (the user root, whom RLIMIT_NPROC exempts) and is safe (Linux >= 6.14, where each PID namespace has
    a pid_max of its own: before, the setting was the machine's)."""
    if os.geteuid() != 0 or os.environ.get(NO_PID_MAX) == "1":
        return False
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 14)


def precompile() -> None:
    """Byte-compile pkb's own packages here, outside: inside, the source tree is read-only, so a process
    that finds no .pyc compiles every module it imports, every time (a fresh checkout's sandboxed GPU score
    took twice as long). What cannot be written (a read-only install) is left as it is."""
    import compileall

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for package in ("candidate_sandbox", "pkb", "pkbsim", "hwbackend", "tasks"):
        if os.path.isdir(os.path.join(root, package)):
            compileall.compile_dir(os.path.join(root, package), quiet=2, workers=1)


@functools.cache
def check() -> None:
    """Raise SandboxUnavailable, naming the fix, when a sandbox cannot start on this machine; byte-compile
    pkb first (precompile)."""
    precompile()
    cmd = [*prefix(), sys.executable, "-c", "pass"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise SandboxUnavailable(f"bwrap cannot run ({e}); pass --no-sandbox to run candidates unconfined") from None
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        hint = (" (allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1)"
                if "namespace" in why.lower() or "permission" in why.lower() else "")
        raise SandboxUnavailable(f"bwrap cannot start the sandbox here: {why}{hint}; or pass --no-sandbox")


@dataclass(frozen=True)
class Relayed:
    """How a command run inside the sandbox ended: its exit code (None: killed at the time limit), the
    supervisor's line if it ended it, and whether the command printed anything on stdout."""
    code: int | None
    breach: str | None
    printed: bool = False


def run_inside(command: list[str], writable: list[str], readable: list[str],
               timeout: float | None = None, candidate_caches: bool = False) -> Relayed:
    """Run `command` (the caller's, e.g. its own command line again) inside the sandbox, relaying its output
    (line by line) and its exit code (the caller names its build caches among `writable`). `timeout`: a
    wall-clock bound kept here, outside the sandbox: past it the whole sandbox is killed (code None).
    `candidate_caches`: as for `prefix`."""
    check()
    cmd = [*prefix(writable, readable, candidate_caches=candidate_caches), *command]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    breaches: list[str] = []
    printed: list[bool] = []

    def relay(src, dst, out: bool) -> None:
        for line in src:
            dst.write(line)
            dst.flush()
            if out:
                printed.append(True)
            elif line.startswith(LINE):
                breaches.append(line.strip())
    threads = [threading.Thread(target=relay, args=(proc.stderr, sys.stderr, False), daemon=True),
               threading.Thread(target=relay, args=(proc.stdout, sys.stdout, True), daemon=True)]
    for t in threads:
        t.start()
    try:
        code: int | None = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()   # bwrap: the sandbox dies with it (--die-with-parent)
        proc.wait()
        code = None
    for t in threads:
        t.join(5)
    return Relayed(code, breaches[0] if breaches else None, bool(printed))
