"""GPU-side facts that settle two screen/GPU disagreements of docs/pkb_agreement.md (run on a GPU node).

    python benchmarks/pkb_disagreement_probe.py --pkb-root CHECKOUT --cand-61 FILE --out OUT.json

1. Sort and top-k tie order. PKB's GNN negative-scoring reference ranks with an unstable `torch.sort` of bf16
   sigmoids, its DINOv2 k-NN reference picks labels with `topk` of bf16 similarities; a candidate agrees
   only where ties come out in the order the GPU gives them. For rows of several widths, the fraction of
   rows whose default sort equals the stable sort, and whose topk lists ties in index (or reverse) order,
   on this GPU and on this machine's CPU.
2. Which side of the distributed irfft disagreement is nearer the exact result: the reference (cuFFT), the
   candidate, and the reference on the CPU in float32 (what the screen compares against), each against the
   reference computed in float64 on the CPU, counted as PKB counts mismatches (|a-b| > atol + rtol|b|).

Needs only torch and the checkout (no simulator). Numbers, not asserts.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tasks.parallelkernelbench.checkout import load_specs  # noqa: E402
from tasks.parallelkernelbench.naming import Checkout  # noqa: E402
from tasks.api import TaskContext  # noqa: E402

ATOL = RTOL = 1e-2


def sort_ties(device: str) -> list[dict]:
    rows = []
    g = torch.Generator(device="cpu").manual_seed(0)
    for n_rows, width in ((2048, 65), (2048, 33), (256, 513), (64, 2049), (16, 4097), (4, 16385), (1, 100000)):
        x = torch.sigmoid(torch.randn(n_rows, width, generator=g).to(torch.bfloat16)).to(device)
        for descending in (True, False):
            default = torch.sort(x, dim=1, descending=descending).indices
            stable = torch.sort(x, dim=1, descending=descending, stable=True).indices
            same = (default == stable).all(dim=1).float().mean().item()
            rows.append({"device": device, "rows": n_rows, "width": width, "descending": descending,
                         "rows_equal_to_stable": round(same, 4)})
    return rows


def topk_ties(device: str) -> list[dict]:
    """torch.topk(sorted=True) on bf16 rows full of ties, against the first k of a stable sort (ties in index
    order) and of a stable sort of the reversed row (ties in reverse index order)."""
    rows = []
    g = torch.Generator(device="cpu").manual_seed(1)
    for n_rows, width, k in ((64, 1024, 200), (32, 16384, 200), (256, 65, 10), (4, 100000, 50), (128, 2048, 1)):
        x = (torch.randn(n_rows, width, generator=g) * 40).to(torch.bfloat16).to(device)
        for largest in (True, False):
            top = torch.topk(x, k, dim=1, largest=largest, sorted=True).indices
            first = torch.sort(x, dim=1, descending=largest, stable=True).indices[:, :k]
            rev = width - 1 - torch.sort(x.flip(1), dim=1, descending=largest, stable=True).indices[:, :k]
            rows.append({"device": device, "rows": n_rows, "width": width, "k": k, "largest": largest,
                         "rows_ties_in_index_order": round((top == first).all(1).float().mean().item(), 4),
                         "rows_ties_in_reverse_order": round((top == rev).all(1).float().mean().item(), 4)})
    return rows


def mismatches(a: torch.Tensor, b: torch.Tensor) -> int:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return int(((a - b).abs() > ATOL + RTOL * b.abs()).sum())


@contextlib.contextmanager
def one_rank_all_to_all():
    real = dist.all_to_all

    def copy(outs, ins, group=None, async_op=False):
        assert dist.get_world_size(group) == 1
        for o, i in zip(outs, ins):
            o.copy_(i)

    dist.all_to_all = copy
    try:
        yield
    finally:
        dist.all_to_all = real


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def irfft_sides(root: str, cand_path: str, pid: int, trials: int, device: str = "cuda") -> list[dict]:
    spec = load_specs(Checkout(root, "bfloat16"))[pid]
    cand = load(cand_path, "probe_candidate")
    out = []
    for trial in range(trials):
        ctx = TaskContext(rank=0, world_size=1, seed=0, trial=trial, preset="full", size=dict(spec.sizes["full"]),
                          device=torch.device(device))
        args = spec.make_inputs(ctx)
        ref_gpu = spec.reference(*args)
        got = cand.solution(*args)
        with one_rank_all_to_all():  # gloo has no all_to_all in every torch; at one rank it is a copy
            ref_cpu32 = spec.reference(*(a.cpu() if isinstance(a, torch.Tensor) else a for a in args))
        exact = spec.reference(*(a.to(torch.complex128) if isinstance(a, torch.Tensor) and a.is_complex() else
                                 a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                                 for a in args))  # on the GPU: cuFFT in double precision
        out.append({"trial": trial, "elements": got.numel(), "dtype": str(got.dtype),
                    "candidate_vs_reference_gpu": mismatches(got, ref_gpu),
                    "candidate_vs_exact": mismatches(got, exact),
                    "reference_gpu_vs_exact": mismatches(ref_gpu, exact),
                    "reference_cpu32_vs_exact": mismatches(ref_cpu32, exact),
                    "candidate_vs_reference_cpu32": mismatches(got, ref_cpu32),
                    "max_abs_err": {"candidate": float((got.double().cpu() - exact.cpu()).abs().max()),
                                    "reference_gpu": float((ref_gpu.double().cpu() - exact.cpu()).abs().max()),
                                    "reference_cpu32": float((ref_cpu32.double() - exact.cpu()).abs().max())}})
        print(json.dumps(out[-1]), file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("--cand-61", help="the distributed-irfft candidate file (without it: the tie orders only)")
    ap.add_argument("--pid", type=int, default=60, help="its problem id in the checkout's reference/")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("cpu:gloo,cuda:nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "sort_ties": sort_ties("cuda") + sort_ties("cpu"), "topk_ties": topk_ties("cuda") + topk_ties("cpu")}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    if args.cand_61:
        res["irfft"] = irfft_sides(args.pkb_root, args.cand_61, args.pid, args.trials)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
