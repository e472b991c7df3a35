// pkb's stand-in for ThunderKittens' pyutils/parallel_tensor.cuh (the TK overlay in
// pkbsim/cuda/thunderkittens.py puts it in place of the original). Same class name, constructors, members
// and Python binding; the memory comes from the simulated world's symmetric memory
// (pkbsim.cuda.tk_parallel), whose rendezvous is the collective every rank joins, as the original's
// KittensBroker exchange is. Its peer pointers and multicast range are the ones device code follows.
#pragma once

#include <cstdint>
#include <vector>

#include <cuda.h>

#include <ATen/core/Tensor.h>
#include <torch/csrc/utils/pybind.h>

// A limit of pkb, raised as pkbsim.errors.NotSimulated (the screen's "inconclusive"), not a C++ error
// the candidate would be blamed for.
[[noreturn]] inline void pkb_tk_not_simulated(const char *what) {
    pybind11::object cls = pybind11::module_::import("pkbsim.errors").attr("NotSimulated");
    pybind11::object exc = cls(what);
    PyErr_SetObject(cls.ptr(), exc.ptr());
    throw pybind11::error_already_set();
}

// TMA tensor maps (ThunderKittens' tma:: loads and stores build them with cuTensorMapEncodeTiled): pkb's
// driver stand-in (runtime/driver/tensor_map.cpp) is linked into the extension and encodes them for the
// PTX interpreter's cp.async.bulk.tensor.

// `x.device().index()` in ThunderKittens' host checks (the TK overlay rewrites it to this): the GPU the
// program sees the tensor on, which for the CPU tensors that stand for GPU memory is the simulator's answer
inline int64_t pkb_tk_device_index(const at::Tensor &t) {
    return pybind11::module_::import("pkbsim.cuda.tk_parallel").attr("device_index")(t).cast<int64_t>();
}

namespace kittens {
namespace py {

struct TKParallelTensor {
    at::Tensor data_;
    std::vector<int64_t> shape_;
    at::ScalarType dtype_;

    std::vector<void *> raw_ptrs_;
    size_t allocated_size_ = 0;

    int local_rank_;
    int local_world_size_;

    bool multicast_;
    void *multicast_ptr_ = nullptr;
    size_t multicast_allocated_size_ = 0;

    // a tensor the caller allocated: its peers' addresses are exchanged (no multicast, as in the original)
    inline TKParallelTensor(const at::Tensor &tensor, int local_rank, int local_world_size, bool multicast)
        : data_(tensor), shape_(tensor.sizes().vec()), dtype_(tensor.scalar_type()),
          local_rank_(local_rank), local_world_size_(local_world_size), multicast_(multicast) {
        TORCH_CHECK(tensor.is_contiguous(), "Tensor must be contiguous");
        TORCH_CHECK(tensor.dim() <= 4, "Only tensors with dim <= 4 are supported for TKParallelTensor");
        TORCH_CHECK(local_rank_ >= 0, "local_rank must be non-negative");
        TORCH_CHECK(local_rank_ < local_world_size_, "local_rank must be less than local_world_size");
        TORCH_CHECK(!multicast, "Multicast is not supported for pre-allocated tensors");
        fill(pybind11::module_::import("pkbsim.cuda.tk_parallel").attr("share")(tensor, local_rank, local_world_size));
    }

    inline TKParallelTensor(const std::vector<int64_t> &shape, const at::ScalarType dtype, int local_rank,
                            int local_world_size, bool multicast)
        : shape_(shape), dtype_(dtype), local_rank_(local_rank), local_world_size_(local_world_size),
          multicast_(multicast) {
        TORCH_CHECK(local_rank_ >= 0, "local_rank must be non-negative");
        TORCH_CHECK(local_rank_ < local_world_size_, "local_rank must be less than local_world_size");
        TORCH_CHECK(!shape_.empty(), "Shape must be non-empty");
        TORCH_CHECK(shape_.size() <= 4, "Shape must have at most 4 dimensions for TKParallelTensor");
        for (auto dim : shape_) TORCH_CHECK(dim > 0, "Size dimensions must be positive");
        fill(pybind11::module_::import("pkbsim.cuda.tk_parallel").attr("allocate")(
            shape_, dtype_, local_rank, local_world_size, multicast));
    }

    TKParallelTensor(const TKParallelTensor &) = delete;
    TKParallelTensor &operator=(const TKParallelTensor &) = delete;
    TKParallelTensor(TKParallelTensor &&) = default;

    inline at::Tensor data() const { return data_; }

  private:
    // (tensor, [address per rank], multicast address, bytes) from the Python side
    inline void fill(pybind11::object got) {
        auto t = got.cast<pybind11::tuple>();
        data_ = t[0].cast<at::Tensor>();
        raw_ptrs_.clear();
        for (auto p : t[1].cast<std::vector<uint64_t>>()) raw_ptrs_.push_back(reinterpret_cast<void *>(p));
        multicast_ptr_ = reinterpret_cast<void *>(t[2].cast<uint64_t>());
        allocated_size_ = t[3].cast<size_t>();
        multicast_allocated_size_ = multicast_ ? allocated_size_ : 0;
    }
};

}  // namespace py
}  // namespace kittens

#define BIND_TK_PARALLEL_TENSOR(m) \
    pybind11::class_<kittens::py::TKParallelTensor>(m, "TKParallelTensor") \
        .def(pybind11::init<const at::Tensor&, int, int, bool>(), \
             pybind11::arg("tensor"), pybind11::arg("local_rank"), pybind11::arg("local_world_size"), \
             pybind11::arg("multicast") = false) \
        .def(pybind11::init<const std::vector<int64_t>&, const at::ScalarType&, int, int, bool>(), \
             pybind11::arg("shape"), pybind11::arg("dtype"), pybind11::arg("local_rank"), \
             pybind11::arg("local_world_size"), pybind11::arg("multicast") = false) \
        .def("data", &kittens::py::TKParallelTensor::data) \
        .def_readonly("data_", &kittens::py::TKParallelTensor::data_) \
        .def_readonly("local_rank_", &kittens::py::TKParallelTensor::local_rank_) \
        .def_readonly("local_world_size_", &kittens::py::TKParallelTensor::local_world_size_)
