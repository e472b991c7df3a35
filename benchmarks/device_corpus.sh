#!/bin/sh
# Screen ParallelKernelBench trees on the lent GPU machine's CPU cores (the screen is CPU work; the GPU is
# hidden so the process is what it is on a laptop). Run by the `run` tool from the repo root with
# .whl (simpy, pydantic...) and .pkbdata/<checkout> carried; the stores in .pkbruns resume a stopped run.
#   sh benchmarks/device_corpus.sh CHECKOUT SECONDS WORKERS_PER_TREE TREE...
set -u
[ -f .whl/bwrap ] && chmod +x .whl/bwrap && export PKB_BWRAP=$PWD/.whl/bwrap || export PKB_NO_SANDBOX=1  # the GPU machine has no bwrap
root=$1; secs=$2; workers=$3; shift 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PKB_CACHE_DIR=/tmp/pkbcache CUDA_VISIBLE_DEVICES=
printf '#!/bin/sh\nexec python3 -m pkb.cli.main "$@"\n' > /tmp/pkb && chmod +x /tmp/pkb
mkdir -p .pkbruns
for tree in "$@"; do
  name=$(basename "$tree")
  timeout "$secs" python3 benchmarks/pkb_corpus.py --pkb-root "$root" --pkb /tmp/pkb --out-dir .pkbruns \
      --json ".pkbruns/$name.json" --workers="$workers" "$tree" > ".pkbruns/$name.log" 2>&1 &
done
wait
nproc; uptime
tail -n 5 .pkbruns/*.log
cp -r .pkbruns "${OUT:-/tmp}/"
