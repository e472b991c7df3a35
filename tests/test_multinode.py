"""Scoring across nodes: several "nodes" on this machine (separate `pkb score --node-rank R` processes,
each with its own torchrun launcher) meet through c10d rendezvous on 127.0.0.1 and run with gloo."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from hwbackend.rendezvous import EndpointError, Rendezvous, parse_endpoint
from pkb.cli.main import main

LOOPBACK = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _candidate(tmp_path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text("import time\nimport torch.distributed as dist\n\n\n" + body)
    return str(path)


def _start_nodes(tmp_path, candidate: str, task: str, nnodes: int, nproc: int, timeout: int = 300):
    """One `pkb score` per node, node 0 first; each node gets its own TMPDIR (so its job folders, and the
    working directories of its torchrun and ranks, are known) as a machine of its own would."""
    port = _free_port()
    common = [sys.executable, "-m", "pkb.cli.main", "score", candidate, "--task", task, "--backend", "gloo",
              "--nproc-per-node", str(nproc), "--nnodes", str(nnodes), "--rdzv-endpoint", f"{LOOPBACK}:{port}",
              "--trials", "1", "--launches", "1", "--batches", "1", "--calls", "1", "--timeout", str(timeout),
              "--json"]
    nodes = []
    for r in range(nnodes):
        tmp = tmp_path / f"node{r}"
        tmp.mkdir()
        env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=os.getcwd())
        extra = ["--node-rank", str(r)] + (["--db", str(tmp_path / "results.sqlite")] if r == 0 else [])
        nodes.append(subprocess.Popen(common + extra, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
        if r == 0:
            time.sleep(1.0)  # node 0 hosts the rendezvous; the others would wait for it anyway
    return nodes


@pytest.fixture
def started(tmp_path):
    """The node processes a test starts: whatever a failing test leaves running (nodes, and the torchrun
    launchers and ranks working in its folder) is ended at teardown."""
    nodes = []
    yield nodes
    for p in nodes:
        if p.poll() is None:
            p.kill()
            p.communicate()
    for line in _processes_in(tmp_path):
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _finish(nodes, limit: float = 600) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + limit
    outs = []
    for p in nodes:
        out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        outs.append((p.returncode, out, err))
    return outs


def _processes_in(folder) -> list[str]:
    """Processes whose working directory lies under `folder` (torchrun and ranks run in their job folder)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(str(folder)):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode()
                found.append(f"{pid}: {cmdline[:120]}")
        except OSError:
            continue
    return found


def _ranks_of(node_tmp) -> list[int]:
    """pids of the rank workers running in a node's job folders."""
    pids = []
    for line in _processes_in(node_tmp):
        if "hwbackend.worker" in line:
            pids.append(int(line.split(":")[0]))
    return pids


def test_torchrun_options_put_every_node_on_the_c10d_rendezvous():
    args = Rendezvous(LOOPBACK, 29400, 4).torchrun_args(8, "pkb-x-1-candidate", 60)
    assert "--nnodes=4" in args and "--nproc-per-node=8" in args and "--rdzv-backend=c10d" in args
    assert f"--rdzv-endpoint={LOOPBACK}:29400" in args and "--rdzv-id=pkb-x-1-candidate" in args
    assert any(a.startswith("--rdzv-conf=is_host=0") for a in args)  # node 0's scorer hosts the store
    assert f"--local-addr={LOOPBACK}" in args and Rendezvous(LOOPBACK, 1, 2).env()["GLOO_SOCKET_IFNAME"] == "lo"
    remote = Rendezvous("node0.cluster", 29400, 2)
    assert not any(a.startswith("--local-addr") for a in remote.torchrun_args(8, "r", 60)) and remote.env() == {}
    assert parse_endpoint("[::1]:29500") == ("::1", 29500)
    for bad in ("node0", "node0:", ":29400", "node0:99999"):
        with pytest.raises(EndpointError):
            parse_endpoint(bad)


