"""Reading a file from a place a candidate can write, without letting it stall or mislead the reader.

Whatever lies there may be a FIFO (an open that waits for a writer forever), a link to a file the candidate
may not read, a device, or a file too large for memory. So a file is opened without following a link and
without blocking, must be a regular file, is refused above a size bound, and may be read against a clock.
Every trusted reader of such places (the screen's result, the scorer's saved outputs, the report's
timelines, a node agent's outgoing files) goes through here.
"""
from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

CHUNK = 8 << 20
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFLNK: "a symbolic link", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}


@dataclass(eq=False)
class UntrustedFile(Exception):
    """What lay there is not a bounded regular file read in time. `problem`: "type" (`what` names what it
    is), "size" (`size` bytes over `limit`), "time" or "growth" (it grew while read)."""
    name: str
    problem: str
    what: str = ""
    size: int = 0
    limit: int = 0

    def __str__(self) -> str:
        return {"type": f"{self.name} is {self.what}", "size": f"{self.name} holds {self.size} bytes, above the "
                f"bound of {self.limit}", "time": f"{self.name} could not be read within the time allowed",
                "growth": f"{self.name} kept growing while it was read"}[self.problem]


def open_folder(path: str) -> int:
    """A descriptor of the folder itself, not of what a link planted in its place points to (OSError else):
    reads through it are not redirected by a folder renamed or replaced afterwards."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def open_regular(name: str, dir_fd: int | None = None) -> int:
    """A descriptor of the regular file `name` (in the folder `dir_fd` if given), opened without following a
    link or waiting for a writer. FileNotFoundError where there is none; UntrustedFile for anything else."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as e:
        what = "a symbolic link" if e.errno == 40 else (e.strerror or str(e))  # ELOOP: O_NOFOLLOW met a link
        raise UntrustedFile(name, "type", what) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UntrustedFile(name, "type", _KINDS.get(stat.S_IFMT(mode), "not a regular file"))
    return fd


def read_regular(name: str, limit: int, dir_fd: int | None = None, deadline: float | None = None) -> bytes:
    """The bytes of the regular file `name` (open_regular), at most `limit` of them, read before the
    time.monotonic() `deadline` if one is given."""
    fd = open_regular(name, dir_fd)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UntrustedFile(name, "size", size=size, limit=limit)
        parts, left = [], size
        while left > 0:
            if deadline is not None and time.monotonic() > deadline:
                raise UntrustedFile(name, "time")
            chunk = os.read(fd, min(CHUNK, left))
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        if os.read(fd, 1):
            raise UntrustedFile(name, "growth")
        return b"".join(parts)
    finally:
        os.close(fd)
