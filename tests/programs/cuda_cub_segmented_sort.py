"""cub's device-wide segmented radix sort from an inline-CUDA extension on one rank: the host-side dispatch
(policy choice, temporary storage, kernel launches) must run on the simulator's CUDA runtime as on a GPU.
Prints the cudaError_t each call returned and the sorted keys/values of two segments."""
import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cub/cub.cuh>

std::vector<int64_t> sort_pairs(torch::Tensor keys, torch::Tensor keys_out, torch::Tensor vals,
                                torch::Tensor vals_out, torch::Tensor offsets) {
  size_t bytes = 0;
  int segments = offsets.numel() - 1;
  auto stream = at::cuda::getCurrentCUDAStream().stream();
  cudaError_t sized = cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, bytes, keys.data_ptr<float>(), keys_out.data_ptr<float>(), vals.data_ptr<int>(),
      vals_out.data_ptr<int>(), (int)keys.numel(), segments, offsets.data_ptr<int>(), offsets.data_ptr<int>() + 1,
      0, 32, stream);
  auto temp = torch::empty({(int64_t)bytes}, keys.options().dtype(torch::kUInt8));
  cudaError_t sorted = cub::DeviceSegmentedRadixSort::SortPairs(
      temp.data_ptr<uint8_t>(), bytes, keys.data_ptr<float>(), keys_out.data_ptr<float>(), vals.data_ptr<int>(),
      vals_out.data_ptr<int>(), (int)keys.numel(), segments, offsets.data_ptr<int>(), offsets.data_ptr<int>() + 1,
      0, 32, stream);
  return {(int64_t)sized, (int64_t)sorted, (int64_t)bytes};
}
"""

dist.init_process_group("nccl")
DECL = ("std::vector<int64_t> sort_pairs(torch::Tensor keys, torch::Tensor keys_out, torch::Tensor vals, "
        "torch::Tensor vals_out, torch::Tensor offsets);")
ext = load_inline("pkb_test_cub_sort", cpp_sources=DECL, cuda_sources=SRC, functions=["sort_pairs"])
keys = torch.tensor([3.0, -1.0, 2.5, 0.0, 7.0, -4.0, 1.0, 5.0], device="cuda")
vals = torch.arange(8, dtype=torch.int32, device="cuda")
offsets = torch.tensor([0, 3, 8], dtype=torch.int32, device="cuda")
keys_out, vals_out = torch.full_like(keys, float("nan")), torch.full_like(vals, -1)
sized, sorted_, nbytes = ext.sort_pairs(keys, keys_out, vals, vals_out, offsets)
print("errors", sized, sorted_, "temp bytes > 0:", nbytes > 0)
print("keys", keys_out.tolist())
print("vals", vals_out.tolist())
dist.destroy_process_group()