@pytest.mark.parametrize("argv,needle", [
    (["--nnodes", "2"], "needs --rdzv-endpoint"),
    (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "127.0.0.1:29400"], "not in 0..1"),
    (["--node-rank", "1"], "only apply to a job over several nodes"),
    (["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1"], "is not HOST:PORT"),
])
def test_multinode_usage_errors_are_one_line(argv, needle, capsys):
    rc = main(["score", "cand.py", "--task", "all_reduce", "--backend", "gloo"] + argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err


def test_inter_node_task_must_see_its_node_layout(tmp_path, capsys):
    cand = _candidate(tmp_path, "c", "def solution(x, intra_group, inter_group):\n    return x\n")
    rc = main(["score", cand, "--task", "hierarchical_all_reduce", "--backend", "gloo", "--nproc-per-node", "8",
               "--nnodes", "2", "--rdzv-endpoint", f"{LOOPBACK}:{_free_port()}"])
    err = capsys.readouterr().err
    assert rc == 2 and "places 4 ranks on each node" in err and "--nproc-per-node 4" in err, err


@pytest.mark.slow
def test_a_node_that_never_joins_is_named(tmp_path, capsys):
    cand = _candidate(tmp_path, "c", "def solution(x):\n    out = x.clone()\n    dist.all_reduce(out)\n"
                                     "    return out\n")
    t0 = time.monotonic()
    rc = main(["score", cand, "--task", "all_reduce", "--backend", "gloo", "--nproc-per-node", "1", "--nnodes", "3",
               "--rdzv-endpoint", f"{LOOPBACK}:{_free_port()}", "--timeout", "3", "--json",
               "--db", str(tmp_path / "r.sqlite")])
    res = json.loads(capsys.readouterr().out)
    assert rc == 4 and res["status"] == "error" and time.monotonic() - t0 < 30
    assert res["findings"][0]["kind"] == "node_failure", res["findings"]
    assert "nodes 1, 2 never joined the rendezvous at 127.0.0.1" in res["findings"][0]["message"]


LAYOUT_CHECK = """import os, re


def check_layout():
    # the task's layout: rank r on node r // 4 at local rank r % 4 (a test node's ranks run in its folder)
    rank, world = dist.get_rank(), dist.get_world_size()
    nodes = [None] * world
    dist.all_gather_object(nodes, re.search(r"/node(\\d+)/", os.getcwd()).group(1))
    first = rank - rank % 4
    if int(os.environ["LOCAL_RANK"]) != rank % 4 or len(set(nodes[first:first + 4])) != 1 or len(set(nodes)) != 4:
        raise RuntimeError(f"ranks are not laid out node-major: {nodes}")


"""


@pytest.mark.slow
def test_inter_node_task_scored_across_four_nodes(tmp_path, started):
    """hierarchical_all_reduce at 16 ranks, 4 nodes of 4: a flat all-reduce over the world (another
    algorithm, same sum) must be correct on every rank, the outputs of the other nodes having travelled
    to node 0's scorer; the candidate itself checks that each node holds 4 consecutive ranks (the
    node-major layout the task and the simulator assume) and raises otherwise."""
    cand = _candidate(tmp_path, "flat", LAYOUT_CHECK + "def solution(x, intra_group, inter_group):\n"
                                        "    check_layout()\n    out = x.clone()\n    dist.all_reduce(out)\n"
                                        "    return out\n")
    started += _start_nodes(tmp_path, cand, "hierarchical_all_reduce", nnodes=4, nproc=4)
    outs = _finish(started)
    rc, out, err = outs[0]
    res = json.loads(out)
    # on a loaded 2-core machine the scorer's clock can see far more time than the calls took ("time is
    # missing", an integrity finding); anything else but correct and slower/faster is a failure
    clock_only = all("by the scorer's clock" in f["message"] for f in res["findings"])
    assert res["correct"] and (res["status"] in ("slower", "faster") or res["status"] == "integrity" and clock_only), \
        (res["status"], res["findings"], err[-2000:])
    assert sorted({t["rank"] for t in res["trials"]}) == list(range(16)) and all(t["ok"] for t in res["trials"])
    assert res["reference_ms"] > 0 and res["candidate_ms"] > 0
    for node, (rc, out, err) in enumerate(outs[1:], start=1):
        assert rc == 0 and json.loads(out) == {"node": node, "jobs": 2, "status": "served", "message": ""}, err
    import sqlite3
    rows = sqlite3.connect(tmp_path / "results.sqlite").execute("SELECT task, nproc, status FROM runs").fetchall()
    assert rows == [("hierarchical_all_reduce", 16, res["status"])]
    assert _processes_in(tmp_path) == []


@pytest.mark.slow
def test_killing_a_node_launcher_ends_the_job_naming_that_node(tmp_path, started):
    """Node 1's torchrun launcher is killed while its rank runs the candidate: the job ends "error"
    with a node_failure finding naming node 1 (not the connection errors of the other ranks), within
    the timeout, and nothing of the job is left on any node."""
    cand = _candidate(tmp_path, "slow", "def solution(x):\n    time.sleep(3)\n    out = x.clone()\n"
                                        "    dist.all_reduce(out)\n    return out\n")
    t0 = time.monotonic()
    nodes = _start_nodes(tmp_path, cand, "all_reduce", nnodes=3, nproc=1, timeout=120)
    started += nodes
    victim = None
    while victim is None and time.monotonic() - t0 < 200 and nodes[0].poll() is None:
        for pid in _ranks_of(tmp_path / "node1"):
            status_dir = os.path.join(os.readlink(f"/proc/{pid}/cwd"), "status")
            texts = [open(os.path.join(status_dir, f)).read() for f in os.listdir(status_dir)]
            if any(t.startswith("correctness trial 0") for t in texts):
                with open(f"/proc/{pid}/stat") as f:
                    victim = int(f.read().rsplit(")", 1)[1].split()[1])  # the rank's parent: torchrun
        time.sleep(0.2)
    assert victim is not None, "node 1's rank never reached the candidate"
    assert b"torch.distributed.run" in open(f"/proc/{victim}/cmdline", "rb").read()
    os.kill(victim, signal.SIGKILL)
    outs = _finish(nodes, limit=150)
    res = json.loads(outs[0][1])
    assert outs[0][0] == 4 and res["status"] == "error" and not res["correct"], res
    f = res["findings"][0]
    assert f["kind"] == "node_failure" and re.match(r"node 1 \(.+\) failed: its torchrun launcher was killed by "
                                                     r"signal SIGKILL \(rank \d ran there\)", f["message"]), f
    assert time.monotonic() - t0 < 300
    assert all(p.returncode is not None for p in nodes)
    assert _processes_in(tmp_path) == []


# `pkb slurm`: the sbatch script, checked without Slurm

FAKE_SRUN = """#!/bin/bash
# stand-in for srun: runs the step's command once per node of the step, in parallel, with SLURM_NODEID set
nodes=1
while [[ $1 == --* ]]; do [[ $1 == --nodes=* ]] && nodes=${1#--nodes=}; shift; done
echo "srun $nodes $*" >> "$SRUN_LOG"
pids=()
for ((i = 0; i < nodes; i++)); do
  mkdir -p "$NODE_TMP/node$i"
  (cd "$NODE_TMP/node$i" && SLURM_NODEID=$i TMPDIR="$NODE_TMP/node$i" exec "$@") > "$NODE_TMP/node$i.out" 2>&1 &
  pids+=($!)
  sleep 1
done
rc=0
for i in "${!pids[@]}"; do wait "${pids[$i]}"; status=$?; [[ $i == 0 ]] && rc=$status; done
exit $rc
"""


def _slurm(tmp_path, capsys, *argv):
    rc = main(["slurm", *argv, "--out", str(tmp_path / "batch.sbatch"), "--db", str(tmp_path / "r.sqlite")])
    return rc, (tmp_path / "batch.sbatch").read_text() if rc == 0 else capsys.readouterr().err


def test_slurm_script_has_one_step_per_candidate_on_every_node(tmp_path, capsys):
    cands = [_candidate(tmp_path, name, "def solution(x, intra_group, inter_group):\n    return x\n")
             for name in ("a", "b")]
    rc, script = _slurm(tmp_path, capsys, "--task", "hierarchical_all_reduce", "--nodes", "4", "--gpus-per-node", "8",
                        "--partition", "gpu", "--time", "02:00:00", "--port", "29500", *cands)
    assert rc == 0
    assert "#SBATCH --nodes=4" in script and "#SBATCH --gpus-per-node=8" in script
    assert "#SBATCH --ntasks-per-node=1" in script and "#SBATCH --partition=gpu" in script
    steps = [line for line in script.splitlines() if line.startswith("srun ")]
    assert len(steps) == 2
    for i, (step, cand) in enumerate(zip(steps, cands)):
        assert step.startswith("srun --nodes=4 --ntasks=4 --ntasks-per-node=1 ")
        assert f" score {cand} --task hierarchical_all_reduce " in step and "--nproc-per-node 8" in step
        assert f"--db {tmp_path / 'r.sqlite'} --resume" in step and "--nnodes 4" in step
        assert f'--rdzv-endpoint "$head_node:{29500 + i}"' in step
        assert """bash -c 'exec "$@" --node-rank "$SLURM_NODEID"'""" in step
    assert 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert subprocess.run(["bash", "-n", str(tmp_path / "batch.sbatch")]).returncode == 0


def test_slurm_refuses_what_cannot_run(tmp_path, capsys):
    cand = _candidate(tmp_path, "a", "def solution(x, intra_group, inter_group):\n    return x\n")
    rc, err = _slurm(tmp_path, capsys, "--task", "hierarchical_all_reduce", "--nodes", "1", "--gpus-per-node", "8",
                     cand)
    assert rc == 2 and "not 8 (1 x 8)" in err
    rc, err = _slurm(tmp_path, capsys, "--task", "hierarchical_all_reduce", "--nodes", "2", "--gpus-per-node", "8",
                     str(tmp_path / "missing.py"))
    assert rc == 2 and "missing.py' not found" in err


def test_slurm_submit_without_slurm_says_where_the_script_is(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    cand = _candidate(tmp_path, "a", "def solution(x):\n    return x\n")
    rc, err = _slurm(tmp_path, capsys, "--task", "all_reduce", "--nodes", "1", "--gpus-per-node", "2", "--submit", cand)
    assert rc == 2 and "sbatch not found" in err and "batch.sbatch" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_slurm_script_runs_with_a_stand_in_srun(tmp_path, capsys, started):
    """The script itself, run by bash with stand-ins for scontrol (the first node is 127.0.0.1) and srun
    (every node of a step is a local process working in a folder of the test's): one step scores across 2
    nodes and lands in the store; `started` ends at teardown whatever a failure leaves in that folder."""
    cand = _candidate(tmp_path, "ok", "def solution(x):\n    out = x.clone()\n    dist.all_reduce(out)\n"
                                      "    return out\n")
    rc, _ = _slurm(tmp_path, capsys, "--task", "all_reduce", "--nodes", "2", "--gpus-per-node", "1",
                   "--backend", "gloo", "--port", str(_free_port()), "--timeout", "300",
                   *[f"--score-arg={a}" for a in ("--trials=1", "--launches=1", "--batches=1", "--calls=1")], cand)
    assert rc == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho 127.0.0.1\n")
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SLURM_JOB_NODELIST="fake[0-1]",
               SRUN_LOG=str(tmp_path / "srun.log"), NODE_TMP=str(tmp_path / "nodes"), PYTHONPATH=os.getcwd())
    proc = subprocess.run(["bash", str(tmp_path / "batch.sbatch")], env=env, capture_output=True, text=True,
                          timeout=400)
    node0 = (tmp_path / "nodes" / "node0.out").read_text()
    assert proc.returncode == 0 and "0 step(s) did not end faster or slower" in proc.stdout, (proc.stdout, node0)
    assert (tmp_path / "srun.log").read_text().startswith("srun 2 bash -c")
    # one launch is 2 jobs; a score faster after it (or with a clock finding) is confirmed over one more: 4
    node1 = (tmp_path / "nodes" / "node1.out").read_text()
    assert re.search(r"node 1 of 2: ran its ranks of (2|4) job\(s\)", node1), node1
    import sqlite3
    rows = sqlite3.connect(tmp_path / "r.sqlite").execute("SELECT task, nproc, correct FROM runs").fetchall()
    assert rows == [("all_reduce", 2, 1)]
    assert _processes_in(tmp_path) == []
