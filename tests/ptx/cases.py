"""The corpus: each case launches one kernel on random inputs and returns (got, expected, tolerance).

Shared by the CPU tests (numpy is the oracle) and benchmarks/ptx_differential.py (a GPU is).
A case is `fn(launch, rng) -> list[(name, got_tensor, expected_array, rtol, atol)]`, where
`launch(kernel, grid, block, args, shared_bytes=0)` runs the kernel on the tensors in `args`.
"""
from __future__ import annotations

import numpy as np
import torch

F32 = (1e-6, 1e-6)
EXACT = (0.0, 0.0)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def bf16(a):
    return t(np.asarray(a, np.float32)).to(torch.bfloat16)


def f32_of(x):
    return x.float().numpy()


def bf16_round(a):
    return torch.from_numpy(np.asarray(a, np.float32)).to(torch.bfloat16).float().numpy()


def grid_for(n, block=256):
    return (n + block - 1) // block


# --- elementwise.cu ------------------------------------------------------------------------------
def vec_add(launch, rng):
    n = 1000
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    c = torch.zeros(n)
    launch("vec_add", grid_for(n), 256, (t(a), t(b), c, n))
    return [("c", c, a + b, *EXACT)]


def saxpy(launch, rng):
    n = 777
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    yt = t(y.copy())
    launch("saxpy", grid_for(n), 256, (np.float32(1.5), t(x), yt, n))
    return [("y", yt, (np.float64(1.5) * x + y).astype(np.float32), *F32)]


def int_affine(launch, rng):
    n = 500
    x = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int32)
    y = torch.zeros(n, dtype=torch.int32)
    launch("int_affine", grid_for(n), 256, (t(x), y, 2654435761 - 2**32, 12345, n))
    exp = (x.astype(np.int64) * (2654435761 - 2**32) + 12345).astype(np.int32)
    return [("y", y, exp, *EXACT)]


def relu_clamp(launch, rng):
    n = 300
    x = rng.standard_normal(n, np.float32) * 3
    y = torch.zeros(n)
    launch("relu_clamp", grid_for(n, 128), 128, (t(x), y, 2.0, n))
    return [("y", y, np.clip(x, 0, 2), *EXACT)]


def bf16_add(launch, rng):
    n = 1024
    a, b = bf16(rng.standard_normal(n)), bf16(rng.standard_normal(n))
    c = torch.zeros(n, dtype=torch.bfloat16)
    launch("bf16_add_f32acc", grid_for(n), 256, (a, b, c, n))
    return [("c", c, bf16_round(f32_of(a) + f32_of(b)), *EXACT)]


def bf16_mul(launch, rng):
    n = 1024
    a, b = bf16(rng.standard_normal(n)), bf16(rng.standard_normal(n))
    c = torch.zeros(n, dtype=torch.bfloat16)
    launch("bf16_native_mul", grid_for(n), 256, (a, b, c, n))
    return [("c", c, bf16_round(f32_of(a) * f32_of(b)), *EXACT)]


