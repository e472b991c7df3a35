"""What a finished kernel launch leaves behind, whichever interpreter ran it: a compute record with its
bytes (per peer for the cost model) and, if a program/block waited for a later one, a co-residency
finding."""
from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.world.findings import Finding


@dataclass
class Traffic:
    """Bytes a launch moved: all of it, and the part that crossed to each peer."""
    bytes_read: int = 0
    bytes_written: int = 0
    peer_read: dict[int, int] = field(default_factory=dict)
    peer_write: dict[int, int] = field(default_factory=dict)


def report_launch(ctx, name: str, site: str, units: int, unit: str, traffic: Traffic, co_resident: list[str],
                  kernel: str) -> None:
    if co_resident:
        ctx.world.add_finding(Finding(
            "co_residency", f"{name} launched at {site} relies on co-residency: a {unit} waits for a later "
            f"{unit} of the same launch, which a GPU runs only if every {unit} is resident at once (use one "
            f"{unit} per rank's work, a cooperative launch, or split the kernel)", [ctx.rank], [site],
            co_resident[:4]))
    fields = {"flops": 0, "bytes_read": traffic.bytes_read, "bytes_written": traffic.bytes_written, "kernel": kernel,
              "programs": units}
    if traffic.peer_read or traffic.peer_write:
        fields["peer_bytes"] = {"read": dict(traffic.peer_read), "write": dict(traffic.peer_write)}
    ctx.trace.record("compute", name, site, stream=ctx.stream_id, **fields)
