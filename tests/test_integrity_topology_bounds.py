"""Exploit class: a topology file with counts no machine has (a cluster of 100000 nodes, a node of a million
GPUs, a switch with a million ports). Loading it would take minutes and gigabytes; it must fail at once with one
line naming the field and the bound, and `pkb topo` / `pkb predict` must print that line (exit 2), not a
traceback. The honest twin: the same file with a real count loads, and so does every shipped topology."""
import time

import pytest

from pkb.cli.main import main
from pkbsim.timing import schema
from pkbsim.timing.schema import TopologyError
from pkbsim.timing.topology import _load, list_topologies, load_topology

CLUSTER = """schema = "pkb.topology/1"
name = "made-up-cluster"
title = "a cluster of {nodes} nodes"
kind = "cluster"
node = "{node}"
nodes = {nodes}
sources = ["a test"]

[fabric]
kind = "rail-fat-tree"
leaf_ports = {leaf_ports}
link_Gbps = 400
efficiency = 0.95
{nccl}"""

NODE = """schema = "pkb.topology/1"
name = "made-up-node"
title = "a node of {count} GPUs"
kind = "node"
sources = ["a test"]

[gpu]
model = "made-up"
arch = "sm90"
count = {count}
sms = {sms}
hbm_GB = 80
hbm_GBps = 3350
l2_MB = 50
peak_tflops = {{ bf16 = 989.4, fp32 = 67.0 }}

[host]
sockets = {sockets}
gpus_per_socket = {per_socket}
link = "PCIe Gen5 x16"
link_GBps = 64.0
link_efficiency = 0.8
p2p = true
inter_socket_GBps = 62.4

[nic]
count = {nics}
Gbps = 400
efficiency = 0.95
"""


def _cluster(tmp_path, nodes=2, node="hgx-h100", leaf_ports=64, nccl=""):
    p = tmp_path / f"c{nodes}-{leaf_ports}-{len(nccl)}.toml"
    p.write_text(CLUSTER.format(nodes=nodes, node=node, leaf_ports=leaf_ports, nccl=nccl))
    return str(p)


def _node(tmp_path, count=8, sms=132, sockets=2, nics=8):
    p = tmp_path / f"n{count}-{sms}-{sockets}-{nics}.toml"
    p.write_text(NODE.format(count=count, sms=sms, sockets=sockets, per_socket=count // sockets, nics=nics))
    return str(p)


def _refused(path, *needles):
    t0 = time.monotonic()
    with pytest.raises(TopologyError) as e:
        load_topology(path)
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg
    assert time.monotonic() - t0 < 30   # refused before anything is built (loading 100000 nodes took minutes)
    return msg


@pytest.fixture(autouse=True)
def _fresh_cache():
    _load.cache_clear()
    yield
    _load.cache_clear()


def test_a_cluster_of_100000_nodes_is_refused_naming_field_and_bound(tmp_path):
    _refused(_cluster(tmp_path, nodes=100000), "'nodes'", "100000", str(schema.MAX_NODES))


def test_its_twin_with_a_real_node_count_loads(tmp_path):
    t = load_topology(_cluster(tmp_path, nodes=16))
    assert t.nodes == 16 and t.num_gpus == 128


def test_the_largest_allowed_cluster_loads(tmp_path):
    assert load_topology(_cluster(tmp_path, nodes=schema.MAX_NODES)).nodes == schema.MAX_NODES


@pytest.mark.parametrize("kw, field", [(dict(count=1 << 20, sockets=1 << 10), "'gpu.count'"),
                                       (dict(sms=10 ** 9), "'gpu.sms'"),
                                       (dict(count=1 << 10, sockets=1 << 12), "'host.sockets'"),
                                       (dict(nics=10 ** 7), "'nic.count'")])
def test_a_node_with_a_count_no_machine_has_is_refused(tmp_path, kw, field):
    _refused(_node(tmp_path, **kw), field, "bound")


def test_its_twin_node_with_real_counts_loads(tmp_path):
    t = load_topology(_node(tmp_path, count=72, sms=148, sockets=36, nics=72))
    assert t.num_gpus == 72 and t.gpu.sms == 148


def test_nodes_times_gpus_over_the_whole_machine_bound_is_refused(tmp_path):
    node = _node(tmp_path, count=1024, sockets=2, nics=1024)
    assert load_topology(node).num_gpus == 1024          # the node alone is within bounds
    _refused(_cluster(tmp_path, nodes=1000, node=node), "1024000 GPUs", str(schema.MAX_GPUS))


def test_a_fabric_leaf_with_a_million_ports_and_a_million_nccl_channels_are_refused(tmp_path):
    _refused(_cluster(tmp_path, leaf_ports=10 ** 6), "'fabric.leaf_ports'", str(schema.MAX_PORTS))
    _refused(_cluster(tmp_path, nccl="\n[nccl]\nring_channels = 1000000\n"), "'ring_channels'",
             str(schema.MAX_CHANNELS))
    assert load_topology(_cluster(tmp_path, nccl="\n[nccl]\nring_channels = 16\n")).nccl["ring_channels"] == 16


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path):
    p = tmp_path / "huge.toml"
    p.write_text(CLUSTER.format(nodes=2, node="hgx-h100", leaf_ports=64, nccl="") + "# pad\n" * 400_000)
    _refused(str(p), "bytes")


def test_a_cluster_whose_node_is_itself_a_cluster_is_refused(tmp_path):
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text(CLUSTER.format(nodes=2, node=str(b), leaf_ports=64, nccl=""))
    b.write_text(CLUSTER.format(nodes=2, node=str(a), leaf_ports=64, nccl=""))
    _refused(str(a), "names no node topology")


@pytest.mark.parametrize("name", list_topologies())
def test_every_shipped_topology_still_loads(name):
    assert load_topology(name).num_gpus >= 1


@pytest.mark.parametrize("argv", [["topo", "show", "{path}"],
                                  ["predict", "--topology", "{path}", "--op", "all_reduce", "--bytes", "1M",
                                   "--nranks", "8"]])
def test_pkb_topo_and_predict_print_the_one_line(tmp_path, capsys, argv):
    bad, good = _cluster(tmp_path, nodes=100000), _cluster(tmp_path, nodes=2)
    assert main([a.format(path=bad) for a in argv]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "'nodes'" in err[0] and "bound" in err[0] and "Traceback" not in captured.err
    assert main([a.format(path=good) for a in argv]) == 0
