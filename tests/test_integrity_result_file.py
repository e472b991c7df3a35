"""Exploit class: a candidate that plants a FIFO, a link or a huge file where its process hands its result
back, so that the screen's read waits forever or reads what it should not. The trusted side reads through
the folder it opened when it made it, without following links or waiting for a writer, and only a regular
file of a bounded size. Twin: a regular result file is read whole."""
import os

import pytest
from hostile import screen

from candidate_sandbox.untrusted_file import UntrustedFile, read_regular


@pytest.fixture
def folder(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield tmp_path, fd
    os.close(fd)


def test_a_regular_file_is_read_whole(folder):
    path, fd = folder
    (path / "result.pt").write_bytes(b"x" * 3000)
    assert read_regular("result.pt", 4096, fd) == b"x" * 3000
    with pytest.raises(FileNotFoundError):
        read_regular("missing.pt", 4096, fd)


@pytest.mark.parametrize("plant", ["fifo", "link", "huge", "folder"])
def test_what_is_not_a_bounded_regular_file_is_refused_at_once(folder, tmp_path_factory, plant):
    path, fd = folder
    target = path / "result.pt"
    if plant == "fifo":
        os.mkfifo(target)
    elif plant == "link":
        secret = tmp_path_factory.mktemp("elsewhere") / "secret"
        secret.write_bytes(b"not the candidate's")
        target.symlink_to(secret)
    elif plant == "huge":
        target.write_bytes(b"x" * 4097)
    else:
        target.mkdir()
    with pytest.raises(UntrustedFile):
        read_regular("result.pt", 4096, fd)


def test_a_replaced_folder_does_not_redirect_the_read(folder, tmp_path_factory):
    path, fd = folder
    (path / "result.pt").write_bytes(b"honest")
    moved = tmp_path_factory.mktemp("moved") / "old"
    os.rename(path, moved)
    os.mkdir(path)
    (path / "result.pt").write_bytes(b"forged")
    assert read_regular("result.pt", 4096, fd) == b"honest"


def test_a_planted_fifo_ends_the_screen_with_a_verdict():
    code, res, _ = screen("plant_result_fifo.py")
    assert res["verdict"] != "pass" and code != 0
