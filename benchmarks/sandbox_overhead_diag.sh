#!/bin/sh
# Where the candidate sandbox's time goes on the GPU machine: CUDA initialisation plus pkb's imports, in and
# out of bwrap (alternating), then `pkb score` of the all_reduce reference against itself at world size 1,
# alternating --no-sandbox and the sandbox (so that the first run's cold caches hit neither alone).
# Run by the `run` tool from the repo root with .whl carried (see sandboxed_scores.sh). Prints wall times.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
chmod +x .whl/bwrap
export PYTHONPATH=/tmp/site:$PWD PKB_BWRAP=$PWD/.whl/bwrap NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
out=${OUT:-/tmp}/diag; mkdir -p "$out"
module=$(python3 -c "from tasks.registry import get; print(get('all_reduce').module.__name__)")
printf 'from %s import reference as solution\n' "$module" > "$out/ref.py"
python3 -c "import candidate_sandbox as s; s.precompile()"
P=$(python3 -c "import candidate_sandbox as s; print(' '.join(s.prefix([], ['$out'])))")
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for i in 1 2; do
  t0=$(date +%s%N); python3 -c "import torch; torch.zeros(1, device='cuda'); import hwbackend.worker"; echo "cuda+imports outside $(ms $t0) ms"
  t0=$(date +%s%N); $P python3 -c "import torch; torch.zeros(1, device='cuda'); import hwbackend.worker"; echo "cuda+imports inside $(ms $t0) ms"
done
for m in no-sandbox sandbox no-sandbox sandbox; do
  flag=""; [ "$m" = no-sandbox ] && flag=--no-sandbox
  t0=$(date +%s%N)
  python3 -m pkb.cli.main score --task all_reduce "$out/ref.py" --nproc-per-node 1 --backend nccl --preset screen \
      --timeout 240 --db "$out/r.sqlite" --json $flag > "$out/s.json" 2> "$out/s.err"
  echo "score reference $m $(ms $t0) ms: $(python3 -c "import json; d=json.load(open('$out/s.json')); print(d['status'], d['speedup'])" 2>&1 | tail -1)"
done
