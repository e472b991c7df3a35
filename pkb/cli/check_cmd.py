"""`pkb check`: torchrun drop-in that runs a script on simulated ranks and reports what went wrong."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys

from candidate_sandbox import default_memory
from pkb.cli._arguments import add_sandbox_argument
from pkb.errors import UsageError
from pkbsim import CHECK_EXIT_CODES, EXAMPLES_DIR, RUN_TIMEOUT_S, install_plugins


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="run a torchrun script on N simulated ranks on the CPU",
                       description="Run an unmodified torchrun script on simulated ranks; report deadlocks, "
                                   "mismatches, protocol errors and exceptions. Exit: 0 ok, 3 deadlock/mismatch/"
                                   "protocol, 4 the script raised, 5 timeout, 6 inconclusive (a limit of pkb, named), "
                                   "7 nothing checked (no communication was simulated), 8 a rank ended its process with "
                                   "os._exit mid-run or with a non-zero status, 2 bad usage; with --sandbox also 86 "
                                   "(the sandbox stopped the run at a cap: processes or memory, named on stderr). Out of "
                                   "memory under --memory-gb is 6: the ranks share one process, a limit of pkb.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=None, metavar="N",
                   help="ranks per node (default 4; 8 with --demo)")
    p.add_argument("--nnodes", type=int, default=1, help="simulated nodes (world size = nnodes * nproc)")
    p.add_argument("--standalone", action="store_true", help="accepted for torchrun compatibility")
    p.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, metavar="S", help="wall-clock limit in seconds")
    p.add_argument("--memory-gb", type=float, default=None, metavar="G",
                   help="address-space cap of the process all ranks share (default: 3/4 of this machine's memory; "
                        "0: none); beyond it the run is inconclusive (exit 6), not killed by the OS")
    p.add_argument("--p2p-buffer", type=int, default=0, metavar="BYTES",
                   help="sends up to this size complete without a matching receive (default 0: rendezvous)")
    p.add_argument("--lazy-p2p-init", action="store_true",
                   help="model NCCL's lazy, blocking creation of per-pair communicators on first ungrouped p2p")
    p.add_argument("--trace", metavar="FILE", help="write the per-rank operation trace (JSON) to FILE")
    p.add_argument("--shape-run", action="store_true",
                   help="run under FakeTensorMode: full-size shapes and FLOPs, data only for small tensors (at "
                        "most 65536 elements); a read of a large tensor's value (loss.item()) gets a stand-in, "
                        "named in a note")
    p.add_argument("--json", action="store_true", help="print one JSON object; the program's output goes to stderr")
    p.add_argument("--full-traceback", action="store_true",
                   help="an exception's report lists torch's frames too (default: the script's frames only)")
    p.add_argument("--demo", action="store_true",
                   help="check the bundled pipeline-parallel example and its fixed twin")
    p.add_argument("script", nargs="?", help="the torchrun script")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments for the script")
    add_sandbox_argument(p, opt_in=True)
    p.set_defaults(run=run)


def run_options(args, nproc: int, output):
    """RunOptions from parsed `pkb check` arguments (also used for the corpus headers' options)."""
    from pkbsim import RunOptions  # the world, and torch with it: `pkb --help` imports this module
    return RunOptions(nproc=nproc * args.nnodes, nproc_per_node=nproc, timeout=args.timeout,
                      p2p_buffer=args.p2p_buffer, lazy_p2p_init=args.lazy_p2p_init,
                      record_compute=bool(args.trace), shape_run=args.shape_run,
                      shape_run_values=args.shape_run, output=output, catch_exit=True,
                      full_traceback=getattr(args, "full_traceback", False))


def parse(argv: list[str]):
    """Parse `pkb check` arguments (without the command name)."""
    parser = argparse.ArgumentParser(prog="pkb")
    add_parser(parser.add_subparsers())
    return parser.parse_args(["check", *argv])


def render(result, label: str, exit_code: bool = True) -> str:
    """The findings, then one line with the verdict (and exit code: not for a pytest failure, which has none)."""
    lines = [f.render() for f in result.findings]
    code = f" (exit {result.exit_code})" if exit_code else ""
    head = (f"pkb check: {label}: {result.verdict.upper().replace('_', ' ')}{code} - {result.world_size} ranks, "
            f"{result.ops} communication ops, {result.wall_s:.2f} s")
    return "\n".join([*lines, head])


MAX_RANKS = 1024  # more is a typo, not a job: each rank is a thread of this process with its program's state


def check_limits(args) -> int:
    """The ranks per node that `args` asks for, after the checks `pkb check` and the pytest marker
    (pkb/cli/pytest_plugin.py) share. Raises UsageError."""
    nproc = args.nproc_per_node if args.nproc_per_node is not None else (8 if args.demo else 4)
    if nproc < 1 or args.nnodes < 1:
        raise UsageError("--nproc-per-node and --nnodes must be at least 1")
    if nproc * args.nnodes > MAX_RANKS:
        raise UsageError(f"{nproc * args.nnodes} ranks: pkb check simulates at most {MAX_RANKS}; pass fewer")
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive (seconds)")
    if args.memory_gb is not None and args.memory_gb < 0:
        raise UsageError("--memory-gb must be 0 (no cap) or more")
    return nproc


def run(args) -> int:
    if args.demo and args.script:
        raise UsageError("--demo runs the bundled example; drop SCRIPT or drop --demo")
    nproc = check_limits(args)
    if args.demo:
        return _demo(args, nproc)
    if not args.script:
        raise UsageError("no script given; usage: pkb check --nproc-per-node N SCRIPT [ARGS...] (or --demo)")
    if not os.path.isfile(args.script):
        raise UsageError(f"script {args.script!r} not found; pass the path of a torchrun script")
    from pkbsim import ScriptError, check_script, write_trace  # the world (torch): not for `pkb --help`

    install_plugins()  # symmetric memory, Triton, inline CUDA
    output = sys.stderr if args.json else sys.stdout
    try:
        with memory_cap(args.memory_gb):
            result = check_script(args.script, args.script_args, run_options(args, nproc, output))
    except ScriptError as e:
        raise UsageError(str(e)) from None
    if args.trace:
        write_trace(args.trace, result.world_size, result.traces, {"script": os.path.abspath(args.script),
                                                                    "verdict": result.verdict})
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(render(result, os.path.basename(args.script)))
    _exit_if_stuck(result)
    return result.exit_code


@contextlib.contextmanager
def memory_cap(gb: float | None):
    """Cap this process's address space (the soft limit, restored after) at `gb` GiB, or at 3/4 of the machine's
    memory: a program that outgrows it fails an allocation in a rank, which is reported, where the OS would
    kill the whole process without a word."""
    cap = default_memory() if gb is None else int(gb * 2**30)
    if cap <= 0:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _demo(args, nproc: int) -> int:
    from pkbsim import check_script  # the world (torch): not for `pkb --help`

    install_plugins()
    root = EXAMPLES_DIR
    expected = {"pipeline_deadlock.py": "deadlock", "pipeline_even_odd.py": "ok"}
    results = {}
    for name in expected:
        out = sys.stderr if args.json else sys.stdout
        results[name] = check_script(os.path.join(root, name), [], run_options(args, nproc, out))
        if not args.json:
            print(render(results[name], name) + "\n")
    ok = all(results[n].verdict == v for n, v in expected.items())
    if args.json:
        print(json.dumps({n: r.to_json() for n, r in results.items()}, indent=1))
    else:
        print("demo: " + ("both verdicts as expected" if ok else "UNEXPECTED verdicts"))
    return 0 if ok else 1


def _exit_if_stuck(result) -> None:
    """Rank threads that ignored the watchdog cannot be joined; end the process instead of hanging."""
    if result.stuck_threads:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(CHECK_EXIT_CODES["timeout"])
