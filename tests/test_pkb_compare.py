"""The ParallelKernelBench comparison decides as PKB's `torch.allclose(ref.float(), out.float(), atol, rtol)`
does, element for element, although it compares in chunks: every chunk is checked (a difference in the
last, partial chunk is found), and the edge values (NaN, infinities, the tolerance's boundary, complex,
integers) come out as torch's own allclose decides them."""
import pytest
import torch

from tasks.parallelkernelbench import compare as pkb_compare
from tasks.parallelkernelbench.compare import pkb_mismatch


def edge_values(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs around the tolerance boundary and through NaN / +-inf / 0 / huge values."""
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(n, generator=g) * torch.tensor([1e-3, 1.0, 1e3, 1e30])[torch.randint(0, 4, (n,), generator=g)]
    allowed = 1e-2 + (1e-2 * ref).abs()
    out = ref + allowed * (torch.rand(n, generator=g) * 2.2 - 1.1)  # about a tenth just outside
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 3e38])
    for t in (ref, out):
        pick = torch.rand(n, generator=g) < 0.01
        t[pick] = specials[torch.randint(0, len(specials), (int(pick.sum()),), generator=g)]
    return ref, out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.float16])
def test_each_element_is_decided_as_torch_allclose_decides_it(dtype):
    ref, out = edge_values(4000, 1)
    ref, out = ref.to(dtype), out.to(dtype)
    for i in range(len(ref)):  # one pair at a time: a whole-tensor verdict could hide a per-element disagreement
        r, o = ref[i:i + 1], out[i:i + 1]
        expect = torch.allclose(r.float(), o.float(), atol=1e-2, rtol=1e-2)
        assert (pkb_mismatch(o, r, "out") is None) == expect, (r.item(), o.item())


def test_complex_and_integer_outputs_are_compared_as_their_float_values():
    ref = torch.randn(100, dtype=torch.complex64)
    assert pkb_mismatch(ref + 5j, ref, "out") is None  # .float() keeps the real part, as PKB's does
    assert pkb_mismatch(ref + 5, ref, "out") is not None
    ints = torch.arange(50)
    assert pkb_mismatch(ints, ints.clone(), "out") is None
    assert "1 of 50 elements" in pkb_mismatch(ints + (ints == 7), ints, "out")


@pytest.mark.parametrize("where", [0, pkb_compare.CHUNK - 1, pkb_compare.CHUNK, 3 * pkb_compare.CHUNK + 17 - 1])
def test_a_difference_in_any_chunk_is_found(where):
    ref = torch.randn(3 * pkb_compare.CHUNK + 17).to(torch.bfloat16)  # the last chunk is partial
    out = ref.clone()
    assert pkb_mismatch(out, ref, "out") is None
    out[where] = float("nan")
    msg = pkb_mismatch(out, ref, "out")
    assert msg is not None and f"1 of {ref.numel()} elements" in msg and f"first at flat index {where}:" in msg


def test_the_count_covers_every_chunk_from_the_first_difference():
    ref = torch.zeros(2, 2 * pkb_compare.CHUNK)  # not flat: shape is kept, indices are flat
    out = ref.clone()
    out[0, 5], out[1, -1] = 1.0, -1.0
    msg = pkb_mismatch(out, ref, "out[0]")
    assert msg.startswith("out[0]: 2 of ") and "first at flat index 5: got 1, expected 0" in msg


def test_a_non_contiguous_output_is_compared_in_its_logical_order():
    ref = torch.randn(300, 200)
    assert pkb_mismatch(ref.t().contiguous().t(), ref, "out") is None
    assert pkb_mismatch(ref.t(), ref.t().contiguous(), "out") is None
    out = ref.t().contiguous().t().clone()
    out[1, 0] += 1
    assert "first at flat index 200:" in pkb_mismatch(out, ref, "out")
