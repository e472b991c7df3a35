"""`pkb`: the command line. Each subcommand is a module `pkb/cli/<name>_cmd.py` with
`add_parser(subparsers)`; they are found here by name, so adding a command touches no other file. A command
line that names a command imports that command's module alone (`pkb score` loads no part of the simulator).

Exit codes: 0 success; 2 bad usage or input (one line on stderr naming the problem and the fix);
further codes per command (see each command's --help).
"""
from __future__ import annotations

import argparse
import atexit
import faulthandler
import importlib
import pkgutil
import os
import sys
import threading

import pkb.cli as cli_pkg
from pkb.cli._sandbox import run_wrapped
from pkb.errors import UsageError


def _usage_errors() -> tuple[type[Exception], ...]:
    """The errors that are the user's to fix (exit code 2, one line): our UsageError and the libraries'
    errors that say so (imported only when something was raised: `pkb score` imports no part of the batch)."""
    from pkb.batch.ray_executor import RayUnavailable
    return UsageError, RayUnavailable


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone where one of that name exists (what a command line
    that names it needs); any other name gets every command, whose parser says which there are."""
    parser = argparse.ArgumentParser(prog="pkb", description="Evaluator for multi-GPU kernels.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = sorted(m.name for m in pkgutil.iter_modules(cli_pkg.__path__) if m.name.endswith("_cmd"))
    named = f"{command.replace('-', '_')}_cmd" if command else None
    for name in [named] if named in modules else modules:
        importlib.import_module(f"pkb.cli.{name}").add_parser(sub)
    if command and command not in sub.choices:
        return build_parser()
    for parsers in sub.choices.values():
        _state_defaults(parsers)
    return parser


def _state_defaults(parser: argparse.ArgumentParser) -> None:
    """Every option whose help does not say its default gets "(default: X)" (a flag's False and an unset
    None say nothing); subcommands' own subparsers too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _state_defaults(child)
        elif (action.option_strings and action.help not in (None, argparse.SUPPRESS)
              and action.default not in (None, False, argparse.SUPPRESS) and "default" not in action.help.lower()):
            action.help += " (default: %(default)s)"


def _report_native_crashes() -> None:
    """A native crash of pkb itself (a segfault in the simulated world) prints the Python stack it happened in
    on the process's own stderr, instead of ending with no word."""
    if not faulthandler.is_enabled() and sys.__stderr__ is not None:
        try:
            faulthandler.enable(sys.__stderr__)
        except (OSError, ValueError, AttributeError):   # no file descriptor behind it (embedded, closed)
            pass


def _leave(code: int | None) -> None:
    """End the process now, as `sys.exit(code)` would but without the interpreter's teardown of every module
    and object, which with torch and a simulated world loaded takes 0.5-1 s of a warm `pkb screen` and outputs
    nothing. The exit handlers still run (temporary folders, logging) and the output is flushed. With another
    thread alive (which a normal exit would wait for) it returns and the exit is the usual one."""
    if threading.active_count() > 1:
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # closed, or a reader gone: a normal exit would lose it too
            pass
    os._exit(code or 0)


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # the process's own command line (the console script): it may end the process
    argv = sys.argv[1:] if argv is None else list(argv)
    _report_native_crashes()
    inside = run_wrapped(argv)  # screen (check --sandbox) re-run inside the candidate sandbox
    if inside is not None:
        if program:   # a relay: its verdict is out (the process inside left the same way)
            _leave(inside)
        return inside
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        code = args.run(args)
        if program and getattr(args, "leave_at_once", False):
            _leave(code)
        return code
    except KeyboardInterrupt:
        print(f"pkb {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and friends: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        if not isinstance(e, _usage_errors()):
            raise
        print(f"pkb {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
