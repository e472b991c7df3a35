#!/bin/sh
# Issue 19's GPU measurements in one device call (run from the repo root on the lent GPU, .whl carried;
# about 160 s): the microbenchmarks (benchmarks/device_kernel_model_check.py measure, ~2 min), the CUDA-event
# window (benchmarks/event_window.py, ~10 s), the small ops in three L2 settings (benchmarks/small_op_context.py,
# ~30 s) and the held-out torch-op cases (benchmarks/torch_op_kernels.py, ~1 min). The device programs have
# their own script (benchmarks/device_program_kernels.py measure; its output is too many files for one call).
#   sh benchmarks/device_model_gpu.sh "$OUT"
# Here afterwards: device_kernel_model_check.py compare OUT/device_kernel_measured.json, small_op_context.py's
# and torch_op_kernels.py's compare.
. benchmarks/gpu_env.sh
out=${1:?usage: device_model_gpu.sh OUTDIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.used --format=csv > "$out/gpu.txt" 2>&1
timeout 240 python3 benchmarks/device_kernel_model_check.py measure "$out/device_kernel_measured.json" > "$out/device_kernel.log" 2>&1
timeout 60 python3 benchmarks/event_window.py "$out/event_window.json" > "$out/event_window.log" 2>&1
timeout 90 python3 benchmarks/small_op_context.py "$out/small_op_context.json" > "$out/small_op_context.log" 2>&1
timeout 150 python3 benchmarks/torch_op_kernels.py measure "$out/torch_op_kernels_measured.json" > "$out/torch_op_kernels.log" 2>&1
