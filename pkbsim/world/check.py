"""`check_script` (and `check_ranks`, for a callable: the pytest marker): one run of the simulated world, plus
the buffering counterfactual. The world runs with the plug-ins its caller registered (importing pkbsim.plugins
registers pkb's own: `pkb check` does); this core module imports none.

NCCL's send may complete before its receive is posted when the message fits the connection buffer
(NCCL_BUFFSIZE, 4 MiB by default) and blocks otherwise. When a verdict could depend on that, the
program runs a second time with the other buffering rule; if the verdicts differ, the report says
"buffering hazard": the program works or hangs depending on message size.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace

from pkbsim.world.context import RankContext
from pkbsim.world.findings import Finding
from pkbsim.world.launcher import UNLIMITED, RunOptions, RunResult, run_ranks, run_script
from pkbsim.world.order_check import cross_comm_order


def check_script(path: str, argv: list[str], opts: RunOptions) -> RunResult:
    return _checked(lambda o: run_script(path, argv, o), opts)


def check_ranks(body: Callable[[RankContext], None], opts: RunOptions) -> RunResult:
    """check_script for a callable each rank calls (the pytest marker's test body): the same counterfactual
    reruns, so `body` may run more than once."""
    return _checked(lambda o: run_ranks(body, o), opts)


def _checked(run: Callable[[RunOptions], RunResult], opts: RunOptions) -> RunResult:
    result = run(opts)
    if result.verdict == "deadlock" and result.blocked_sends and opts.p2p_buffer < UNLIMITED:
        other = run(replace(opts, p2p_buffer=UNLIMITED, output=io.StringIO(), record_compute=False))
        if other.verdict == "ok":
            result.findings.append(Finding(
                "buffering_hazard",
                "the deadlock disappears when sends are buffered: on NCCL this program passes for small "
                "messages and hangs once a message exceeds the connection buffer (NCCL_BUFFSIZE, 4 MiB by "
                "default); issue the sends and receives of an exchange together (batch_isend_irecv) or order "
                "them so that one side receives first", result.findings[0].ranks, result.findings[0].sites))
    elif result.verdict == "ok" and result.eager_sends:
        other = run(replace(opts, p2p_buffer=0, output=io.StringIO(), record_compute=False))
        if other.verdict == "deadlock":
            dl = other.findings[0]
            result.findings.append(Finding(
                "buffering_hazard",
                f"passes only because {result.eager_sends} send(s) fit the {opts.p2p_buffer}-byte buffer; with "
                f"rendezvous sends (messages above NCCL_BUFFSIZE) it deadlocks", dl.ranks, dl.sites, dl.details))
    if result.verdict == "ok" and not result.ops and not _device_kernels(result):
        result.findings.append(_nothing_checked(result))
    if result.verdict == "ok":
        hazard = cross_comm_order(result.traces, result.group_label)
        if hazard is not None:
            result.findings.append(hazard)
    return result


def _device_kernels(result: RunResult) -> int:
    """Launches an interpreter ran (PTX, Triton): checked for faults, races and co-residency even without
    a collective."""
    return sum(1 for t in result.traces for r in t.records if r["kind"] == "compute" and "kernel" in r)


def _nothing_checked(result: RunResult) -> Finding:
    """A run without one simulated communication op is no evidence: say so, and where the program left."""
    exits = sorted({t.exit_site for t in result.traces if t.exit_site})
    where = f": the program exited at {', '.join(exits)} (sys.exit or os._exit)" if exits else ""
    return Finding("no_communication", f"no communication and no device kernel was simulated, so nothing was checked{where}",
                   list(range(result.world_size)), exits)
