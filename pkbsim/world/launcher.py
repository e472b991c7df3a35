"""Run an unmodified torchrun script on N simulated ranks (threads) and collect the verdict.

`simulated_process` installs, for the length of a run, everything that is per-process in a real launch
and must become per-rank here (the c10d world, torch.cuda, os.environ, stdout), and the registered
plug-ins (plugins.py). The world's core registers none itself: a caller that wants pkb's symmetric memory,
Triton and inline CUDA imports pkbsim.plugins first, as the entry points do (`pkb check` in
pkb/cli/check_cmd.py, pkbsim/taskrun.py for tasks and the screen, pkb/corpus.py, the tests' conftest.py).
`run_script` starts one thread per rank, each executing the script as its own `__main__` module, and
watches them: a deadlock ends the run at once; a rank stuck outside any simulated wait ends it at the
timeout, with every rank's Python stack.
"""
from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import os
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import _len_torch_dispatch_stack, _pop_mode

from pkbsim.errors import SimulatorLimit, out_of_memory
from pkbsim.world import context
from pkbsim.world.comms import Engine
from pkbsim.world.context import RankContext
from pkbsim.world.defaults import RUN_TIMEOUT_S
from pkbsim.world.findings import EXIT_CODES, Finding, verdict_of
from pkbsim.standins.gpu_model import DEFAULT_TOPOLOGY
from pkbsim.world.machine_load import OthersClock
from pkbsim.world.op_lookup import install as serialise_op_lookups
from pkbsim.world.patching import Patches
from pkbsim.world.plugins import registered
from pkbsim.world.sites import user_stack
from pkbsim.world.trace import RankTrace
from pkbsim.world.world import SimAbort, World

UNLIMITED = 1 << 62


class ScriptError(Exception):
    """The script cannot be read or compiled."""


class _ProcessExit(BaseException):
    """Unwinds a rank thread that called os._exit, once the run is over (see RunOptions.catch_exit)."""


def _exit_catcher(world: World, launcher: threading.Thread, real_exit: Callable) -> Callable:
    """os._exit as the program's threads see it while a run goes on: the calling rank's process ends (its
    thread parks where it called, so none of its code runs again), not the simulator's."""
    def _exit(status=0, *args):
        ctx = context.current()
        if ctx is None and threading.current_thread() is launcher:
            return real_exit(status, *args)
        frame = sys._getframe(1)
        site = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        if ctx is None:  # a thread the program started: its process ended, but pkb cannot tell whose
            world.fail(Finding("process_exit", f"a thread the program started (not a rank's own) called "
                               f"os._exit({status!r}) at {site}: on a GPU it ends its rank's whole process at "
                               f"once; pkb cannot tell which rank's, so the run ends here", [], [site]))
            raise SystemExit(status)   # ends this thread; threading prints nothing for a plain SystemExit
        ctx.trace.exit_site = site
        world.process_exit(ctx.rank, status, site)
        world.exit_release.wait()
        ctx.gone = True
        raise _ProcessExit(status)
    return _exit


def _exit_findings(world: World, findings: list[Finding]) -> list[Finding]:
    """The os._exit calls of a run, as findings: fatal when the status is not 0 or when a peer was left
    waiting (the run failed), a note when every rank got what it needed (os._exit(0) at the very end)."""
    if not world.exits:
        return []
    failed = verdict_of(findings) != "ok"
    out = []
    for rank, status, site in world.exits:
        who, ranks = f"rank {rank}", [rank]
        if status not in (0, None):
            out.append(Finding("process_exit", f"{who} ended its process with os._exit({status!r}) at {site}: a "
                               f"non-zero status, so torchrun would report the job failed", ranks, [site]))
        elif failed:
            out.append(Finding("process_exit", f"{who} ended its process with os._exit(0) at {site} while the "
                               f"run still needed it: on a GPU its peers would hang or fail the same way", ranks,
                               [site]))
        else:
            out.append(Finding("os_exit", f"{who} ended its process with os._exit(0) at {site}; no rank was "
                               f"left waiting for it", ranks, [site]))
    return out


