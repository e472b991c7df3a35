"""Exploit class: sizes and counts without a bound. A rank count no CPU can hold, a cluster of 0 nodes, and
a program that prints 100 MB per call: each gets a one-line error or a bounded buffer, not a machine out of
memory or a silent default. Each has an ordinary twin that goes through."""
import io

import pytest

from pkb.cli.main import main
from pkbsim.timing.schema import TopologyError
from pkbsim.timing.topology import load_topology
from pkbsim.standins import environ
from pkbsim.world.launcher import RunOptions, run_ranks


def test_a_rank_count_no_cpu_can_hold_is_one_line(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.barrier()\n")
    assert main(["check", "--nproc-per-node", "100000", str(script)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "100000 ranks" in err[0] and "at most" in err[0]
    assert main(["check", "--nproc-per-node", "2", str(script)]) == 0


@pytest.mark.parametrize("name, nodes", [("h100-ib-0node", None), ("h100-ib-2node", 0), ("h100-ib-2node", -3)])
def test_a_cluster_of_no_nodes_is_refused(name, nodes):
    with pytest.raises(TopologyError, match="1 to"):
        load_topology(name, nodes)


def test_a_cluster_of_nodes_loads():
    assert load_topology("h100-ib-2node").num_gpus == 16 and load_topology("h100-ib-2node", 3).num_gpus == 24


@pytest.mark.parametrize("mb, newlines", [(20, True), (20, False)])
def test_a_program_printing_megabytes_is_kept_to_the_limit(monkeypatch, mb, newlines):
    monkeypatch.setattr(environ, "OUTPUT_LIMIT", 1 << 20)
    chunk = ("x" * 1023 + "\n") if newlines else "x" * 1024

    def body(ctx):
        for _ in range(mb * 1024 // 2):
            print(chunk, end="")

    out = io.StringIO()
    assert run_ranks(body, RunOptions(nproc=2, output=out)).verdict == "ok"
    text = out.getvalue()
    assert (1 << 20) <= len(text) <= (1 << 20) + 200 and text.rstrip().endswith("is dropped")


def test_a_program_printing_little_keeps_it_all():
    out = io.StringIO()
    assert run_ranks(lambda ctx: print("hello"), RunOptions(nproc=2, output=out)).verdict == "ok"
    assert sorted(out.getvalue().splitlines()) == ["[rank 0] hello", "[rank 1] hello"]
