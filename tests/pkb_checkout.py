"""A small ParallelKernelBench-shaped checkout written by a test: reference/<stem>.py files (each a
solution body under torch/dist imports) and utils/input_output_tensors.py (the input builder)."""
import pathlib
import textwrap

HEAD = "import torch\nimport torch.distributed as dist\n"


def write_checkout(root: pathlib.Path, builder: str, references: dict[str, str]) -> pathlib.Path:
    (root / "reference").mkdir()
    (root / "utils").mkdir()
    (root / "utils" / "input_output_tensors.py").write_text(builder)
    for stem, body in references.items():
        (root / "reference" / f"{stem}.py").write_text(HEAD + textwrap.dedent(body))
    return root
