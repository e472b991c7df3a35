"""Exploit class, on the scorer: what a rank leaves at an output's place in a folder it can write. A FIFO
there once hung the scorer in `torch.load` for ever. Saved files are now opened without following links and
without blocking, must be regular files of bounded size, read against a clock: anything else is an
integrity finding naming it. The cheater (FIFOs planted over its saved outputs) ends integrity, and
pkb score returns; the honest twin (a FIFO in its own folder) is correct. Gloo, 2 ranks, in the sandbox;
the reader's own cases below with no scorer."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from hwbackend import saved

from conftest import HERE

ROOT = os.path.dirname(HERE)


def _score_in_a_process(name: str, bound_s: float) -> dict:
    """`pkb score` of a candidate in a process of its own, killed (and the test failed) past `bound_s`: a
    scorer that hangs fails the test instead of hanging it."""
    path = os.path.join(HERE, "candidates", f"{name}.py")
    cmd = [sys.executable, "-m", "pkb.cli.main", "score", path, "--task", "all_reduce", "--backend", "gloo",
           "--nproc-per-node", "2", "--launches", "1", "--batches", "1", "--calls", "2", "--timeout", "60",
           "--json"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=bound_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"pkb score of {name} did not return within {bound_s:g} s")
    return json.loads(done.stdout)


@pytest.mark.slow
def test_fifos_planted_at_the_outputs_are_named_not_waited_for():
    doc = _score_in_a_process("plant_fifo_outputs", 400)
    assert doc["status"] == "integrity" and not doc["correct"], doc
    assert any("is a FIFO" in f["message"] for f in doc["findings"]), doc["findings"]


@pytest.mark.slow
def test_the_honest_twin_with_a_fifo_elsewhere_is_correct():
    doc = _score_in_a_process("plant_fifo_outputs_honest", 400)
    assert doc["correct"] and doc["status"] in ("faster", "slower"), doc
    assert doc["findings"] == [], doc["findings"]


def _folder(tmp_path):
    return saved.open_folder(str(tmp_path))


def test_the_reader_refuses_a_fifo_a_link_and_an_oversized_file_and_reads_a_plain_one(tmp_path):
    torch.save([torch.ones(3)], tmp_path / "plain.pt")
    os.mkfifo(tmp_path / "fifo.pt")
    os.symlink(tmp_path / "plain.pt", tmp_path / "link.pt")
    (tmp_path / "big.pt").write_bytes(b"x" * 4096)
    folder = _folder(tmp_path)
    deadline = time.monotonic() + 30
    try:
        assert torch.equal(saved.load(folder, "plain.pt", 1 << 20, deadline)[0], torch.ones(3))
        with pytest.raises(saved.SavedFileProblem, match="is a FIFO"):
            saved.load(folder, "fifo.pt", 1 << 20, deadline)
        with pytest.raises(saved.SavedFileProblem, match="symbolic link"):
            saved.load(folder, "link.pt", 1 << 20, deadline)
        with pytest.raises(saved.SavedFileProblem, match="above the bound"):
            saved.load(folder, "big.pt", 1024, deadline)
        with pytest.raises(ValueError, match="could not be read"):
            saved.load(folder, "big.pt", 1 << 20, deadline)
        with pytest.raises(FileNotFoundError):
            saved.load(folder, "none.pt", 1 << 20, deadline)
    finally:
        os.close(folder)


def test_a_link_planted_in_place_of_the_output_folder_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "out")
    with pytest.raises(saved.SavedFileProblem, match="not a plain folder"):
        saved.open_folder(str(tmp_path / "out"))