@dataclass
class RunOptions:
    nproc: int  # world size
    nproc_per_node: int | None = None  # ranks per simulated node (default: all on one node)
    timeout: float = RUN_TIMEOUT_S  # wall seconds, less those other processes took from the run's cores (machine_load.py)
    p2p_buffer: int = 0
    lazy_p2p_init: bool = False
    record_compute: bool = False
    shape_run: bool = False
    # a shape run gives small tensors their data and a read of a large one's value a stand-in (`pkb check`:
    # shape_run.py); off, every tensor is fake and a read raises (the screen's cost stage)
    shape_run_values: bool = False
    no_comm: bool = False  # communication completes without moving data (task validation)
    output: object = None  # where the program's own prints go (default: stdout)
    topology: str = DEFAULT_TOPOLOGY  # the machine whose GPU torch.cuda.get_device_properties describes
    full_traceback: bool = False  # an exception's report keeps torch's frames too (the program's alone otherwise)
    # os._exit in a thread of the program ends that rank's "process" (its thread parks; a finding names the rank
    # and line) instead of this whole process. `pkb check` turns it on; off, os._exit ends the process as on a GPU.
    catch_exit: bool = False
    # Rank threads share the GIL; on one core their hand-offs are ~2x cheaper than across cores
    # (benchmarks/world_overhead.py). None = let the OS place them.
    pin_core: int | None = field(default_factory=lambda: min(os.sched_getaffinity(0)))


@dataclass
class RunResult:
    world_size: int
    findings: list[Finding]
    ops: int
    wall_s: float
    traces: list[RankTrace] = field(default_factory=list)
    eager_sends: int = 0
    blocked_sends: int = 0
    stuck_threads: int = 0
    group_labels: dict = field(default_factory=dict)

    def group_label(self, name: str) -> str:
        return self.group_labels.get(name, f"group {name!r}")

    @property
    def verdict(self) -> str:
        return verdict_of(self.findings)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "world_size": self.world_size,
                "findings": [f.to_json() for f in self.findings], "ops": self.ops, "wall_s": round(self.wall_s, 3)}


@contextlib.contextmanager
def simulated_process(nproc: int, output, topology: str = DEFAULT_TOPOLOGY):
    """Patch the process so that each rank thread sees its own torchrun world."""
    from pkbsim.standins.autocast import install_autocast
    from pkbsim.standins.compile_shim import install_compile_shim
    from pkbsim.standins.cuda_shim import install_torch_cuda
    from pkbsim.standins.device_api import install_device_api
    from pkbsim.standins.rank_singletons import install_rank_singletons
    from pkbsim.standins.device_identity import install_device_identity
    from pkbsim.standins.dist_shim import install_dist
    from pkbsim.standins.dtensor_ops import install_dtensor_ops
    from pkbsim.standins.unsimulated import install_unsimulated
    from pkbsim.standins.environ import install_environ
    from pkbsim.world.process_group import register
    from pkbsim.standins.rank_imports import install_rank_imports
    from pkbsim.standins.thread_world import install, uninstall

    register()
    patches = Patches()
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    old_world = install()
    no_autograd_threads = torch.autograd.set_multithreading_enabled(False)
    try:
        install_torch_cuda(patches, nproc, topology)
        install_device_identity(patches)
        install_device_api(patches, nproc)
        install_rank_singletons(patches)
        install_dist(patches)
        install_dtensor_ops(patches)
        install_compile_shim(patches)
        install_autocast(patches)
        install_unsimulated(patches)
        install_rank_imports(patches)
        for plugin in registered():
            plugin.install(patches)
        install_environ(patches, output or sys.stdout)
        patches.set(sys, "excepthook", sys.excepthook)  # each rank's init_process_group wraps it with a prefix
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        patches.restore()
        no_autograd_threads.__exit__(None, None, None)
        uninstall(old_world)
        torch._C._distributed_c10d._set_thread_isolation_mode(False)


def _program_frames(exc: BaseException) -> list:
    """The program's frames: not pkbsim's or torch's, nor one that hides itself (`__tracebackhide__`, pytest's
    convention: the pytest plugin's rank body, pkb/cli/pytest_plugin.py)."""
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    return [f for f, frame in zip(traceback.extract_tb(exc.__traceback__), frames) if "pkbsim" not in f.filename
            and os.sep + "torch" + os.sep not in f.filename and not frame.f_locals.get("__tracebackhide__")]


def error_finding(rank: int, exc: BaseException, full_traceback: bool = False) -> Finding:
    """A rank's exception as a finding, at the program's line (a limit of pkb's as inconclusive)."""
    frames = _program_frames(exc)
    site = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
    details = [f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}: {f.line}" for f in frames[-4:]]
    if full_traceback:
        details = [f"{f.filename}:{f.lineno} in {f.name}: {f.line}"
                   for f in traceback.extract_tb(exc.__traceback__) if "pkbsim" not in f.filename]
    if isinstance(exc, SimulatorLimit):
        return Finding("not_simulated", f"rank {rank}: {exc} (a limit of pkb, not the program's fault)", [rank],
                       [site], details)
    if out_of_memory(exc):
        return Finding("not_simulated", f"rank {rank}: out of memory ({type(exc).__name__}): every simulated rank's "
                                        f"data lives in this one process, under its memory cap (--memory-gb): a limit "
                                        f"of pkb, not the program's fault", [rank], [site], details)
    return Finding("error", f"rank {rank} raised {type(exc).__name__}: {exc}", [rank], [site], details)


