"""`pkb --help` at every depth: each command and subcommand (`pkb topo list` too) has a description naming its
exit codes, each option and positional argument has help, and each that has a default states it (main.py adds
"(default: X)" to an option's help that does not; a positional's help must say it itself). Twin: a parser with
a silent option, a positional whose default goes unsaid and a command without a description is reported."""
import argparse

from pkb.cli.main import _state_defaults, build_parser


def gaps(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[str]:
    """One line per command without a description naming its exit codes, per argument without help, and per
    argument whose help does not state its default."""
    found = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, child in a.choices.items():
                if "exit" not in (child.description or "").lower():
                    found.append(f"pkb {' '.join((*path, name))}: no description naming its exit codes")
                found += gaps(child, (*path, name))
        elif not isinstance(a, argparse._HelpAction):
            arg = f"pkb {' '.join(path)} {a.option_strings[0] if a.option_strings else a.dest}"
            text = (a.help or "") % {"default": a.default} if "%(" in (a.help or "") else (a.help or "")
            if not text.strip():
                found.append(f"{arg}: no help")
            elif a.default not in (None, False, [], argparse.SUPPRESS) and "default" not in text.lower():
                found.append(f"{arg}: help does not state its default {a.default!r}")
    return found


def test_every_command_and_argument_has_help_stating_its_default():
    assert gaps(build_parser()) == []


def test_calibrate_and_leaderboard_describe_themselves():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("calibrate", "leaderboard"):
        assert len(sub.choices[name].description) > 80 and "Exit:" in sub.choices[name].description


def test_twin_silent_arguments_and_a_command_without_description_are_reported():
    parser = argparse.ArgumentParser(prog="pkb")
    sub = parser.add_subparsers()
    p = sub.add_parser("demo", help="a command")                  # no description
    p.add_argument("--quiet", action="store_true")                 # no help
    p.add_argument("--rounds", type=int, default=3, help="rounds")  # main.py states this default
    p.add_argument("mode", nargs="?", default="fast", help="how")  # a positional: nobody states it
    _state_defaults(p)
    assert gaps(parser) == ["pkb demo: no description naming its exit codes", "pkb demo --quiet: no help",
                            "pkb demo mode: help does not state its default 'fast'"]
