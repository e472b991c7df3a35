"""`pkb screen` re-runs itself inside the sandbox; the outer process only relays, so it must not load torch
(the wall-clock bound once built the whole command parser, which imports torch through some commands: 1.2 s
per screen before the sandbox started). Twin: the bound still reads --timeout."""
import subprocess
import sys

PROBE = """
import sys
import candidate_sandbox as sb
def relay(cmd, writable, readable, timeout=None, candidate_caches=False):
    print("torch" in sys.modules, timeout)
    raise SystemExit(0)
sb.run_inside = relay
from pkb.cli.main import main
main(["screen", "x.py", "--task", "all_reduce", "--world-size", "2", "--timeout", "30", "--json"])
"""


def test_the_outer_screen_relays_without_loading_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "1020.0"], out  # 900 s + 4 x 30 s
