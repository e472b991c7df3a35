"""Conversions numpy lacks, checked against torch's reference implementations."""
import numpy as np
import torch

from pkbsim.ptx.dtypes import bf16_to_f32, f32_to_bf16, f32_to_fp8, fp8_to_f32, round_to
from pkbsim.ptx.ops_float import to_half_bits


def _samples(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    return np.r_[x, np.float32([0.0, -0.0, np.inf, -np.inf, 1.0, 65504, 3.0e38])]


def test_bf16_rounding_matches_torch():
    x = _samples()
    ours = f32_to_bf16(x)
    ref = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(ours, ref)
    assert np.array_equal(bf16_to_f32(ours), torch.from_numpy(ours.view(np.int16)).view(torch.bfloat16).float().numpy())


def test_bf16_from_float64_rounds_once():
    x = np.float64(1.0) + np.float64(2.0) ** -8 + np.float64(2.0) ** -40   # just above a tie
    assert bf16_to_f32(to_half_bits(np.array([x]), "bf16"))[0] == np.float32(1.0 + 2 ** -7)


def test_fp8_e4m3_matches_torch():
    x = _samples() / np.float32(2 ** 20)
    x = np.clip(x, -448, 448)
    ours = f32_to_fp8(x, "e4m3")
    ref = torch.from_numpy(x).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert np.array_equal(ours, ref)
    assert np.array_equal(fp8_to_f32(ours, "e4m3"), torch.from_numpy(ref).view(torch.float8_e4m3fn).float().numpy())


def test_fp8_e5m2_matches_torch():
    x = np.clip(_samples() / np.float32(2 ** 10), -57344, 57344)
    ref = torch.from_numpy(x).to(torch.float8_e5m2).view(torch.uint8).numpy()
    assert np.array_equal(f32_to_fp8(x, "e5m2"), ref)


def test_directed_rounding_brackets_the_exact_value():
    x = np.random.default_rng(1).standard_normal(1000) * 1e3
    down, up = round_to(x, np.float32, "rm"), round_to(x, np.float32, "rp")
    zero = round_to(x, np.float32, "rz")
    assert (down <= x).all() and (up >= x).all()
    assert ((up.astype(np.float64) - down) <= np.spacing(np.abs(up))).all()
    assert (np.abs(zero) <= np.abs(x)).all()
