"""The batch's table (`pkb run`, `pkb report`) takes the terminal's width: on 80 columns no line of it is
longer (it was drawn 160 wide, so every row wrapped), and a wider terminal gets a wider table. Long task and
file names and long reasons fold inside their cells; a reason is cut at a word with an ellipsis."""
import pytest

from pkb.cli._table import print_table
from pkbsim.screen.result import Prediction, Reason, ScreenResult, Stage, Verdict

LONG = ("rank 3 waits in all_reduce at a_rather_long_candidate_name.py:41 while rank 5 waits in barrier at "
        "a_rather_long_candidate_name.py:57; the ranks issue their collectives in different orders")


def _rows() -> list[ScreenResult]:
    passed = ScreenResult("allreduce_residual_rmsnorm", "/x/allreduce_residual_rmsnorm__fused_variant.py", 8,
                          "hgx-h100", 0, stage=Stage.COST,
                          predicted=Prediction(100.0, 80.0, 1.25, "latency/launch-bound", True))
    rejected = ScreenResult("gemm_reduce_scatter_row_parallel", "/x/gemm_reduce_scatter_row_parallel__bad.py", 8,
                            "hgx-h100", 0).reject(Stage.FUNCTIONAL, [Reason("deadlock", LONG)])
    return [passed, rejected]


def _table(capsys, monkeypatch, columns: int) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    print_table(_rows(), {})
    lines = capsys.readouterr().out.splitlines()
    return lines[:-1]  # the last line is the tally, plain text the terminal wraps


@pytest.mark.parametrize("columns", [80, 100])
def test_the_table_fits_the_terminal(capsys, monkeypatch, columns):
    table = _table(capsys, monkeypatch, columns)
    assert max(len(line) for line in table) <= columns
    assert any("reject" in line for line in table) and any("…" in line for line in table)  # cut, then folded


def test_twin_a_wide_terminal_gets_a_wide_table(capsys, monkeypatch):
    table = _table(capsys, monkeypatch, 240)
    assert max(len(line) for line in table) > 160
    assert any(Verdict.REJECT.value in line and "deadlock: rank 3 waits in all_reduce" in line for line in table)
