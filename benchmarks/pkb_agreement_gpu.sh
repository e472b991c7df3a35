#!/bin/sh
# The GPU half of benchmarks/pkb_agreement.py on a lent GPU machine, run by the `run` tool from the repo root
# with .whl (the wheels pkb needs there, and a bwrap binary for the candidate sandbox) and .pkbdata (a copy
# of a ParallelKernelBench checkout's reference/, utils/ and development trees, plus an earlier call's
# gpu.jsonl to resume from) carried:
#   sh benchmarks/pkb_agreement_gpu.sh OUT_DIR NPROC JOBS DEADLINE_S TREE...
set -u
out=${1:?usage: $0 OUT_DIR NPROC JOBS DEADLINE_S TREE...}; nproc=$2; jobs=$3; deadline=$4; shift 4
. benchmarks/gpu_env.sh
[ -f .pkbdata/gpu.jsonl ] && cp .pkbdata/gpu.jsonl "$out/gpu.jsonl"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
command -v nvcc || ls /usr/local/cuda/bin/nvcc
python3 benchmarks/pkb_agreement.py gpu --pkb-root .pkbdata/pkb_dab --out "$out/gpu.jsonl" --nproc-per-node "$nproc" \
    --jobs "$jobs" --deadline "$deadline" --timeout 300 "$@" 2> "$out/progress.log"
tail -3 "$out/progress.log"
wc -l "$out/gpu.jsonl"
