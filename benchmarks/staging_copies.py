"""What vLLM's symmetric-memory all-reduce adds around the kernel: a copy into the symmetric buffer and a
copy out, replayed from a CUDA graph as vllm's benchmark_device_communicators.py replays them (10 calls
per graph, the same three buffers every call, so small sizes stay in L2).

Run on one GPU: `python benchmarks/staging_copies.py [OUT.json]`. Prints, per size, the measured time of
the two copies per call next to what pkb's fidelity harness `vllm-symm-mem` charges for them."""
from __future__ import annotations

import json
import sys
import time

import torch

CALLS_PER_GRAPH = 10
SIZES_MIB = (0.5, 1, 2, 4, 8, 16, 32, 64, 128)


def staged_copies_us(nbytes: int, replays: int = 50) -> float:
    n = nbytes // 2
    inp, buf, out = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            buf.copy_(inp)
            out.copy_(buf)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(CALLS_PER_GRAPH):
                buf.copy_(inp)
                out.copy_(buf)
    torch.cuda.synchronize()
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / replays / CALLS_PER_GRAPH * 1e6


def main() -> int:
    rows = [{"MiB": s, "measured_us": staged_copies_us(int(s * (1 << 20)))} for s in SIZES_MIB]
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "calls_per_graph": CALLS_PER_GRAPH,
           "rows": rows}
    try:
        from pkbsim.timing.fidelity import harness_us
        from pkbsim.timing.host_model import host_model
        from pkbsim.timing.topology import load_topology
        name = "hgx-h200" if "H200" in doc["gpu"] else "hgx-h100"
        topo, model = load_topology(name), host_model()
        for r in rows:
            b = int(r["MiB"] * (1 << 20))
            r["model_us"] = harness_us(topo, model, "vllm-symm-mem", b) - harness_us(topo, model, "cuda-graph", b)
        doc["model_topology"] = name
    except ImportError:   # the GPU machine may lack the simulator's dependencies: measure only
        pass
    for r in rows:
        print(f"{r['MiB']:>6} MiB  measured {r['measured_us']:8.2f} us" +
              (f"  model {r['model_us']:8.2f} us" if "model_us" in r else ""))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
