"""pytest plugin: `@pytest.mark.pkb_ranks(4)` runs a test function on simulated ranks, as `pkb check` runs a
script, and fails it with pkb's report (deadlock, mismatch, race: ranks, lines, what each rank waits for).

Loaded by the `pytest11` entry point `pkb` (or `-p pkb` where plugin autoloading is off). It imports no torch
until a marked test runs: every pytest session of an environment with pkb installed loads it.
"""
from __future__ import annotations

import inspect
import os
import threading
from dataclasses import replace

import pytest

from pkb.errors import UsageError

MARKER = "pkb_ranks"
# the marker's keywords: `pkb check`'s options of the same names (pkb/cli/check_cmd.py), plus the GPU model
# and the backend the test's process group is initialised with
_CHECK_OPTIONS = ("nnodes", "timeout", "memory_gb", "p2p_buffer", "lazy_p2p_init", "full_traceback")
_OPTIONS = (*_CHECK_OPTIONS, "topology", "backend")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(nproc_per_node, *, nnodes=1, topology='hgx-h100', backend='nccl', timeout=120, "
                   "p2p_buffer=0, lazy_p2p_init=False, memory_gb=None, full_traceback=False): run the test on "
                   "simulated ranks with torch.distributed initialised, as `pkb check` runs a script; a deadlock, "
                   "mismatch, race or a rank's exception fails it with pkb's report")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    marker = pyfuncitem.get_closest_marker(MARKER)
    if marker is None:
        return None
    fn = pyfuncitem.obj
    if inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn):
        pytest.fail(f"{MARKER}: {pyfuncitem.name} is async or a generator; the ranks call a plain function: make "
                    f"the test a plain def", pytrace=False)
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    run_on_ranks(fn, kwargs, pyfuncitem.name, *marker.args, **marker.kwargs)
    return True


def run_on_ranks(fn, kwargs: dict, label: str, nproc_per_node=None, **options) -> None:
    """Call fn(**kwargs) on every simulated rank after init_process_group; pytest.fail with pkb's report when
    the run is not ok. The fixtures' values are the same objects on every rank (made once, by pytest)."""
    from pkb.cli import check_cmd  # and pkbsim with it: every pytest session loads this plugin, none of them

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        pytest.fail(f"{MARKER}: unknown keyword(s) {', '.join(unknown)}; use {', '.join(_OPTIONS)}", pytrace=False)
    topology, backend = options.pop("topology", None), options.pop("backend", "nccl")
    args = check_cmd.parse([])   # `pkb check`'s defaults, then the marker's values under the same names
    for name, value in {"nproc_per_node": nproc_per_node, **options}.items():
        setattr(args, name, value)
    if nproc_per_node is not None and (not isinstance(nproc_per_node, int) or isinstance(nproc_per_node, bool)):
        pytest.fail(f"{MARKER}: the number of ranks must be an int, got {nproc_per_node!r}; e.g. {MARKER}(4)",
                    pytrace=False)
    try:
        opts, problem = _run_options(args, check_cmd.check_limits(args), topology), None
    except UsageError as e:
        problem = f"{MARKER}: {e}"
    if problem:
        pytest.fail(problem, pytrace=False)   # outside `except`: no chained traceback in the report

    from pkbsim import check_ranks, install_plugins  # the world (torch): only once a marked test runs

    install_plugins()  # as `pkb check` does

    runs: list[dict[int, BaseException]] = []   # per run (check_ranks may rerun the body), each rank's exception
    with check_cmd.memory_cap(args.memory_gb):
        result = check_ranks(_rank_body(fn, kwargs, backend, runs), opts)
    verdict, raised = result.verdict, (runs[0] if runs else {})
    skips = [e for e in raised.values() if isinstance(e, (pytest.skip.Exception, pytest.xfail.Exception))]
    if verdict == "error" and skips and len(skips) == len(raised):
        raise raised[min(raised)]   # every rank that raised asked pytest to skip or xfail the test
    if verdict in ("ok", "nothing_checked") and not result.stuck_threads:
        return   # no communication is fine for a test: its own assertions ran on every rank
    result.findings.extend(_other_errors(result, raised, opts))
    report = [check_cmd.render(result, label, exit_code=False)]
    if result.stuck_threads:
        report.append(f"{result.stuck_threads} rank thread(s) ignored the timeout and still run in this pytest "
                      f"process; later tests may be slowed or disturbed: run this test alone")
    pytest.fail("\n".join(report), pytrace=False)


def _run_options(args, nproc: int, topology: str | None):
    """`pkb check`'s RunOptions; under xdist each worker's ranks share a core of their own (rank threads are
    pinned to one core, RunOptions.pin_core), not the first core of all."""
    from pkb.cli import check_cmd  # (as in run_on_ranks)

    opts = check_cmd.run_options(args, nproc, None)   # output None: stdout at run time, which pytest captures
    if topology is not None:
        from pkbsim import TopologyError, load_topology  # (as check_ranks above)
        try:
            load_topology(topology)
        except TopologyError as e:
            raise UsageError(str(e)) from None
        opts = replace(opts, topology=topology)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        cores = sorted(os.sched_getaffinity(0))
        opts = replace(opts, pin_core=cores[int(worker[2:]) % len(cores)])
    return opts


# a rank's own exceptions (the world's SimAbort, SystemExit and os._exit's unwinding are not the test's)
_RAISED = (Exception, pytest.skip.Exception, pytest.xfail.Exception, pytest.fail.Exception)


def _rank_body(fn, kwargs: dict, backend: str | None, runs: list):
    """What each rank runs: the torchrun prelude a script would have, then the test function. Every rank's
    exception is kept, per run: the world reports only the first."""
    worlds: list = []
    lock = threading.Lock()

    def body(ctx) -> None:
        __tracebackhide__ = True   # a rank's report starts at the test's own lines (launcher._program_frames)
        import torch
        import torch.distributed as dist

        with lock:
            if ctx.world not in worlds:
                worlds.append(ctx.world)
                runs.append({})
            raised = runs[worlds.index(ctx.world)]
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend)
        try:
            fn(**kwargs)
        except _RAISED as e:
            raised[ctx.rank] = e
            raise
    return body


def _other_errors(result, raised: dict, opts) -> list:
    """The exceptions of the ranks the report does not name (pkb keeps the first rank's; each rank's assertion
    may differ)."""
    from pkbsim import error_finding  # (as check_ranks above)

    named = {r for f in result.findings if f.kind in ("error", "not_simulated") for r in f.ranks}
    return [error_finding(r, e, opts.full_traceback) for r, e in sorted(raised.items()) if r not in named]
