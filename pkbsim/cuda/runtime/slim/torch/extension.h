// pkb's slim stand-in for torch/extension.h: tensors, factories, TORCH_CHECK and pybind11 with the
// tensor casters, at about half the compile time and memory (used unless the source needs torch::nn etc.).
#pragma once
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/Exceptions.h>
