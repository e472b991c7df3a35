"""Machines as validated data: load `topologies/NAME.toml` into a Topology, expand clusters to N nodes.

A cluster file names a node file and a fabric; `h100-ib-<N>node` works for any N by reusing the
`h100-ib-*node` file as the template, so 128-node (1024-GPU) clusters need no file of their own.
"""
from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import topologies as _topologies_pkg
from pkbsim.timing.schema import (MAX_CHANNELS, MAX_FILE_BYTES, MAX_GPUS, MAX_NODES, TopologyError,
                                   check_document)

TOPOLOGY_DIR = Path(_topologies_pkg.__file__).parent


@dataclass(frozen=True)
class GpuSpec:
    model: str
    arch: str
    sms: int
    hbm_GB: float
    hbm_GBps: float
    l2_MB: float
    peak_tflops: dict
    sync_us: dict = field(default_factory=dict)   # this GPU's measured fence and flag-hop costs (device_kernel)


@dataclass(frozen=True)
class NVLinkSpec:
    generation: int
    links_per_gpu: int
    link_GBps: float
    efficiency: float

    @property
    def port_GBps(self) -> float:
        """What SM-driven payload gets per GPU per direction (links x raw rate x efficiency)."""
        return self.links_per_gpu * self.link_GBps * self.efficiency


@dataclass(frozen=True)
class NVSwitchSpec:
    generation: int
    chips: int
    ports_per_chip: int
    links_per_gpu_per_chip: tuple
    nvls: bool


@dataclass(frozen=True)
class HostSpec:
    sockets: int
    gpus_per_socket: int
    link: str
    link_GBps: float
    link_efficiency: float
    p2p: bool
    inter_socket_GBps: float
    host_copy_GBps: float | None = None


@dataclass(frozen=True)
class NicSpec:
    count: int
    Gbps: float
    efficiency: float

    @property
    def GBps(self) -> float:
        return self.Gbps / 8 * self.efficiency


@dataclass(frozen=True)
class FabricSpec:
    kind: str
    leaf_ports: int
    link_Gbps: float
    efficiency: float


@dataclass(frozen=True)
class Topology:
    name: str
    title: str
    path: str
    sources: tuple
    gpu: GpuSpec
    gpus_per_node: int
    nodes: int
    host: HostSpec
    nccl: dict                        # NCCL constants for this GPU generation, after the file's overrides
    nvlink: NVLinkSpec | None = None
    nvswitch: NVSwitchSpec | None = None
    nic: NicSpec | None = None
    fabric: FabricSpec | None = None
    node_name: str | None = None      # the node file a cluster is built from

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def nvls(self) -> bool:
        return bool(self.nvswitch and self.nvswitch.nvls and self.nccl["nvls_channels"] > 0)

    @property
    def intra_link(self) -> str:
        """The link class NCCL's latency table uses for hops inside a node."""
        return "nvlink" if self.nvlink else "pcie"

    def node_of(self, gpu: int) -> int:
        return gpu // self.gpus_per_node


def list_topologies() -> list[str]:
    return sorted(p.stem for p in TOPOLOGY_DIR.glob("*.toml"))


def load_topology(name: str, nodes: int | None = None) -> Topology:
    """Load a topology by name (or .toml path); `nodes` re-sizes a cluster. Raises TopologyError."""
    if nodes is not None and not 1 <= nodes <= MAX_NODES:
        raise TopologyError(f"{nodes} nodes: a cluster has 1 to {MAX_NODES} nodes")
    path = _find(name)
    if path is None:
        m = re.fullmatch(r"(.+)-(\d+)node", name)
        template = _cluster_template(m.group(1)) if m else None
        if template is None:
            raise TopologyError(f"unknown topology {name!r}; known: {', '.join(list_topologies())} "
                                f"(or a path to a .toml file; clusters also take NAME-<N>node)")
        if not 1 <= int(m.group(2)) <= MAX_NODES:
            raise TopologyError(f"{name!r}: a cluster has 1 to {MAX_NODES} nodes")
        path, nodes = template, nodes or int(m.group(2))
    return _load(str(path), nodes)


def _find(name: str) -> Path | None:
    p = Path(name)
    if p.suffix == ".toml":
        if not p.is_file():
            raise TopologyError(f"topology file {name!r} not found; check the path")
        return p
    p = TOPOLOGY_DIR / f"{name}.toml"
    return p if p.is_file() else None


def _cluster_template(prefix: str) -> Path | None:
    for p in sorted(TOPOLOGY_DIR.glob(f"{prefix}-*node.toml")):
        if re.fullmatch(re.escape(prefix) + r"-\d+node", p.stem):
            return p
    return None


