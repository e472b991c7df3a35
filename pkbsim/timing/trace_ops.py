"""A recorded trace (pkb.trace/1, from `pkb check --trace`) as replay actions: which ops are kernels on which
stream, how a torch collective maps onto an nccl-tests collective and size, and what is only approximated."""
from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.timing.compute import HOST_SYNC, NO_KERNEL
from pkbsim.timing.fused_matmul import FUSED

# torch collective -> (nccl-tests op, factor from the trace's `bytes` (the input tensor) to the nccl-tests size:
# a number, or "n" for the group size)
COLLECTIVES = {
    "all_reduce": ("all_reduce", 1), "all_reduce_coalesced": ("all_reduce", 1),
    "all_gather": ("all_gather", "n"), "all_gather_into_tensor": ("all_gather", "n"),
    "all_gather_into_tensor_coalesced": ("all_gather", "n"),
    "reduce_scatter": ("reduce_scatter", "n"), "reduce_scatter_tensor": ("reduce_scatter", 1),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter", 1),
    "all_to_all_single": ("all_to_all", 1), "all_to_all": ("all_to_all", 1),
    "broadcast": ("broadcast", 1), "reduce": ("reduce", 1),
}
# torch ops that reduce or broadcast in place: on one rank they move nothing (an H200 launches no kernel for
# a 1-rank all_reduce of 256 MiB: benchmarks/results/single_gpu_model_check_h200.json)
IN_PLACE = frozenset({"all_reduce", "all_reduce_coalesced", "broadcast", "reduce", "two_shot_all_reduce_",
                      "multimem_all_reduce_"})
APPROXIMATE = {  # modelled by a collective with the same bottleneck traffic; listed in the replay's notes
    "gather": ("all_gather", "n"), "scatter": ("all_gather", "n"),
}
# symmetric-memory ops -> (op, factor, algorithm: a peer-memory kernel, or None for NCCL's choice, protocol:
# torch's one-shot is plain peer loads between two barriers, "Simple", not NCCL's LL one-shot)
SYMM = {
    "one_shot_all_reduce": ("all_reduce", 1, "one_shot", "Simple"),
    "two_shot_all_reduce_": ("all_reduce", 1, "two_shot", None),
    "multimem_all_reduce_": ("all_reduce", 1, "nvls_custom", None),
    "fused_all_gather_matmul": ("all_gather", "n", None, None),
    "fused_matmul_reduce_scatter": ("reduce_scatter", 1, None, None),
}
BARRIER_BYTES = 4   # NCCL implements barrier as an all_reduce of one element


@dataclass(frozen=True)
class Collective:
    """What a collective action runs: the nccl-tests op, its size, the group, and the kernel where it is not
    NCCL's choice (a peer-memory algorithm, and its protocol where the algorithm has two)."""
    op: str
    size: int
    group: tuple
    algo: str | None = None
    proto: str | None = None


@dataclass
class Action:
    kind: str                 # compute | collective | p2p | signal_put | signal_wait | record | wait_event |
    #                           wait_stream | sync | host_sync
    op: dict                  # the trace record
    stream: int
    name: str
    coll: Collective | None = None  # for collectives
    p2p: list = field(default_factory=list)   # the ops of one p2p kernel (a batch is one kernel)
    matmul: dict | None = None  # a fused GEMM's compute record, overlapping this collective (fused_matmul.py)


class TraceError(ValueError):
    """A trace this replay cannot read; the message says what is wrong and how to get a good one."""


def check_doc(doc) -> None:
    if not isinstance(doc, dict) or doc.get("schema") != "pkb.trace/1":
        raise TraceError("not a pkb.trace/1 document; write one with `pkb check --trace FILE SCRIPT`")
    ranks = doc.get("ranks")
    if not isinstance(ranks, list) or not all(isinstance(r, dict) and isinstance(r.get("ops"), list) for r in ranks):
        raise TraceError("the trace has no per-rank op lists ('ranks': [{'rank', 'ops'}]); re-record it")
    for r in ranks:
        for op in r["ops"]:
            if not isinstance(op, dict) or "kind" not in op or "op" not in op:
                raise TraceError(f"rank {r.get('rank')}: an op without 'kind'/'op' ({str(op)[:80]}); re-record it")


