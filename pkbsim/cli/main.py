"""`pkb`: the command line. Each subcommand lives in its own module and registers itself here.

Exit codes: 0 success; 2 bad usage or input (one line on stderr naming the problem and the fix);
`pkb check`: 3 deadlock/mismatch/protocol error, 4 the program raised, 5 watchdog timeout.
"""
from __future__ import annotations

import argparse
import sys

from pkbsim.cli import check_cmd


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pkb", description="Evaluator for multi-GPU kernels.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    check_cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except UsageError as e:
        print(f"pkb {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pkb {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