def _rank_main(world: World, engine: Engine, rank: int, body: Callable[[RankContext], None], opts: RunOptions,
               trace: RankTrace):
    from pkbsim.standins.cuda_shim import DeviceMapMode
    from pkbsim.standins.environ import torchrun_env
    from pkbsim.timing.fused_calls import FusedCallsMode
    from pkbsim.world.ops_mode import ensure_ops_mode

    if opts.pin_core is not None:
        os.sched_setaffinity(0, {opts.pin_core})  # this thread only: see RunOptions.pin_core
    world.ranks[rank].thread = threading.current_thread()
    ctx = RankContext(world, engine, rank, trace, device_index=0,
                      env=torchrun_env(rank, world.size, world.nproc_per_node), generator=torch.Generator(),
                      record_compute=opts.record_compute)
    context.bind(ctx)
    status = "done"
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(DeviceMapMode(ctx.generator))
            if opts.shape_run:
                from torch._subclasses.fake_tensor import FakeTensorMode
                stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
            if opts.record_compute:
                stack.enter_context(FusedCallsMode(ensure_ops_mode(ctx)))
            body(ctx)
        _check_unwaited(ctx)
    except _ProcessExit:
        status = "exited"
    except SimAbort:
        status = "failed" if world.ranks[rank].status != "exited" else "exited"
    except SystemExit as e:
        frames = _program_frames(e)
        trace.exit_site = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else None
        world.ranks[rank].exit_note = f"sys.exit({e.code!r})" + (f" at {trace.exit_site}" if trace.exit_site else "")
        if e.code not in (None, 0):
            status = "failed"
            where = f" at {trace.exit_site}" if trace.exit_site else ""
            world.fail(Finding("error", f"rank {rank} exited with status {e.code}{where} (sys.exit)", [rank],
                               [trace.exit_site] if trace.exit_site else []), unless_failed=True)
    except BaseException as e:  # noqa: BLE001 - a rank's exception is a finding, not a crash of pkb
        status = "failed"
        world.fail(error_finding(rank, e, opts.full_traceback), unless_failed=True)
    finally:
        _drop_dispatch_modes()
        if status != "exited":   # an exited rank was finished when it called os._exit
            world.finish(rank, status, _last_op(trace))
        context.bind(None)


def _last_op(trace: RankTrace) -> str | None:
    """The rank's last communication, for a deadlock report that names where a finished rank stopped."""
    for r in reversed(trace.records):
        if r["kind"] in ("collective", "p2p", "symm"):
            return f"{r['op']} at {r['site']}"
    return None


def _drop_dispatch_modes() -> None:
    """Pop the modes the rank left pushed (its ops mode stays pushed for the whole run). Left in the thread's
    C++ state they are released when the OS thread ends, which can be after `join` returned and the
    interpreter began to shut down: releasing a Python object then ends the process (std::terminate)."""
    while _len_torch_dispatch_stack():
        _pop_mode()


def _check_unwaited(ctx: RankContext) -> None:
    pending = list(ctx.unwaited.values())
    pending = [w for w in pending if not getattr(w, "_batch", None) and w._ops and w._ops[0].kind == "coll"]
    if pending:
        w = pending[0]
        msg = (f"rank {ctx.rank}: an async operation issued at {w._site} was never waited (work.wait() or "
               f"torch.cuda.synchronize()): its buffers can be reused or freed while it is still in flight")
        ctx.world.add_finding(Finding("race", msg, [ctx.rank], [w._site]))


def _release_exited(world: World, threads: list[threading.Thread]) -> None:
    """The run's result is taken: threads parked in os._exit unwind (their output hidden, any wait refused)."""
    if not world.exits:
        return
    with world.lock:
        world.over = True
    world.exit_release.set()
    for r, th in enumerate(threads):
        if world.ranks[r].status == "exited":
            th.join(timeout=2.0)


def _kill(thread: threading.Thread) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(SimAbort))


def _timeout_finding(world: World, threads: list[threading.Thread], timeout: float) -> Finding:
    frames = sys._current_frames()
    details = []
    for st, th in zip(world.ranks, threads):
        if not th.is_alive() or st.status in ("done", "failed"):
            details.append(f"rank {st.rank}: {st.status}")
        elif st.status == "blocked" and st.wait is not None:
            details.append(f"rank {st.rank}: blocked in {st.wait.label()} at {st.wait.site}")
        else:
            stack = user_stack(frames.get(th.ident))
            details.append(f"rank {st.rank}: running outside any simulated wait, at " + " <- ".join(stack))
    running = [st.rank for st in world.ranks if st.status == "running"]
    return Finding("timeout", f"no result after {timeout:g} s; ranks {running} never reached a simulated "
                   f"wait (an infinite loop, a spin on memory no one writes, or a very long computation; raise "
                   f"--timeout if it is legitimate)", running, [], details)


