"""`pkb calibrate`: measure GEMM, memory and collective rates and launch overheads on this node's GPUs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from pkb.errors import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="measure GEMM, HBM and collective rates and launch overheads on this node's GPUs",
                       description="Measure this node's GPUs (GEMM, HBM and collective rates, launch overheads) into a "
                                   "calibration file the timing model reads. Exit: 0 written, 2 bad usage (no GPU, "
                                   "too many GPUs asked for), 4 the measurement failed, 5 it timed out.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=None, metavar="N",
                   help="GPUs to use (default: all)")
    p.add_argument("--out", default="calibration.json", help="where to write the calibration file")
    p.add_argument("--max-bytes", type=int, default=1 << 30, help="largest collective size (default 1 GiB)")
    p.add_argument("--timeout", type=float, default=1800.0, metavar="S",
                   help="wall-clock limit of the whole measurement in seconds")
    p.add_argument("--json", action="store_true", help="print the calibration document")
    p.set_defaults(run=run)


def run(args) -> int:
    import torch
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not gpus:
        raise UsageError("pkb calibrate measures GPUs and this machine has none; run it on a GPU node")
    n = args.nproc_per_node or gpus
    if not 1 <= n <= gpus:
        raise UsageError(f"--nproc-per-node {n}: this node has {gpus} GPUs")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
           "-m", "hwbackend.calibrate", os.path.abspath(args.out), str(args.max_bytes)]
    try:
        proc = subprocess.run(cmd, check=False, timeout=args.timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        print(f"pkb calibrate: timed out after {args.timeout:g} s", file=sys.stderr)
        return 5
    if proc.returncode:
        print(f"pkb calibrate: the measurement failed (exit {proc.returncode})", file=sys.stderr)
        return 4
    with open(args.out) as f:
        doc = json.load(f)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        for name, g in doc["gemm"].items():
            print(f"GEMM {name:5s} {g['n']}^3: {g['tflops']:.0f} TFLOP/s")
        print(f"HBM copy: {doc['hbm_copy']['GBps_read_plus_write']:.0f} GB/s (read + write)")
        launch = doc["launch"]
        print(f"launch: eager {launch['eager_op_us']:.2f} us/op, CUDA graph {launch['graph_op_us']:.2f} us/op, "
              f"tiny kernel {launch['tiny_kernel_us']:.2f} us on the device")
        if "collectives" in doc:
            print(f"{len(doc['collectives'])} collective points written to {args.out}")
    return 0
