#!/bin/sh
# Wall time of one full-size score: ParallelKernelBench's own harness (run_local.py --mode eval --measure-perf,
# its 5 trials) against `pkb score` (default protocol: 3 trials, 2 launches of 4 timed batches of 4 calls,
# bootstrap interval), same checkout, same solution files, one GPU, run one after the other. pkb score's
# progress lines are stamped with the seconds since it started, to show where its time goes.
# Run by the `run` tool from the repo root with .whl and .pkbdata (pkb_head: HEAD's run_local.py, utils/,
# reference/, scripts/; pkb_dab: the solution trees) carried:
#   sh benchmarks/pkb_score_vs_harness.sh OUT_DIR TREE:FILE [TREE:FILE ...]
set -u
out=${1:?usage: $0 OUT_DIR TREE:FILE ...}; shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
chmod +x .whl/bwrap
export PKB_BWRAP=$PWD/.whl/bwrap NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
head=$PWD/.pkbdata/pkb_head
for pair in "$@"; do
  tree=$PWD/${pair%%:*}; file=${pair#*:}
  stem=${file%.py}; backend=${stem##*_}; problem=${stem%%_*}
  t0=$(date +%s.%N)
  (cd "$head" && python3 run_local.py --mode eval -p "$problem" -s "$backend" --nproc-per-node 1 --measure-perf \
      --solutions-dir "$tree" --logs-dir /tmp/pkb-harness-logs) > "$out/harness.$stem.log" 2>&1
  rc=$?; t1=$(date +%s.%N)
  echo "$stem harness exit $rc wall $(python3 -c "print(round($t1 - $t0, 1))") s"
  grep -iE "speedup|correct|pass|fail" "$out/harness.$stem.log" | tail -4
  t0=$(date +%s.%N)
  PYTHONPATH=/tmp/site:$PWD python3 -m pkb.cli.main score "$tree/$file" --pkb-root "$head" --nproc-per-node 1 \
      --db /tmp/pkb-vs-harness.sqlite > "$out/pkb.$stem.txt" 2> "$out/pkb.$stem.err"
  rc=$?; t1=$(date +%s.%N)
  echo "$stem pkb-score exit $rc wall $(python3 -c "print(round($t1 - $t0, 1))") s: $(tail -1 "$out/pkb.$stem.txt")"
done
