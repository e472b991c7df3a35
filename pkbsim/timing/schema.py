"""The topology file format, checked field by field so a bad file fails with one line naming the fix.

Every table lists its fields with type, bounds and an example; unknown fields are errors too, because a typo
such as `link_GBPS` would otherwise silently fall back to nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class TopologyError(ValueError):
    """A topology file or name that cannot be used; the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Field:
    kind: str                 # "str", "int", "num", "bool", "str_list", "int_list", "num_table"
    example: str
    required: bool = True
    positive: bool = False    # > 0 (numbers, list items, table values)
    choices: tuple = ()
    maximum: int | None = None  # counts only: an upper bound far above any real machine (numbers, list items)


# Bounds on counts. A real machine is far below each (the largest shipped: gb200-nvl72's 72 GPUs in a node,
# h100-ib-1024node's 8192 GPUs); a file beyond one is a typo or an attack on the loader's time and memory,
# refused with one line naming the field and the bound.
MAX_NODES = 1024              # nodes of a cluster (file, --nodes or NAME-<N>node)
MAX_GPUS_PER_NODE = 1024      # gpu.count, host.sockets, host.gpus_per_socket, nic.count
MAX_GPUS = 32768              # nodes x GPUs per node, the whole machine
MAX_LINKS = 256               # NVLink links per GPU (18 on H100/B200), per switch chip entry
MAX_CHIPS = 1024              # NVSwitch chips in a node (18 on NVL72); also the longest list a field takes
MAX_PORTS = 4096              # ports of one switch chip or fabric leaf (72, 64 shipped)
MAX_SMS = 4096                # SMs per GPU (148 on B200)
MAX_GENERATION = 100
MAX_CHANNELS = 1024           # an [nccl] *_channels override (NCCL's own MAXCHANNELS is 64)
MAX_FILE_BYTES = 1 << 20      # a topology file (the shipped ones are under 4 KiB)


TOP = {
    "schema": Field("str", '"pkb.topology/1"', choices=("pkb.topology/1",)),
    "name": Field("str", '"hgx-h100"'),
    "title": Field("str", '"NVIDIA HGX H100, 8 GPUs"'),
    "kind": Field("str", '"node"', choices=("node", "cluster")),
    "sources": Field("str_list", '["docs/sources.md#hardware ..."]'),
    "node": Field("str", '"hgx-h100"', required=False),
    "nodes": Field("int", "2", required=False, positive=True, maximum=MAX_NODES),
}
GPU = {
    "model": Field("str", '"H100 SXM5 80GB"'),
    "arch": Field("str", '"sm90"', choices=("sm80", "sm90", "sm100", "sm120")),
    "count": Field("int", "8", positive=True, maximum=MAX_GPUS_PER_NODE),
    "sms": Field("int", "132", positive=True, maximum=MAX_SMS),
    "hbm_GB": Field("num", "80", positive=True),
    "hbm_GBps": Field("num", "3350", positive=True),
    "l2_MB": Field("num", "50", positive=True),
    "peak_tflops": Field("num_table", "{ bf16 = 989.4, fp32 = 67.0 }", positive=True),
    "sync_us": Field("num_table", "{ sys_fence = 0.504, gpu_fence = 0.230, flag_hop = 0.2128 }", required=False,
                     positive=True),
}
NVLINK = {
    "generation": Field("int", "4", positive=True, maximum=MAX_GENERATION),
    "links_per_gpu": Field("int", "18", positive=True, maximum=MAX_LINKS),
    "link_GBps": Field("num", "25.0", positive=True),
    "efficiency": Field("num", "0.824", positive=True),
}
NVSWITCH = {
    "generation": Field("int", "3", positive=True, maximum=MAX_GENERATION),
    "chips": Field("int", "4", positive=True, maximum=MAX_CHIPS),
    "ports_per_chip": Field("int", "64", positive=True, maximum=MAX_PORTS),
    "links_per_gpu_per_chip": Field("int_list", "[5, 4, 4, 5]", positive=True,
                                    maximum=MAX_LINKS),
    "nvls": Field("bool", "true"),
    "nvls_efficiency": Field("num", "0.85", required=False, positive=True),
}
HOST = {
    "sockets": Field("int", "2", positive=True, maximum=MAX_GPUS_PER_NODE),
    "gpus_per_socket": Field("int", "4", positive=True, maximum=MAX_GPUS_PER_NODE),
    "link": Field("str", '"PCIe Gen5 x16"'),
    "link_GBps": Field("num", "64.0", positive=True),
    "link_efficiency": Field("num", "0.8", positive=True),
    "p2p": Field("bool", "true"),
    "host_copy_GBps": Field("num", "140.0", required=False, positive=True),
    "inter_socket_GBps": Field("num", "62.4", positive=True),
}
NIC = {
    "count": Field("int", "8", positive=True, maximum=MAX_GPUS_PER_NODE),
    "Gbps": Field("num", "400", positive=True),
    "efficiency": Field("num", "0.95", positive=True),
}
FABRIC = {
    "kind": Field("str", '"rail-fat-tree"', choices=("rail-fat-tree",)),
    "leaf_ports": Field("int", "64", positive=True, maximum=MAX_PORTS),
    "link_Gbps": Field("num", "400", positive=True),
    "efficiency": Field("num", "0.95", positive=True),
}
NODE_TABLES = {"gpu": (GPU, True), "nvlink": (NVLINK, False), "nvswitch": (NVSWITCH, False),
               "host": (HOST, True), "nic": (NIC, False), "nccl": (None, False)}
