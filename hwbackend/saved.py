"""Reading back what a rank saved, in the scorer's process. The folder is the candidate's to write, so what
lies there is untrusted: a file is opened without following a link and without blocking (a FIFO opens at
once and is then refused), must be a regular file of bounded size, and is read against a wall-clock bound
before `torch.load` (weights only) sees its bytes. Anything else is a `SavedFileProblem` naming what was found,
never a hang."""
from __future__ import annotations

import io
import os
import stat
import time

import torch

CHUNK = 8 << 20
MIN_LIMIT = 64 << 20  # bytes: the least any saved file may hold


class SavedFileProblem(Exception):
    """What lay at a saved file's place was not a file the harness could have written (a FIFO, a link, a
    device, too large, too slow to read)."""


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFLNK: "a symbolic link", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}


def open_folder(path: str) -> int:
    """A descriptor of the folder itself (not of what a link planted in its place points to)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise SavedFileProblem(f"the output folder is not a plain folder ({e.strerror})") from None


def read_bytes(folder: int, name: str, limit: int, deadline: float) -> bytes:
    """The bytes of `name` in the folder `folder` (from open_folder). FileNotFoundError where there is none."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except FileNotFoundError:
        raise
    except OSError as e:
        kind = "a symbolic link" if e.errno == 40 else e.strerror  # ELOOP: O_NOFOLLOW met a link
        raise SavedFileProblem(f"{name} is {kind}, not a file the harness wrote") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise SavedFileProblem(f"{name} is {kind}, not a file the harness wrote")
        if st.st_size > limit:
            raise SavedFileProblem(f"{name} holds {st.st_size} bytes, above the bound of {limit} for this call")
        parts, left = [], st.st_size
        while left > 0:
            if time.monotonic() > deadline:
                raise SavedFileProblem(f"{name} could not be read within the time allowed")
            chunk = os.read(fd, min(CHUNK, left))
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        if os.read(fd, 1):  # grew while read: not a file the harness wrote and left
            raise SavedFileProblem(f"{name} kept growing while it was read")
        return b"".join(parts)
    finally:
        os.close(fd)


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
