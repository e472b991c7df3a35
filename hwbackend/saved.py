"""Reading back what a rank saved, in the scorer's process. The folder is the candidate's to write, so what
lies there is untrusted: a file is opened without following a link and without blocking (a FIFO opens at
once and is then refused), must be a regular file of bounded size, and is read against a wall-clock bound
before `torch.load` (weights only) sees its bytes. Anything else is a `SavedFileProblem` naming what was found,
never a hang."""
from __future__ import annotations

import io

import torch

from candidate_sandbox import untrusted_file

MIN_LIMIT = 64 << 20  # bytes: the least any saved file may hold


class SavedFileProblem(Exception):
    """What lay at a saved file's place was not a file the harness could have written (a FIFO, a link, a
    device, too large, too slow to read)."""


def open_folder(path: str) -> int:
    """A descriptor of the folder itself (not of what a link planted in its place points to)."""
    try:
        return untrusted_file.open_folder(path)
    except OSError as e:
        raise SavedFileProblem(f"the output folder is not a plain folder ({e.strerror})") from None


def read_bytes(folder: int, name: str, limit: int, deadline: float) -> bytes:
    """The bytes of `name` in the folder `folder` (from open_folder). FileNotFoundError where there is none."""
    try:
        return untrusted_file.read_regular(name, limit, folder, deadline)
    except untrusted_file.UntrustedFile as e:
        tail = {"type": ", not a file the harness wrote", "size": " for this call"}.get(e.problem, "")
        raise SavedFileProblem(f"{e}{tail}") from None


def load(folder: int, name: str, limit: int, deadline: float):
    """The object saved as `name` (weights only). FileNotFoundError where there is none; SavedFileProblem for
    what is not a regular file of bounded size; ValueError for bytes torch cannot read."""
    return parse(read_bytes(folder, name, limit, deadline), name)


def parse(data: bytes, name: str):
    """`torch.load` (weights only) of bytes read by read_bytes; ValueError when torch cannot read them."""
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable content
        raise ValueError(f"{name} could not be read: {type(e).__name__}: {str(e)[:200]}") from None


def limit_for(reference_sizes: list[int]) -> int:
    """The bound on a candidate's saved file: four times the reference's largest (a trial's file holds the
    inputs beside the outputs), and at least MIN_LIMIT."""
    return max(MIN_LIMIT, 4 * max(reference_sizes, default=0))
