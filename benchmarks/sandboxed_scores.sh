#!/bin/sh
# `pkb score` inside the candidate sandbox on one GPU (world size 1, NCCL, screen size): the reference against
# itself, an honest candidate, a background-thread candidate, a timer-patching candidate and an inline-CUDA
# candidate, each with the sandbox and then with --no-sandbox (wall time of each score, to price isolation).
# Run by the `run` tool from the repo root with .whl carried: the wheels pkb needs there and `bwrap` (Debian's
# build of bubblewrap: the GPU machine has none; it needs only libc, libcap, libselinux, libpcre2).
#   sh benchmarks/sandboxed_scores.sh OUT_DIR     (MODES="sandbox" for the sandboxed half only)
set -u
out=${1:?usage: $0 OUT_DIR}
. benchmarks/gpu_env.sh
reference_candidate "$out/candidates"
for mode in ${MODES:-sandbox no-sandbox}; do
  flag=""; [ "$mode" = no-sandbox ] && flag=--no-sandbox
  for pair in reference:$out/candidates/reference.py honest:tests/gpu_candidates/fast_all_reduce.py \
              background_thread:tests/candidates/background_thread.py patch_timers:tests/candidates/patch_timers.py \
              inline_cuda:tests/cuda_candidates/one_shot_all_reduce.py; do
    name=${pair%%:*}; file=${pair#*:}
    t0=$(date +%s.%N)
    python3 -m pkb.cli.main score --task all_reduce "$file" --nproc-per-node 1 --backend nccl --preset screen \
        --timeout 240 --db "$out/results-$mode.sqlite" --json $flag > "$out/$name.$mode.json" 2> "$out/$name.$mode.err"
    rc=$?
    t1=$(date +%s.%N)
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], 'exit', sys.argv[4], \
'wall %.1f s' % (float(sys.argv[6]) - float(sys.argv[5])), d['status'], d.get('speedup'), \
[f['message'][:90] for f in d.get('findings', [])][:2])" "$out/$name.$mode.json" "$name" "$mode" $rc "$t0" "$t1" \
      || { echo "$name $mode exit $rc"; tail -3 "$out/$name.$mode.err"; }
  done
done
