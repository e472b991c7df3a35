"""A sparse input (ParallelKernelBench problem 62's COO `psi`) has no dense bytes to digest: the scorer's input
fingerprint raised 'unsupported memory format option Contiguous' before the candidate ran, so every candidate of
that problem was an 'error' on the GPU. It digests the sparse tensor's parts now, and a change of a value or an
index still changes the fingerprint (the twin: dense inputs digest as before)."""
import torch

from hwbackend.guard import fingerprint


def _coo():
    idx = torch.tensor([[0, 1, 2], [2, 0, 1]])
    return torch.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0, 3.0]), (3, 3))


def test_a_sparse_input_is_fingerprinted_by_its_parts():
    a = _coo()
    assert fingerprint([a]) == fingerprint([_coo()])
    b = _coo()
    b._values()[1] = 5.0                      # a candidate writing into the input's values
    assert fingerprint([b]) != fingerprint([a])
    c = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2], [2, 0, 2]]), torch.tensor([1.0, 2.0, 3.0]), (3, 3))
    assert fingerprint([c]) != fingerprint([a])
    assert fingerprint([a.to_sparse_csr()]) != fingerprint([a])
    assert fingerprint([a.to_sparse_csr()]) == fingerprint([_coo().to_sparse_csr()])


def test_a_dense_input_digests_as_before():
    x = torch.arange(6.0).reshape(2, 3)
    assert fingerprint([x]) == fingerprint([x.clone()]) == fingerprint([x.t().contiguous().t()])
    assert fingerprint([x]) != fingerprint([x + 1])