def bf16x2_fma(launch, rng):
    n = 512
    a, b, c = (bf16(rng.standard_normal(n)) for _ in range(3))
    d = torch.zeros(n, dtype=torch.bfloat16)
    launch("bf16x2_fma", grid_for(n // 2), 256, (a, b, c, d, n // 2))
    exp = bf16_round(f32_of(a).astype(np.float64) * f32_of(b) + f32_of(c))
    return [("d", d, exp, *EXACT)]


def f16_axpby(launch, rng):
    n = 600
    x, y = t(rng.standard_normal(n).astype(np.float16)), t(rng.standard_normal(n).astype(np.float16))
    z = torch.zeros(n, dtype=torch.float16)
    launch("f16_axpby", grid_for(n), 256, (x, y, z, 0.75, -1.25, n))
    exp = (np.float32(0.75) * x.numpy().astype(np.float32) + np.float32(-1.25) * y.numpy().astype(np.float32))
    return [("z", z, exp.astype(np.float16), 1e-3, 1e-3)]


def exp_sigmoid(launch, rng):
    n = 512
    x = rng.uniform(-10, 10, n).astype(np.float32)
    e, s = torch.zeros(n), torch.zeros(n)
    launch("exp_sigmoid", grid_for(n), 256, (t(x), e, s, n))
    # ex2.approx (expf) is within 2 ulp; __expf adds ~1.2|x| ulp on the GPU
    return [("e", e, np.exp(x.astype(np.float64)), 1e-6, 0), ("s", s, 1 / (1 + np.exp(-x.astype(np.float64))), 1e-5, 1e-7)]


def sqrt_div(launch, rng):
    n = 400
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32) + 0.1
    a, b, c = torch.zeros(n), torch.zeros(n), torch.zeros(n)
    launch("sqrt_div", grid_for(n), 256, (t(x), t(y), a, b, c, n))
    return [("sqrt", a, np.sqrt(np.abs(x)), *EXACT), ("div", b, x / y, *EXACT),
            ("rsqrt", c, 1 / np.sqrt(np.abs(y) + np.float32(1)), 1e-6, 0)]


def int_divmod(launch, rng):
    n = 512
    x = rng.integers(-10**9, 10**9, n, dtype=np.int32)
    y = rng.integers(1, 1000, n, dtype=np.int32) * rng.choice([-1, 1], n).astype(np.int32)
    q, r = torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)
    launch("int_divmod", grid_for(n), 256, (t(x), t(y), q, r, n))
    qe = (np.abs(x) // np.abs(y)) * np.sign(x) * np.sign(y)
    return [("q", q, qe.astype(np.int32), *EXACT), ("r", r, (x - qe * y).astype(np.int32), *EXACT)]


def u64_divmod(launch, rng):
    n = 256
    x = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    d = 1_000_000_007
    q, r = torch.zeros(n, dtype=torch.uint64), torch.zeros(n, dtype=torch.uint64)
    launch("u64_divmod", grid_for(n), 256, (t(x), d, q, r, n))
    return [("q", q, x // np.uint64(d), *EXACT), ("r", r, x % np.uint64(d), *EXACT)]


def bit_ops(launch, rng):
    n = 300
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 1, 0x80000000]
    outs = [torch.zeros(n, dtype=torch.uint32) for _ in range(4)]
    launch("bit_ops", grid_for(n), 256, (t(x), *outs, n))
    pop = np.array([int(v).bit_count() for v in x], np.uint32)
    clz = np.array([32 - int(v).bit_length() for v in x], np.uint32)
    rev = np.array([int(f"{int(v):032b}"[::-1], 2) for v in x], np.uint32)
    mix = ((x << np.uint32(7)) ^ (x >> np.uint32(3))) | (x & np.uint32(0xF0F0))
    return [("popc", outs[0], pop, *EXACT), ("clz", outs[1], clz, *EXACT), ("brev", outs[2], rev, *EXACT),
            ("mix", outs[3], mix, *EXACT)]


def mul_hi_wide(launch, rng):
    n = 256
    a, b = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    hi, wide = torch.zeros(n, dtype=torch.uint32), torch.zeros(n, dtype=torch.uint64)
    shi = torch.zeros(n, dtype=torch.int64)
    launch("mul_hi_wide", grid_for(n), 256, (t(a), t(b), hi, wide, shi, n))
    prod = a.astype(np.uint64) * b.astype(np.uint64)
    sa = [int(v) * 977 - 5000000000 for v in a]
    sb = [int(v) * -3 for v in b]
    she = np.array([(p * q) >> 64 for p, q in zip(sa, sb)], np.int64)
    return [("hi", hi, (prod >> np.uint64(32)).astype(np.uint32), *EXACT), ("wide", wide, prod, *EXACT),
            ("mul64hi", shi, she, *EXACT)]


def float_int_casts(launch, rng):
    n = 256
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    x[:4] = [2.5, -2.5, 3.5, -0.5]
    tr, rn, fl = (torch.zeros(n, dtype=torch.int32) for _ in range(3))
    back = torch.zeros(n)
    launch("float_int_casts", grid_for(n), 256, (t(x), tr, rn, fl, back, n))
    tre = np.trunc(x).astype(np.int32)
    return [("trunc", tr, tre, *EXACT), ("rint", rn, np.rint(x).astype(np.int32), *EXACT),
            ("floor", fl, np.floor(x).astype(np.int32), *EXACT), ("back", back, (tre * 3 + 1).astype(np.float32), *EXACT)]


def fp8_quantize(launch, rng):
    n = 512
    x = (rng.standard_normal(n) * 50).astype(np.float32)
    x[:4] = [1000.0, -1000.0, 0.0, 1e-9]
    q, deq = torch.zeros(n // 2, dtype=torch.uint16), torch.zeros(n)
    launch("fp8_quantize", grid_for(n // 2), 256, (t(x), q, deq, n // 2))
    ref = torch.from_numpy(x).to(torch.float8_e4m3fn)
    refq = ref.view(torch.uint8).numpy().astype(np.uint16).reshape(-1, 2)
    return [("codes", q, refq[:, 0] | (refq[:, 1] << np.uint16(8)), *EXACT),
            ("dequant", deq, np.clip(ref.float().numpy(), -448, 448), *EXACT)]


def grid_stride(launch, rng):
    n = 5000
    x = rng.standard_normal(n, np.float32)
    y = torch.zeros(n)
    launch("grid_stride_scale", 3, 128, (t(x), y, 0.5, n))
    return [("y", y, x * np.float32(0.5), *EXACT)]


def collatz(launch, rng):
    n = 200
    x = rng.integers(1, 10000, n, dtype=np.uint32)
    steps = torch.zeros(n, dtype=torch.uint32)
    launch("collatz_steps", grid_for(n, 64), 64, (t(x), steps, n))

    def count(v):
        s = 0
        while v != 1:
            v = 3 * v + 1 if v & 1 else v // 2
            s += 1
        return s
    return [("steps", steps, np.array([count(int(v)) for v in x], np.uint32), *EXACT)]


def branchy(launch, rng):
    n = 300
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    y = torch.zeros(n, dtype=torch.int32)
    launch("branchy", grid_for(n, 128), 128, (t(x), y, n))
    exp = []
    for v in x.tolist():
        c_mod = int(np.fmod(v, 3))
        if c_mod == 0:
            exp.append(v * 2)
        elif c_mod == 1:
            exp.append(sum(k * v for k in range(v & 7)))
        else:
            exp.append(-v)
    return [("y", y, np.array(exp, np.int32), *EXACT)]


def local_array(launch, rng):
    n = 100
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    y = torch.zeros(n, dtype=torch.int32)
    launch("local_array", 1, 128, (t(x), y, n))
    j = x & 15
    return [("y", y, (x * j + x * (15 - j)).astype(np.int32), *EXACT)]


def struct_param(launch, rng):
    n = 100
    x = rng.standard_normal(n, np.float32)
    y = torch.zeros(n)
    raw = np.array([(2.0, -3, 0.25)], dtype=[("s", "<f4"), ("h", "<i4"), ("b", "<f4")]).tobytes()
    launch("struct_param", 1, 128, (raw, t(x), y, n))
    return [("y", y, (x * np.float32(2) + np.float32(-3) + np.float32(0.25)).astype(np.float32), *EXACT)]


def conv1d_const(launch, rng):
    n = 300
    x = rng.standard_normal(n, np.float32)
    y = torch.zeros(n)
    launch("conv1d_const", grid_for(n), 256, (t(x), y, n))
    taps = np.array([0.1, 0.2, 0.4, 0.2, 0.1], np.float32)
    exp = np.zeros(n, np.float32)
    for k in range(-2, 3):
        idx = np.clip(np.arange(n) + k, 0, n - 1)
        exp = exp + taps[k + 2] * x[idx]
    return [("y", y, exp, 1e-6, 1e-6)]


def grid2d(launch, rng):
    w, h = 37, 21
    out = torch.zeros(w * h)
    launch("grid2d_index", (3, 3), (16, 8), (out, w, h))
    yy, xx = np.mgrid[0:h, 0:w]
    return [("out", out, (xx * 1000.0 + yy).astype(np.float32).reshape(-1), *EXACT)]


def noinline_calls(launch, rng):
    n = 200
    x = rng.integers(-50, 50, n, dtype=np.int32)
    y = torch.zeros(n, dtype=torch.int32)
    launch("noinline_calls", grid_for(n, 64), 64, (t(x), y, n))
    exp = []
    for v in x.tolist():
        if v & 1:
            s = np.float32(0)
            for i in range(v & 3):
                s = np.float32(s + np.float32(v) * np.float32(i))
            v = v * 3 + int(s)
        exp.append(v)
    return [("y", y, np.array(exp, np.int32), *EXACT)]


ELEMENTWISE = [vec_add, saxpy, int_affine, relu_clamp, bf16_add, bf16_mul, bf16x2_fma, f16_axpby, exp_sigmoid,
               sqrt_div, int_divmod, u64_divmod, bit_ops, mul_hi_wide, float_int_casts, fp8_quantize,
               grid_stride, collatz, branchy, local_array, struct_param, conv1d_const, grid2d, noinline_calls]


# --- cooperative.cu ------------------------------------------------------------------------------
def block_reduce(launch, rng):
    n = 1000
    x = rng.standard_normal(n, np.float32)
    out = torch.zeros(grid_for(n))
    launch("block_reduce_smem", grid_for(n), 256, (t(x), out, n))
    exp = np.pad(x, (0, 24)).reshape(-1, 256).astype(np.float64).sum(1)
    return [("out", out, exp, 1e-5, 1e-5)]


def warp_reduce(launch, rng):
    n = 512
    x = rng.standard_normal(n, np.float32)
    out = torch.zeros(n // 32)
    launch("warp_reduce_shfl", grid_for(n), 256, (t(x), out, n))
    return [("out", out, x.reshape(-1, 32).astype(np.float64).sum(1), 1e-5, 1e-5)]


def warp_scan(launch, rng):
    n = 256
    x = rng.integers(-100, 100, n, dtype=np.int32)
    y = torch.zeros(n, dtype=torch.int32)
    launch("warp_scan_up", 1, 256, (t(x), y, n))
    return [("y", y, np.cumsum(x.reshape(-1, 32), axis=1).reshape(-1).astype(np.int32), *EXACT)]


def warp_allreduce(launch, rng):
    n = 256
    x = rng.integers(-10**6, 10**6, n, dtype=np.int32)
    y = torch.zeros(n, dtype=torch.int32)
    launch("warp_allreduce_xor", 1, 256, (t(x), y, n))
    return [("y", y, np.repeat(x.reshape(-1, 32).max(1), 32), *EXACT)]


def warp_broadcast(launch, rng):
    n = 128
    x = rng.standard_normal(n, np.float32)
    y = torch.zeros(n)
    launch("warp_broadcast_idx", 1, 128, (t(x), y, 5, n))
    return [("y", y, np.repeat(x.reshape(-1, 32)[:, 5], 32), *EXACT)]


def ballot(launch, rng):
    n = 250
    x = rng.standard_normal(n, np.float32)
    ballots, ranks = torch.zeros(8, dtype=torch.uint32), torch.zeros(n, dtype=torch.int32)
    launch("ballot_count", 1, 256, (t(x), ballots, ranks, n))
    p = np.pad(x > 0, (0, 6)).reshape(-1, 32)
    bits = (p.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype(np.uint32)
    rk = np.where(p, np.cumsum(p, axis=1) - 1, -1).reshape(-1)[:n].astype(np.int32)
    return [("ballot", ballots, bits, *EXACT), ("rank", ranks, rk, *EXACT)]


def vote(launch, rng):
    n = 256
    x = rng.integers(0, 100, n, dtype=np.int32)
    x[32:64] = 50
    a, b = torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    launch("vote_any_all", 1, 256, (t(x), a, b, n))
    w = x.reshape(-1, 32)
    return [("any", a, (w > 90).any(1).astype(np.int32), *EXACT), ("all", b, (w > 5).all(1).astype(np.int32), *EXACT)]


def atomic_sum(launch, rng):
    n = 2000
    x = rng.standard_normal(n, np.float32)
    out = torch.zeros(1)
    launch("atomic_sum", grid_for(n), 256, (t(x), out, n))
    return [("sum", out, np.array([x.astype(np.float64).sum()]), 1e-4, 1e-4)]


def histogram(launch, rng):
    n, nb = 3000, 37
    x = rng.integers(0, 10**6, n, dtype=np.int32)
    bins = torch.zeros(nb, dtype=torch.uint32)
    launch("histogram", 4, 128, (t(x), bins, nb, n))
    return [("bins", bins, np.bincount(x % nb, minlength=nb).astype(np.uint32), *EXACT)]


def atomic_minmax(launch, rng):
    n = 700
    x = rng.integers(-10**9, 10**9, n, dtype=np.int32)
    mx, mn = t(np.array([-2**31], np.int32)), t(np.array([2**31 - 1], np.int32))
    launch("atomic_minmax", grid_for(n), 256, (t(x), mx, mn, n))
    return [("max", mx, np.array([x.max()]), *EXACT), ("min", mn, np.array([x.min()]), *EXACT)]


def cas_increment(launch, rng):
    n = 96
    counter, tickets = torch.zeros(1, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)
    launch("cas_increment", 1, 96, (counter, tickets, n))
    got = np.sort(tickets.numpy())
    return [("counter", counter, np.array([n]), *EXACT), ("tickets_are_a_permutation", t(got), np.arange(n), *EXACT)]


def exch_inc(launch, rng):
    n = 64
    slot, ring = torch.zeros(4, dtype=torch.uint32), torch.zeros(1, dtype=torch.uint32)
    got = torch.zeros(n, dtype=torch.uint32)
    launch("exch_inc", 1, 64, (slot, ring, got, n))
    # the final slot values are the last writer's indices; every exchanged-out value was written by someone
    ok = np.isin(got.numpy(), np.r_[0, np.arange(n)]).all()
    return [("ring", ring, np.array([n % 10]), *EXACT), ("exchanged_values_valid", t(np.array([ok])), np.array([True]), *EXACT),
            ("slot_lanes", t(slot.numpy() % 4), np.arange(4), *EXACT)]


def transpose(launch, rng):
    w, h = 40, 24
    x = rng.standard_normal((h, w)).astype(np.float32)
    out = torch.zeros(w * h)
    launch("smem_transpose", (3, 2), (16, 16), (t(x), out, w, h))
    return [("out", out, x.T.reshape(-1), *EXACT)]


def dyn_smem(launch, rng):
    n = 256
    x = rng.integers(-100, 100, n, dtype=np.int32)
    y = torch.zeros(n, dtype=torch.int32)
    launch("dyn_smem_reverse", 2, 128, (t(x), y, n), shared_bytes=128 * 4)
    return [("y", y, x.reshape(2, 128)[:, ::-1].reshape(-1), *EXACT)]


def sgemm(launch, rng):
    M, N, K = 40, 24, 36
    A, B = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    C = torch.zeros(M * N)
    launch("sgemm_tiled", (2, 3), (16, 16), (t(A), t(B), C, M, N, K))
    return [("C", C, (A.astype(np.float64) @ B).reshape(-1), 1e-5, 1e-5)]


def mma_gemm(launch, rng, M=32, N=16, K=64):
    A, Bt = bf16(rng.standard_normal((M, K))), bf16(rng.standard_normal((N, K)))
    C = torch.zeros(M * N)
    launch("mma_bf16_gemm", (N // 8, M // 16), 32, (A, Bt, C, M, N, K))
    exp = f32_of(A).astype(np.float64) @ f32_of(Bt).astype(np.float64).T
    return [("C", C, exp.reshape(-1), 1e-4, 1e-4)]   # tensor cores accumulate in their own order


def wmma_gemm(launch, rng):
    M, N, K = 32, 32, 48
    A, B = bf16(rng.standard_normal((M, K))), bf16(rng.standard_normal((K, N)))
    C = torch.zeros(M * N)
    launch("wmma_bf16_gemm", (N // 16, M // 16), 32, (A, B, C, M, N, K))
    exp = f32_of(A).astype(np.float64) @ f32_of(B).astype(np.float64)
    return [("C", C, exp.reshape(-1), 1e-4, 1e-4)]


def cp_async(launch, rng):
    blocks, chunks = 3, 5
    x = rng.standard_normal(blocks * chunks * 256, np.float32)
    out = torch.zeros(blocks)
    launch("cp_async_sum", blocks, 64, (t(x), out, chunks))
    return [("sums", out, x.reshape(blocks, -1).astype(np.float64).sum(1), 1e-4, 1e-4)]


def softmax(launch, rng):
    rows, cols = 6, 300
    x = rng.standard_normal((rows, cols), np.float32) * 3
    y = torch.zeros(rows * cols)
    launch("softmax_rows", rows, 128, (t(x), y, cols))
    e = np.exp(x - x.max(1, keepdims=True))
    return [("y", y, (e / e.sum(1, keepdims=True)).reshape(-1), 1e-5, 1e-7)]


def rmsnorm(launch, rng):
    rows, cols = 4, 512
    x, w = bf16(rng.standard_normal((rows, cols))), bf16(rng.standard_normal(cols))
    y = torch.zeros(rows * cols, dtype=torch.bfloat16)
    launch("rmsnorm_bf16", rows, 128, (x, w, y, cols, 1e-6))
    xf = f32_of(x).astype(np.float64)
    exp = xf / np.sqrt((xf ** 2).mean(1, keepdims=True) + 1e-6) * f32_of(w)
    return [("y", y, exp.reshape(-1), 1e-2, 1e-2)]


def acquire_release(launch, rng):
    data, flag, seen = torch.zeros(64, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), torch.zeros(64, dtype=torch.int32)
    launch("acquire_release", 2, 64, (data, flag, seen))
    return [("seen", seen, np.arange(64) * 7 + 1, *EXACT)]


def cas_barrier(launch, rng):
    blocks = 4
    arrived, out = torch.zeros(1, dtype=torch.int32), torch.zeros(blocks * 32, dtype=torch.int32)
    launch("sys_cas_barrier", blocks, 32, (arrived, out, blocks))
    return [("out", out, np.repeat(blocks + np.arange(blocks), 32), *EXACT)]


def named_barriers(launch, rng):
    rounds = 4
    x = rng.standard_normal(rounds * 64, np.float32)
    y = torch.zeros(rounds * 64)
    launch("named_barrier_pipeline", 1, 96, (t(x), y, rounds))
    return [("y", y, (x.reshape(rounds, 64) * 2 + np.arange(rounds)[:, None]).reshape(-1).astype(np.float32), *EXACT)]


COOPERATIVE = [block_reduce, warp_reduce, warp_scan, warp_allreduce, warp_broadcast, ballot, vote, atomic_sum,
               histogram, atomic_minmax, cas_increment, exch_inc, transpose, dyn_smem, sgemm, mma_gemm, wmma_gemm,
               cp_async, softmax, rmsnorm, acquire_release, cas_barrier, named_barriers]
