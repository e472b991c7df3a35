"""A Triton kernel that loads or stores a whole block where the tensor has fewer rows (no mask, no
boundary check) touches memory outside every live tensor: an illegal memory access naming the kernel line,
raised before the access. The interpreter used to read or write the host heap there (ParallelKernelBench
ring-attention candidates with 64-row blocks over a 1-row screen-size sequence died of SIGSEGV, an
inconclusive crash). The twins mask the rows and pass; a kernel that reads a live tensor through a table of
addresses, and one that reads a symmetric buffer through a peer pointer, stay legal."""
import pytest
from conftest import PRELUDE

pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")

PROGRAM = """
import triton, triton.language as tl

@triton.jit
def copy_rows(src, dst, rows, MASKED: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr):
    r = tl.arange(0, BLOCK)[:, None]
    c = tl.arange(0, D)[None, :]
    if MASKED:
        x = tl.load(src + r * D + c, mask=r < rows, other=0.0)
    else:
        x = tl.load(src + r * D + c)
    tl.store(dst + r * D + c, x * 2, mask=r < rows)

src = torch.randn(ROWS, 64, device="cuda")
dst = torch.empty(ROWS, 64, device="cuda")
copy_rows[(1,)](src, dst, ROWS, MASKED=MASKED, BLOCK=64, D=64)
assert torch.equal(dst, src * 2)
dist.destroy_process_group()
"""

STORE = """
import triton, triton.language as tl

@triton.jit
def fill_block(dst, rows, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    if MASKED:
        tl.store(dst + r, r.to(tl.float32), mask=r < rows)
    else:
        tl.store(dst + r, r.to(tl.float32))

dst = torch.zeros(16, device="cuda")
fill_block[(1,)](dst, 16, MASKED=MASKED, BLOCK=BLOCK)
assert torch.equal(dst, torch.arange(16, dtype=torch.float32, device="cuda"))
dist.destroy_process_group()
"""


def _fault(res, body: str, text: str) -> str:
    """The finding's message; it must name the program's line holding `text`."""
    assert res.verdict == "error", [f.render() for f in res.findings]
    line = next(i for i, s in enumerate((PRELUDE + body).splitlines(), 1) if text in s)
    msg = res.findings[0].message
    assert "out of bounds" in msg and f"prog.py:{line}" in msg, msg
    return msg


def test_a_block_load_past_the_tensor_is_an_illegal_access(run_program):
    body = "ROWS, MASKED = 2, False\n" + PROGRAM
    msg = _fault(run_program(body), body, "x = tl.load(src + r * D + c)")
    assert "load" in msg and "argument src" in msg


def test_the_masked_block_load_is_fine(run_program):
    res = run_program("ROWS, MASKED = 2, True\n" + PROGRAM)
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_a_block_store_past_the_tensor_is_an_illegal_access(run_program):
    body = "BLOCK, MASKED = 1024, False\n" + STORE
    msg = _fault(run_program(body), body, "tl.store(dst + r, r.to(tl.float32))")
    assert "store" in msg and "argument dst" in msg


def test_the_masked_block_store_is_fine(run_program):
    res = run_program("BLOCK, MASKED = 1024, True\n" + STORE)
    assert res.verdict == "ok", [f.render() for f in res.findings]


TABLE = """
import triton, triton.language as tl

@triton.jit
def sum_rows(table, out, N: tl.constexpr):
    for i in tl.static_range(3):
        p = tl.load(table + i).to(tl.pointer_type(tl.float32))
        tl.store(out + i, tl.sum(tl.load(p + tl.arange(0, N)), 0))

rows = [torch.randn(32, device="cuda") for _ in range(3)]
table = torch.tensor([r.data_ptr() for r in rows], dtype=torch.int64, device="cuda")
out = torch.empty(3, device="cuda")
sum_rows[(1,)](table, out, N=32)
assert torch.allclose(out, torch.stack([r.sum() for r in rows]), rtol=1e-5, atol=1e-5)
dist.destroy_process_group()
"""


def test_a_live_tensor_read_through_a_table_of_addresses_is_legal(run_program):
    res = run_program(TABLE)
    assert res.verdict == "ok", [f.render() for f in res.findings]


PEER = """
import torch.distributed._symmetric_memory as symm_mem
import triton, triton.language as tl

@triton.jit
def pull(peer, out, N: tl.constexpr):
    p = peer.to(tl.pointer_type(tl.float32))
    tl.store(out + tl.arange(0, N), tl.load(p + tl.arange(0, N)))

buf = symm_mem.empty(N_BUF, dtype=torch.float32, device="cuda")
hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
buf.fill_(rank + 1)
hdl.barrier()
out = torch.empty(64, device="cuda")
pull[(1,)](hdl.buffer_ptrs[(rank + 1) % world], out, N=64)
hdl.barrier()
assert torch.all(out == (rank + 1) % world + 1)
dist.destroy_process_group()
"""


def test_a_peer_buffer_read_is_legal(run_program):
    res = run_program("N_BUF = 64\n" + PEER)
    assert res.verdict == "ok", [f.render() for f in res.findings]
