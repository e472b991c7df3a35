"""Topology files: every shipped machine loads; malformed files fail with one line naming file, field, fix."""
import itertools

import pytest

from pkbsim.timing.graph import fabric_shape
from pkbsim.timing.routes import Router
from pkbsim.timing.schema import TopologyError
from pkbsim.timing.topology import TOPOLOGY_DIR, list_topologies, load_topology


def test_every_shipped_topology_loads_and_has_sources():
    names = list_topologies()
    for required in ("hgx-h100", "hgx-h200", "hgx-a100", "hgx-b200", "gb200-nvl72", "pcie-4gpu", "pcie-8gpu",
                     "h100-ib-2node", "h100-ib-16node"):
        assert required in names
    for name in names:
        t = load_topology(name)
        assert t.sources and t.gpu.sms > 0 and t.gpu.peak_tflops and t.gpu.hbm_GBps > 0 and t.gpu.l2_MB > 0


def test_machine_facts():
    h100, a100, nvl72 = load_topology("hgx-h100"), load_topology("hgx-a100"), load_topology("gb200-nvl72")
    assert h100.nvlink.port_GBps == pytest.approx(18 * 20.6)          # NCCL's 370.8 GB/s
    assert h100.nvls and not a100.nvls
    assert nvl72.num_gpus == 72 and nvl72.nvswitch.chips == 18
    assert load_topology("hgx-b200").nvlink.port_GBps == pytest.approx(721.8)


def test_cluster_generator_reaches_1024_gpus():
    t = load_topology("h100-ib-128node")
    assert t.num_gpus == 1024 and t.nodes == 128
    per_leaf, per_rail, spines, links = fabric_shape(t)
    assert (per_leaf, per_rail, spines) == (32, 4, 16)
    assert spines * links == t.fabric.leaf_ports // 2                   # non-blocking: as many up as down
    assert per_rail * t.nic.count * links <= t.fabric.leaf_ports       # every spine has the ports it needs
    assert load_topology("h100-ib-2node", nodes=4).num_gpus == 32


def test_routes_follow_the_hardware():
    r = Router(load_topology("h100-ib-2node"))
    kinds = lambda a, b: [r.kinds[i] for i in r.route(a, b)]
    assert kinds(0, 5) == ["nvlink", "nvlink"]
    assert kinds(1, 9) == ["pcie", "net", "net", "pcie"]               # same rail: one leaf
    assert kinds(1, 10).count("net") == 4                              # cross rail: through a spine
    pcie = Router(load_topology("pcie-8gpu"))
    assert any(pcie.names[i] == "cpu0" for i in pcie.route(0, 5))      # no P2P: through host memory
    for a, b in itertools.permutations(range(16), 2):
        assert r.route(a, b)


def write(tmp_path, text, name="bad.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


GOOD = (TOPOLOGY_DIR / "hgx-h100.toml").read_text()


@pytest.mark.parametrize("edit, expect", [
    (lambda s: s.replace("link_GBps = 25.0", "link_GBPS = 25.0"), "unknown field 'link_GBPS'"),
    (lambda s: s.replace("sms = 132\n", ""), "field 'gpu.sms' is missing; add e.g. `sms = 132`"),
    (lambda s: s.replace("sms = 132", 'sms = "many"'), "field 'gpu.sms' = 'many' has the wrong type"),
    (lambda s: s.replace("count = 8\nsms", "count = -8\nsms"), "must be positive"),
    (lambda s: s.replace("[5, 4, 4, 5]", "[5, 4, 4, 4]"), "sums to 17 but nvlink.links_per_gpu = 18"),
    (lambda s: s.replace("efficiency = 0.824", "efficiency = 8.24"), "above 1"),
    (lambda s: s.replace('arch = "sm90"', 'arch = "sm99"'), "is not one of"),
    (lambda s: s.replace("[nic]", "[nics]"), "unknown table [nics]"),
    (lambda s: s.replace("gpus_per_socket = 4", "gpus_per_socket = 3"), "make them agree"),
    (lambda s: s.replace("p2p = true", "p2p = false"), "needs host.host_copy_GBps"),
    (lambda s: s.replace("[host]", "[host"), "not valid TOML"),
])
def test_bad_files_are_rejected_with_the_field_and_the_fix(tmp_path, edit, expect):
    path = write(tmp_path, edit(GOOD))
    with pytest.raises(TopologyError) as e:
        load_topology(path)
    msg = str(e.value)
    assert path in msg and expect in msg and "\n" not in msg


def test_bad_names_and_clusters(tmp_path):
    with pytest.raises(TopologyError, match="unknown topology 'dgx-z9'; known: gb200-nvl72"):
        load_topology("dgx-z9")
    with pytest.raises(TopologyError, match="single machine"):
        load_topology("hgx-h100", nodes=4)
    cluster = (TOPOLOGY_DIR / "h100-ib-2node.toml").read_text().replace('node = "hgx-h100"', 'node = "nope"')
    with pytest.raises(TopologyError, match="field 'node' = 'nope' names no node topology"):
        load_topology(write(tmp_path, cluster, "c.toml"))
