"""Every command's --help names its exit codes, and every option with a default states it (two commands had
no description, and 39 options had a default their help did not say)."""
import argparse

from pkb.cli.main import build_parser


def _commands():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices.items()


def test_every_command_names_its_exit_codes():
    assert [n for n, p in _commands() if "exit" not in (p.description or "").lower()] == []


def test_every_option_with_a_default_states_it():
    silent = [f"{n} {a.option_strings[0]}" for n, p in _commands() for a in p._actions
              if a.option_strings and a.help not in (None, argparse.SUPPRESS)
              and a.default not in (None, False, argparse.SUPPRESS) and "default" not in a.format_usage().lower()
              and "default" not in (a.help % {"default": a.default} if "%(" in a.help else a.help).lower()]
    assert silent == []
    help_text = dict(_commands())["run"].format_help()
    assert "(default: 0.8)" in help_text or "default 0.8" in help_text   # --margin