def actions(ops: list[dict], notes: set[str]) -> list[Action]:
    """One rank's ops in issue order as actions; approximations go into `notes`."""
    out: list[Action] = []
    for op in ops:
        kind, name, stream = op["kind"], op["op"], int(op.get("stream", 0))
        if kind == "compute":
            if name in NO_KERNEL:
                continue
            out.append(Action("compute", op, stream, name))
            if name in HOST_SYNC:
                out.append(Action("host_sync", op, stream, name))
        elif kind == "collective":
            out.append(Action("collective", op, stream, name, coll=_collective(op, notes)))
        elif kind == "p2p":
            last = out[-1] if out else None
            if op.get("batched") and last is not None and last.kind == "p2p" and last.stream == stream \
                    and last.p2p[-1].get("batched"):
                last.p2p.append(op)
            else:
                out.append(Action("p2p", op, stream, "p2p", p2p=[op]))
        elif kind == "symm":
            if name == "put_signal":
                out.append(Action("signal_put", op, stream, name))
            elif name == "wait_signal":
                out.append(Action("signal_wait", op, stream, name))
            elif name in SYMM:
                coll, factor, algo, proto = SYMM[name]
                out.append(Action("collective", op, stream, name, coll=_sized(op, coll, factor, algo, proto)))
                if name in FUSED:
                    notes.add(f"{name}: its GEMM overlaps its {coll} chunk by chunk, as PyTorch's pipeline runs "
                              f"them: max(GEMM, one chunk's GEMM + communication)")
            elif op.get("group_ranks"):
                notes.add(f"symm op {name}: not modelled (no time)")
        elif kind == "device" and name == "untimed_kernel":
            notes.add(f"device kernel {op.get('kernel')} at {op.get('site')}: not timed (a shape run has no data to "
                      f"run it on)")
        elif kind == "stream":
            if name == "event_record":
                out.append(Action("record", op, stream, name))
            elif name == "wait_event":
                out.append(Action("wait_event", op, stream, name))
            elif name == "wait_stream":
                out.append(Action("wait_stream", op, stream, name))
            elif name in ("device_synchronize", "synchronize", "stream_synchronize"):
                out.append(Action("sync", op, stream, name))
    return _fuse_matmuls(out)


def _fuse_matmuls(acts: list[Action]) -> list[Action]:
    """A fused GEMM's compute record joins its collective, next to it on the same stream (a shape run records
    the GEMM first, a screen-size run the collective first), so the replay can overlap the two."""
    out: list[Action] = []
    for a in acts:
        prev = out[-1] if out else None
        pair = prev is not None and a.name in FUSED and prev.name == a.name and prev.stream == a.stream and \
            {prev.kind, a.kind} == {"compute", "collective"} and (prev.matmul is None and a.matmul is None)
        if not pair:
            out.append(a)
            continue
        coll, mm = (prev, a) if prev.kind == "collective" else (a, prev)
        coll.matmul = mm.op
        out[-1] = coll
    return out


def _collective(op: dict, notes: set[str]) -> Collective:
    name = op["op"]
    if name == "barrier":
        return Collective("all_reduce", BARRIER_BYTES, tuple(op.get("group_ranks") or ()))
    if name in COLLECTIVES:
        coll, factor = COLLECTIVES[name]
    elif name in APPROXIMATE:
        coll, factor = APPROXIMATE[name]
        notes.add(f"{name}: approximated by {coll} (same per-GPU traffic at the root)")
    else:
        coll, factor = "all_reduce", 1
        notes.add(f"unknown collective {name}: modelled as all_reduce of its bytes")
    return _sized(op, coll, factor, None)


def _sized(op: dict, coll: str, factor, algo: str | None, proto: str | None = None) -> Collective:
    group = tuple(op.get("group_ranks") or ())
    if not group:
        raise TraceError(f"{op['op']} at {op.get('site')} has no group_ranks; re-record with the current pkb")
    n = len(group) if factor == "n" else factor
    return Collective(coll, int(op.get("bytes", 0)) * n, group, algo, proto)