CLUSTER_TABLES = {"fabric": (FABRIC, True), "nccl": (None, False)}


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _type_ok(f: Field, v: Any) -> bool:
    if f.kind == "str":
        return isinstance(v, str) and v != ""
    if f.kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if f.kind == "num":
        return _is_num(v)
    if f.kind == "bool":
        return isinstance(v, bool)
    if f.kind == "str_list":
        return isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) and x for x in v)
    if f.kind == "int_list":
        return isinstance(v, list) and len(v) > 0 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    if f.kind == "num_table":
        return isinstance(v, dict) and len(v) > 0 and all(_is_num(x) for x in v.values())
    raise AssertionError(f.kind)


def _short(v: Any) -> str:
    """A value for a one-line message: a long list is cut."""
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _values(f: Field, v: Any) -> list:
    return list(v.values()) if f.kind == "num_table" else v if f.kind.endswith("_list") else [v]


def check_table(table: Any, spec: dict[str, Field], file: str, where: str) -> dict:
    """Validate one TOML table against its spec; raise TopologyError naming file, field and fix."""
    label = f"[{where}]" if where else "top level"
    if not isinstance(table, dict):
        raise TopologyError(f"{file}: {label} must be a table; write it as [{where}] with key = value lines")
    for key in table:
        if key not in spec:
            raise TopologyError(f"{file}: {label}: unknown field {key!r}; known fields: {', '.join(spec)}")
    for key, f in spec.items():
        name = f"{where}.{key}" if where else key
        if key not in table:
            if f.required:
                raise TopologyError(f"{file}: field {name!r} is missing; add e.g. `{key} = {f.example}`")
            continue
        v = table[key]
        if isinstance(v, (list, dict)) and len(v) > MAX_CHIPS:
            raise TopologyError(f"{file}: field {name!r} has {len(v)} entries, above the bound of {MAX_CHIPS}")
        if not _type_ok(f, v):
            raise TopologyError(f"{file}: field {name!r} = {v!r} has the wrong type; write e.g. `{key} = {f.example}`")
        if f.choices and v not in f.choices:
            raise TopologyError(f"{file}: field {name!r} = {v!r} is not one of {', '.join(map(repr, f.choices))}")
        if f.positive and any(x <= 0 for x in _values(f, v)):
            raise TopologyError(f"{file}: field {name!r} = {v!r} must be positive; write e.g. `{key} = {f.example}`")
        if f.maximum is not None and any(x > f.maximum for x in _values(f, v)):
            raise TopologyError(f"{file}: field {name!r} = {_short(v)} is above the bound of {f.maximum}; no real "
                                f"machine comes near it, write e.g. `{key} = {f.example}`")
    return table


def check_document(doc: dict, file: str) -> None:
    """Validate a whole file: top-level fields, then each table for its kind, then cross-field rules."""
    check_table({k: v for k, v in doc.items() if not isinstance(v, dict)}, TOP, file, "")
    tables = NODE_TABLES if doc["kind"] == "node" else CLUSTER_TABLES
    for key, value in doc.items():
        if isinstance(value, dict) and key not in tables:
            raise TopologyError(f"{file}: unknown table [{key}]; a {doc['kind']} file has {', '.join(tables)}")
    for key, (spec, required) in tables.items():
        if key not in doc:
            if required:
                raise TopologyError(f"{file}: table [{key}] is missing; add it (see topologies/hgx-h100.toml)")
        elif spec is not None:
            check_table(doc[key], spec, file, key)
    if doc["kind"] == "cluster":
        for key in ("node", "nodes"):
            if key not in doc:
                raise TopologyError(f"{file}: a cluster needs field {key!r}; add e.g. `{key} = {TOP[key].example}`")
    else:
        _check_node_rules(doc, file)


def _check_node_rules(doc: dict, file: str) -> None:
    gpu, host = doc["gpu"], doc["host"]
    if host["sockets"] * host["gpus_per_socket"] != gpu["count"]:
        raise TopologyError(f"{file}: host.sockets x host.gpus_per_socket = {host['sockets'] * host['gpus_per_socket']} "
                            f"but gpu.count = {gpu['count']}; make them agree")
    if not host["p2p"] and "host_copy_GBps" not in host:
        raise TopologyError(f"{file}: host.p2p = false needs host.host_copy_GBps (the socket's copy bandwidth that "
                            f"GPU-to-GPU traffic shares); add e.g. `host_copy_GBps = 140.0`")
    for sect, key in (("nvlink", "efficiency"), ("nic", "efficiency"), ("host", "link_efficiency"),
                      ("nvswitch", "nvls_efficiency")):
        v = doc.get(sect, {}).get(key)
        if v is not None and v > 1:
            raise TopologyError(f"{file}: field '{sect}.{key}' = {v} is above 1; it is the fraction of raw bandwidth "
                                f"that payload gets, e.g. 0.8")
    if ("nvswitch" in doc) != ("nvlink" in doc):
        raise TopologyError(f"{file}: [nvswitch] and [nvlink] go together; add the missing one or remove both")
    if "nvswitch" in doc:
        sw, links = doc["nvswitch"], doc["nvlink"]["links_per_gpu"]
        split = sw["links_per_gpu_per_chip"]
        if len(split) != sw["chips"]:
            raise TopologyError(f"{file}: nvswitch.links_per_gpu_per_chip has {len(split)} entries but nvswitch.chips "
                                f"= {sw['chips']}; give one entry per chip")
        if sum(split) != links:
            raise TopologyError(f"{file}: nvswitch.links_per_gpu_per_chip sums to {sum(split)} but nvlink.links_per_gpu "
                                f"= {links}; every GPU link must land on a switch chip")
        busiest = max(split) * gpu["count"]
        if busiest > sw["ports_per_chip"]:
            raise TopologyError(f"{file}: a switch chip needs {busiest} ports ({max(split)} links x {gpu['count']} "
                                f"GPUs) but nvswitch.ports_per_chip = {sw['ports_per_chip']}; fix the split or the count")