@functools.lru_cache(maxsize=64)
def _load(path: str, nodes: int | None) -> Topology:
    doc = _read(path)
    if doc["kind"] == "node":
        if nodes not in (None, 1):
            raise TopologyError(f"{doc['name']} is a single machine; a node count applies to cluster topologies "
                                f"(e.g. h100-ib-2node)")
        return _node(doc, path)
    node = _find(doc["node"]) or None
    if node is None or Path(node).resolve() == Path(path).resolve() or _read(str(node))["kind"] != "node":
        raise TopologyError(f"{path}: field 'node' = {doc['node']!r} names no node topology; use one of "
                            f"{', '.join(list_topologies())}")
    base = _load(str(node), None)
    n = nodes or doc["nodes"]
    if n < 1:
        raise TopologyError(f"{path}: node count must be at least 1")
    name = re.sub(r"\d+node$", f"{n}node", doc["name"]) if n != doc["nodes"] else doc["name"]
    title = doc["title"] if n == doc["nodes"] else f"{n} x {base.gpu.model} nodes ({n * base.gpus_per_node} GPUs), " \
                                                   f"fabric as {doc['name']}"
    return make_cluster(base, n, FabricSpec(**doc["fabric"]), name=name, title=title, path=path,
                        sources=tuple(doc["sources"]), nccl_overrides=doc.get("nccl", {}))


def make_cluster(node: Topology, nodes: int, fabric: FabricSpec, *, name: str, title: str = "", path: str = "",
                 sources: tuple = (), nccl_overrides: dict | None = None) -> Topology:
    """N copies of `node` joined by a rail-optimised fat tree (NIC i of every node on rail i)."""
    if node.nic is None:
        raise TopologyError(f"{node.name} has no [nic] table, so it cannot be a cluster node; add one")
    if not 1 <= nodes <= MAX_NODES:
        raise TopologyError(f"{path or name}: {nodes} nodes: a cluster has 1 to {MAX_NODES} nodes")
    if nodes * node.gpus_per_node > MAX_GPUS:
        raise TopologyError(f"{path or name}: {nodes} nodes x {node.gpus_per_node} GPUs = "
                            f"{nodes * node.gpus_per_node} GPUs is above the bound of {MAX_GPUS} GPUs; use fewer nodes")
    return replace(node, name=name, title=title or name, path=path, nodes=nodes, fabric=fabric,
                   sources=node.sources + sources, node_name=node.name,
                   nccl=_merge_nccl(node.nccl, nccl_overrides or {}, path))


def _read(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise TopologyError(f"{path}: cannot be read ({e.strerror}); check the path") from None
    if len(data) > MAX_FILE_BYTES:
        raise TopologyError(f"{path}: the file is above the bound of {MAX_FILE_BYTES} bytes for a topology; "
                            f"a machine takes a few KiB")
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise TopologyError(f"{path}: not UTF-8 text; a topology file is TOML") from None
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(f"{path}: not valid TOML ({e}); fix the syntax") from None
    check_document(doc, path)
    return doc


def _node(doc: dict, path: str) -> Topology:
    g = doc["gpu"]
    gpu = GpuSpec(g["model"], g["arch"], g["sms"], g["hbm_GB"], g["hbm_GBps"], g["l2_MB"], dict(g["peak_tflops"]),
                  dict(g.get("sync_us", {})))
    nccl = _merge_nccl(nccl_constants()["arch"][g["arch"]], doc.get("nccl", {}), path)
    sw = doc.get("nvswitch")
    if sw and "nvls_efficiency" in sw:
        nccl = {**nccl, "nvls_efficiency": sw["nvls_efficiency"]}
    return Topology(
        name=doc["name"], title=doc["title"], path=path, sources=tuple(doc["sources"]), gpu=gpu,
        gpus_per_node=g["count"], nodes=1, host=HostSpec(**doc["host"]), nccl=nccl,
        nvlink=NVLinkSpec(**doc["nvlink"]) if "nvlink" in doc else None,
        nvswitch=NVSwitchSpec(sw["generation"], sw["chips"], sw["ports_per_chip"], tuple(sw["links_per_gpu_per_chip"]),
                              sw["nvls"]) if sw else None,
        nic=NicSpec(**doc["nic"]) if "nic" in doc else None)


def _merge_nccl(base: dict, overrides: dict, path: str) -> dict:
    for key, value in overrides.items():
        if key not in base:
            raise TopologyError(f"{path}: [nccl] field {key!r} is not an NCCL constant; known: {', '.join(base)}")
        if type(value) is not type(base[key]) and not (isinstance(value, (int, float)) and isinstance(base[key], float)):
            raise TopologyError(f"{path}: [nccl] field {key!r} = {value!r} must look like {base[key]!r}")
        if key.endswith("_channels") and not 0 <= value <= MAX_CHANNELS:
            raise TopologyError(f"{path}: [nccl] field {key!r} = {value!r} is outside the bound of 0 to "
                                f"{MAX_CHANNELS} channels")
    return {**base, **overrides}


@functools.lru_cache(maxsize=1)
def nccl_constants() -> dict:
    """data/nccl.toml: NCCL's latency, protocol and per-generation tables."""
    with resources.files("pkbsim.timing").joinpath("data/nccl.toml").open("rb") as f:
        return tomllib.load(f)
