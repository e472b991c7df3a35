"""`pkb screen` and `pkb check --sandbox` re-run inside the candidate sandbox (candidate_sandbox/) before anything
heavy is imported: the outer process only relays, and writes a verdict of last resort where the screen inside
gave none. (The commands' sandbox flags are in _arguments.py.)"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import candidate_sandbox as sandbox

WRAPPED = {"screen": False, "check": True}  # command -> whether the sandbox is opt-in (--sandbox) for it
OUTPUT_OPTIONS = ("--timeline", "--trace")  # their value is a file the command writes
SCREEN_SLACK_S = 900.0  # seconds beyond four run timeouts before a sandboxed screen is given up (builds: 600)
PKB = [sys.executable, "-c", "import sys; from pkb.cli.main import main; sys.exit(main())"]  # `pkb`, again inside


def run_wrapped(argv: list[str]) -> int | None:
    """`pkb ARGV` run inside the sandbox when the command is one that runs a candidate in its own process;
    None when it runs here (another command, help, --no-sandbox, already inside, not opted in)."""
    cmd = argv[0] if argv else ""
    if cmd not in WRAPPED or not sandbox.wanted() or {"-h", "--help", "--no-sandbox"} & set(argv):
        return None
    if WRAPPED[cmd] and "--sandbox" not in argv:
        return None
    readable, writable = set(), set()
    if cmd == "screen":
        writable.add(os.path.join(tempfile.gettempdir(), "pkb-timelines"))  # the default timeline's folder
    for i, arg in enumerate(argv[1:], 1):
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if argv[i - 1] in OUTPUT_OPTIONS or arg.split("=", 1)[0] in OUTPUT_OPTIONS:
            writable.add(os.path.dirname(os.path.abspath(value)))
        elif os.path.exists(value):
            readable.add(value if os.path.isdir(value) else os.path.dirname(os.path.abspath(value)))
    bound = _screen_bound(argv) if cmd == "screen" else None
    try:
        relayed = sandbox.run_inside([*PKB, *argv], [sandbox.build_cache(), *sorted(writable)], sorted(readable), bound,
                                     candidate_caches=cmd == "screen")
    except sandbox.SandboxUnavailable as e:
        print(f"pkb {cmd}: error: {e}", file=sys.stderr)
        return 2
    if cmd != "screen":
        return relayed.code if relayed.code is not None else 124
    from pkbsim import Reason, ReasonKind, memory_cap  # here: `pkb score` loads no part of the simulator
    if relayed.code == 2 or (relayed.code in (0, 1, 3) and relayed.printed):
        return relayed.code   # the screen's own verdict (or usage error): a line on stderr cannot override it
    if relayed.breach:
        pkbs_own = memory_cap(relayed.breach)
        if pkbs_own:
            return _verdict_here(argv, "inconclusive", Reason(ReasonKind.MEMORY_LIMIT, pkbs_own))
        return _verdict_here(argv, "reject", Reason(ReasonKind.RESOURCE_LIMIT, relayed.breach))
    if relayed.code is None:
        return _verdict_here(argv, "inconclusive", Reason(ReasonKind.TIME_LIMIT, (
            f"the screen gave no verdict within {bound:g} s (pkb's wall clock outside the sandbox)")))
    return _verdict_here(argv, "inconclusive", Reason(ReasonKind.PKB_ERROR, (
        f"the screening process ended (exit {relayed.code}) without a verdict")))


def _screen_bound(argv: list[str]) -> float:
    """The wall-clock bound on a sandboxed screen: its build, two functional runs and the reference's, the
    shape run and the cost stage, with room for a loaded machine. Only --timeout is read here: the whole
    parser imports every command, and some of them torch (1.2 s before the sandbox even started)."""
    from pkbsim import RUN_TIMEOUT_S  # (as Reason above)
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S)
    return SCREEN_SLACK_S + 4 * p.parse_known_args(argv[1:])[0].timeout


def _verdict_here(argv: list[str], verdict: str, reason) -> int:
    """The screen inside ended without its verdict (the sandbox's supervisor killed it for a cap the candidate
    broke, or it outlived its wall-clock bound), so the verdict is written out here: a reject naming the cap,
    or inconclusive (never the candidate's fault where pkb cannot tell)."""
    from pkb.cli import screen_cmd  # (as Reason above)
    from pkb.cli._screen_arguments import semantics
    from pkbsim import EndedBy, ScreenResult

    parser = argparse.ArgumentParser(prog="pkb")  # the screen's own parser, as main builds it for `pkb screen`
    screen_cmd.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    res = ScreenResult(args.task or "", args.candidate, args.world_size or 0, args.topology or "", args.seed or 0)
    if verdict == "reject":
        res.reject(EndedBy.SANDBOX, [reason])
    else:
        res.inconclusive(EndedBy.SANDBOX, reason)
    res = res.settle().under(semantics(args))
    text = f"{res.verdict.upper()} at stage sandbox: {reason.kind}: {reason.message}"
    print(json.dumps(res.to_json(), indent=1) if args.json else text)
    return res.verdict.exit_code
