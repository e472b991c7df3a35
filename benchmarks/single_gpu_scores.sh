#!/bin/sh
# The one-GPU scoring table of docs/scoring.md: `pkb score` at world size 1 with NCCL, full size, for the tasks
# that allow one rank; each task's reference against itself (the noise floor), the one-GPU candidates in
# tests/gpu_candidates/ (two honest, two broken) and the inline-CUDA one-shot all-reduce that the simulator
# runs on CPU ranks (tests/cuda_candidates/). Usage: benchmarks/single_gpu_scores.sh OUT_DIR
set -u
[ -f .whl/bwrap ] && chmod +x .whl/bwrap && export PKB_BWRAP=$PWD/.whl/bwrap || export PKB_NO_SANDBOX=1  # the GPU machine has no bwrap
out=${1:?usage: $0 OUT_DIR}
mkdir -p "$out/candidates"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
score() {  # score TASK CANDIDATE NAME
    pkb score --task "$1" "$2" --nproc-per-node 1 --backend nccl --timeout 240 --db "$out/results.sqlite" \
        --json > "$out/$3.json" 2> "$out/$3.err"
    rc=$?
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'exit', sys.argv[3], d['status'], \
d.get('speedup'), d.get('speedup_ci95'), d.get('reference_ms'), d.get('candidate_ms'))" "$out/$3.json" "$3" $rc \
        || tail -3 "$out/$3.err"
}
for task in allreduce_residual_rmsnorm gemm_allreduce_row_parallel all_reduce; do
    module=$(python3 -c "from tasks.registry import get; print(get('$task').module.__name__)")
    printf 'from %s import reference as solution  # the reference against itself\n' "$module" \
        > "$out/candidates/$task.py"
    score "$task" "$out/candidates/$task.py" "$task.reference"
    [ "$task" = allreduce_residual_rmsnorm ] && score allreduce_residual_rmsnorm \
        tests/gpu_candidates/fused_residual_rmsnorm.py allreduce_residual_rmsnorm.fused_rms_norm
done
score all_reduce tests/gpu_candidates/fast_all_reduce.py all_reduce.fast_all_reduce
score all_reduce tests/gpu_candidates/cuda_error.py all_reduce.cuda_error
score all_reduce tests/gpu_candidates/compile_error.py all_reduce.compile_error
score all_reduce tests/cuda_candidates/one_shot_all_reduce.py all_reduce.inline_cuda_one_shot
