"""Device printf goes to stdout, formatted per thread in thread order."""
import torch


def test_printf_formats_each_thread(elementwise, capsys):
    x = torch.tensor([1.5, -2.25, 3.125, 0.0])
    elementwise.launch("printf_formats", 1, 32, (x, -(1 << 40)))
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"t={i} x={v:.3f} u=4000000000 big={-(1 << 40)} s=ok c={chr(65 + i)}%" for i, v in enumerate([1.5, -2.25, 3.125])
    ]
