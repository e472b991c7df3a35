"""Does torch.bmm of a sparse COO matrix and a dense one run in bf16, on the GPU and the CPU? The pattern of
ParallelKernelBench's ParallelKittens 63 (`torch.bmm(psi.to(torch.bfloat16), x)` on a sparse `psi`), which the screen
rejects at world size 1 with torch's CPU error; this says whether the GPU raises the same. Prints JSON.

    python benchmarks/sparse_bmm_dtypes.py
"""
import json

import torch

out = {"torch": torch.__version__}
for dev in (["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]):
    for dt in (torch.bfloat16, torch.float32):
        k, n, m, c = 3, 16, 64, 8
        idx = torch.stack([torch.randint(0, k, (40,)), torch.randint(0, n, (40,)), torch.randint(0, m, (40,))])
        psi = torch.sparse_coo_tensor(idx, torch.randn(40), (k, n, m)).coalesce().to(dev)
        x = torch.randn(m, c, device=dev).to(dt).reshape(1, m, c).expand(k, -1, -1)
        try:
            y = torch.bmm(psi.to(dt), x)
            ref = torch.bmm(psi.to_dense().float(), x.float())
            out[f"{dev} {dt}"] = f"ok, max err {float((y.float() - ref).abs().max()):.3g}"
        except Exception as e:
            out[f"{dev} {dt}"] = f"{type(e).__name__}: {str(e)[:200]}"
print(json.dumps(out, indent=1))
