"""Errors every subcommand may raise."""


class UsageError(Exception):
    """Bad input from the user: printed as one line naming the problem and the fix; exit code 2."""
