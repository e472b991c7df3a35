#!/bin/sh
# Issue 39 on one GPU (world size 1, NCCL, all_reduce at screen size, every score inside the candidate
# sandbox): the reference against itself 5 times (never "faster"), an honest candidate, then the cheaters
# that can run at world size 1 with their honest twins. One line per score into OUT/scores.txt, as each ends;
# no new score starts past BUDGET_S seconds (the device call's limit). Run by the `run` tool from the repo
# root with .whl carried (gpu_env.sh):   sh benchmarks/trust_gpu.sh OUT_DIR
set -u
out=${1:?usage: $0 OUT_DIR}
. benchmarks/gpu_env.sh
reference_candidate "$out/candidates"
start=$(date +%s)
n=0
for pair in ref1:$out/candidates/reference.py ref2:$out/candidates/reference.py ref3:$out/candidates/reference.py \
            ref4:$out/candidates/reference.py ref5:$out/candidates/reference.py \
            honest:tests/gpu_candidates/fast_all_reduce.py \
            rewrite_guard_checks:tests/candidates/rewrite_guard_checks.py \
            rewrite_guard_checks_honest:tests/candidates/rewrite_guard_checks_honest.py \
            plant_fifo_outputs:tests/candidates/plant_fifo_outputs.py \
            patch_timers:tests/candidates/patch_timers.py \
            background_thread:tests/candidates/background_thread.py \
            plant_fifo_outputs_honest:tests/candidates/plant_fifo_outputs_honest.py; do
  [ $(( $(date +%s) - start )) -gt "${BUDGET_S:-500}" ] && { echo "stopped before $pair: budget" >> "$out/scores.txt"; break; }
  name=${pair%%:*}; file=${pair#*:}; n=$((n + 1))
  t0=$(date +%s.%N)
  python3 -m pkb.cli.main score --task all_reduce "$file" --nproc-per-node 1 --backend nccl --preset screen \
      --timeout 240 --db "$out/results.sqlite" --json > "$out/$n.json" 2> "$out/$n.err"
  rc=$?
  t1=$(date +%s.%N)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'exit', sys.argv[3], \
'wall %.1f s' % (float(sys.argv[5]) - float(sys.argv[4])), d['status'], d.get('speedup'), \
[f['message'][:110] for f in d.get('findings', [])][:2])" "$out/$n.json" "$name" $rc "$t0" "$t1" >> "$out/scores.txt" \
    || { echo "$name exit $rc: $(tail -2 "$out/$n.err" | tr '\n' ' ')" >> "$out/scores.txt"; }
done
cat "$out/scores.txt"