def _script_body(path: str, argv: list[str]) -> Callable[[RankContext], None]:
    """Each rank executes the script as its own `__main__` module: no module state is shared."""
    path = os.path.abspath(path)
    try:
        with open(path) as f:
            code = compile(f.read(), path, "exec")
    except (OSError, UnicodeDecodeError) as e:
        raise ScriptError(f"cannot read {path}: {e}") from None
    except SyntaxError as e:
        raise ScriptError(f"{os.path.basename(path)}:{e.lineno}: syntax error: {e.msg}; fix the script") from None

    def body(ctx: RankContext) -> None:
        module = types.ModuleType("__main__")
        module.__file__, module.__builtins__ = path, builtins
        exec(code, module.__dict__)
    return body


def run_script(path: str, argv: list[str], opts: RunOptions) -> RunResult:
    """Run `path` with `argv` on opts.nproc simulated ranks; never hangs longer than opts.timeout."""
    body = _script_body(path, argv)
    path = os.path.abspath(path)
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(path))
    try:
        return run_ranks(body, opts)
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


def run_ranks(body: Callable[[RankContext], None], opts: RunOptions) -> RunResult:
    """Call body(ctx) on every simulated rank (a torchrun-like environment, no process group yet)."""
    world = World(opts.nproc, nproc_per_node=opts.nproc_per_node, p2p_buffer=opts.p2p_buffer,
                  lazy_p2p_init=opts.lazy_p2p_init)
    world.store = dist.HashStore()
    world.no_comm = opts.no_comm
    engine = Engine(world)
    t0 = time.perf_counter()
    traces = [RankTrace(r, t0) for r in range(opts.nproc)]
    threads = [threading.Thread(target=_rank_main, args=(world, engine, r, body, opts, traces[r]),
                                name=f"pkbsim-rank-{r}", daemon=True) for r in range(opts.nproc)]
    serialise_op_lookups()   # the ranks must not race to build an op's Python object (op_lookup.py)
    stuck = 0
    threads_before = torch.get_num_threads()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // opts.nproc))  # the ranks are the parallelism
    # torch's large heap would make every full collection cost milliseconds per operation: the run's collections
    # see only what it makes. No collection first (0.2-0.4 s per run, twice per screen on its critical path):
    # garbage older than the run waits for the first collection after it.
    gc.freeze()
    run_patches = Patches()
    try:
        with simulated_process(world.nproc_per_node, opts.output, opts.topology):
            if opts.shape_run:   # every fake storage an address of its own (fake_pointers.py)
                from pkbsim.standins.fake_pointers import install_fake_pointers
                from pkbsim.standins.shape_run import install_shape_run
                install_fake_pointers(run_patches)
                install_shape_run(run_patches, values=opts.shape_run_values)
            if opts.catch_exit:
                import posix
                catcher = _exit_catcher(world, threading.current_thread(), posix._exit)
                run_patches.set(os, "_exit", catcher)
                run_patches.set(posix, "_exit", catcher)
            for th in threads:
                th.start()
            deadline = t0 + opts.timeout
            others = OthersClock({opts.pin_core} if opts.pin_core is not None else None)
            def running() -> list[threading.Thread]:  # a thread parked in os._exit has ended its rank
                return [th for r, th in enumerate(threads) if th.is_alive() and world.ranks[r].status != "exited"]

            while running():
                for th in running():
                    th.join(timeout=0.05)
                now = time.perf_counter()
                if (not world.pauses and now > deadline + world.excluded_s
                        and now > deadline + world.excluded_s + others.taken(now - t0)):
                    world.fail(_timeout_finding(world, threads, opts.timeout))
                    for th in running():
                        _kill(th)
                    for th in running():
                        th.join(timeout=2.0)
                    stuck = len(running())
                    break
            findings = list(world.findings)
            findings[:0] = _exit_findings(world, findings)
            _release_exited(world, threads)
    finally:
        run_patches.restore()
        gc.unfreeze()
        torch.set_num_threads(threads_before)
    ops = sum(1 for t in traces for r in t.records if r["kind"] in ("collective", "p2p", "symm"))
    labels = {name: repr(c) for name, c in engine.comms.items()}
    return RunResult(opts.nproc, findings, ops, time.perf_counter() - t0, traces,
                     world.eager_sends, world.blocked_sends_at_deadlock, stuck, labels)
