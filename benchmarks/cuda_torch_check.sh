#!/usr/bin/env bash
# Issue 40, "any machine, as it comes": pkb on what `pip install torch==2.13.0` gives an ordinary machine without
# a GPU, the CUDA build of torch (about 2.7 GB of wheels, triton 3.7), with no CUDA toolkit. CI (.ci/run) tests
# the other combination only: the CPU build of torch, triton 3.6, the system toolkit where the machine has one.
# This script, run by hand (the install does not fit CI's time), tests this one:
#   1. a fresh venv gets torch 2.13.0 from the public index (this machine's pip configuration, which finds a CPU
#      build on local disk, is bypassed: PIP_CONFIG_FILE=/dev/null, no PIP_FIND_LINKS), then the README's two
#      installs (`-e '.[cuda]'`, `-e '.[test]'`): NVIDIA's nvcc wheels;
#   2. in a private mount namespace where the system toolkit is hidden (its folder under a tmpfs, every nvcc on
#      PATH bound to /dev/null; no PKB_NVCC or CUDA_HOME), the README's two commands: `pkb run` (into a store of
#      its own) and the whole test suite on two processes (skip it with SUITE=0);
#   3. a sample of ParallelKernelBench solution files (inline CUDA and Triton) screened in that namespace and
#      with this repository's .venv (CPU build, triton 3.6, system toolkit), each side with an empty build
#      cache, and the verdicts compared;
#   4. an extension calling cuBLAS (tests/programs/cuda_cublas_call.py) under `pkb check` with the system toolkit
#      visible: with the fresh venv (the wheel's cuBLAS headers beside a toolkit without them) it must end "not
#      simulated" naming the call, with .venv (no real cuBLAS header anywhere) "missing header cublas_v2.h";
#      both inconclusive (exit 6), never the program's fault.
# Exit 1 when a command fails or a verdict differs. Results: docs/device_code.md ("Either build of torch").
# Usage: benchmarks/cuda_torch_check.sh [VENV (default /tmp/pkb-cuda-torch)] [PKB_ROOT (a ParallelKernelBench
#        checkout, default .pkbdata/pkb_head)] [TREES (default .pkbdata/pkb_dab)]
# Environment: WS (ranks, default 4), SUITE (1: run the test suite, default), RUN (1: run `pkb run`, default),
# SAMPLE (files relative to TREES, space-separated; default below; "" skips step 3), CPU_VENV (the CPU build's venv
# with this checkout installed, default .venv), INSTALL (1: step 1, default), CUBLAS (1: step 4, default).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-/tmp/pkb-cuda-torch}
PKB_ROOT=$(readlink -f "${2:-$ROOT/.pkbdata/pkb_head}")
TREES=$(readlink -f "${3:-$ROOT/.pkbdata/pkb_dab}")
WS=${WS:-4}
SUITE=${SUITE:-1}
RUN=${RUN:-1}
INSTALL=${INSTALL:-1}
CUBLAS=${CUBLAS:-1}
CPU_VENV=$(readlink -f "${CPU_VENV:-$ROOT/.venv}")
OPUS=solutions_cuda_bf16_h100_8_anthropic_claude-opus-4-7
GEMINI=solutions_cuda_bf16_h100_8_google_gemini-3-pro-preview
TRITON=solutions_triton_bf16_h100_8_google_gemini-3-pro-preview
SAMPLE=${SAMPLE-"$OPUS/1_allreduce_cuda.py $OPUS/2_allgather_cuda.py $OPUS/18_rms_norm_cuda.py
  $GEMINI/10_embedding_lookup_cuda.py $GEMINI/18_tp_rms_norm_cuda.py $GEMINI/2_allgather_cuda.py
  $TRITON/1_allreduce_triton.py $TRITON/2_allgather_triton.py $TRITON/10_embedding_lookup_triton.py
  $TRITON/18_tp_rms_norm_triton.py $TRITON/21_clip_grad_norm_no_ep_triton.py $TRITON/13_gemm_allreduce_triton.py"}
WORK=$(mktemp -d /tmp/pkb-cuda-torch-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
status=0
since() { awk "BEGIN { printf \"%.0f\", $(date +%s.%N) - $1 }"; }

if [ "$INSTALL" = 1 ]; then
  echo "== 1. install (public index, pip configuration bypassed)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  pipx() { env -u PIP_FIND_LINKS -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null "$VENV/bin/pip" install --quiet \
             --index-url https://pypi.org/simple "$@" 2>&1 | grep -v '^WARNING: Location' || true; }
  t0=$(date +%s.%N)
  (cd "$ROOT" && pipx torch==2.13.0 -e '.[cuda]' && pipx torch==2.13.0 -e '.[test]')
  echo "installed in $(since "$t0") s: $(du -sh "$VENV" | cut -f1) venv"
fi
"$VENV/bin/python" -c "import torch, triton; print('torch', torch.__version__, 'CUDA', torch.version.cuda, '| triton', triton.__version__)"
"$CPU_VENV/bin/python" -c "import torch, triton; print('(CPU_VENV: torch', torch.__version__, 'CUDA', torch.version.cuda, '| triton', triton.__version__, ')')"

screens() {  # $1: python of the side; prints "file<TAB>verdict<TAB>stage<TAB>kind<TAB>seconds<TAB>message" per file
  local py=$1 f
  for f in $SAMPLE; do
    local t; t=$(date +%s.%N)
    local v; v=$("$(dirname "$py")/pkb" screen "$TREES/$f" --pkb-root "$PKB_ROOT" --world-size "$WS" --seed 1 --json 2>/dev/null \
      | "$py" -c "import json,sys; d=json.load(sys.stdin); r=(d.get('reasons') or [{}])[0]; print(d.get('verdict'), d.get('stage'), r.get('kind'), ' '.join(str(r.get('message', '')).split())[:90], sep='\t')" 2>/dev/null \
      || printf 'no-result\t-\t-\t-')
    printf '%s\t%s\t%s\n' "$f" "$(cut -f1-3 <<< "$v")" "$(since "$t")	$(cut -f4 <<< "$v")"
  done
}
hidden() {  # run "$@" with the system toolkit hidden, in a private mount namespace
  local cuda; cuda=$(readlink -f /usr/local/cuda 2>/dev/null || true)
  unshare -rm bash -c 'cuda=$1; shift
    [ -n "$cuda" ] && [ -d "$cuda" ] && mount -t tmpfs none "$cuda"
    for n in $(type -ap nvcc); do mount --bind /dev/null "$n"; done
    exec env -u PKB_NVCC -u CUDA_HOME "$@"' hidden "$cuda" "$@"
}
export -f screens since
export SAMPLE TREES PKB_ROOT WS

echo "== 2. the README's commands, system toolkit hidden"
hidden "$VENV/bin/python" -c "from pkbsim.ptx.compile import find_nvcc; print('nvcc found:', find_nvcc())"
if [ "$RUN" = 1 ]; then
  t0=$(date +%s.%N)
  (cd "$ROOT" && hidden env PKB_CACHE_DIR="$WORK/cache-run" "$VENV/bin/pkb" run --db "$WORK/run.sqlite") > "$WORK/run.txt" 2>&1
  rc=$?; tail -n 25 "$WORK/run.txt"; echo "pkb run: exit $rc, $(since "$t0") s"; [ $rc = 0 ] || status=1
fi
if [ "$SUITE" = 1 ]; then
  t0=$(date +%s.%N)
  (cd "$ROOT" && hidden "$VENV/bin/python" -m pytest -p no:cacheprovider -m "slow or not slow" -n 2 -q) > "$WORK/suite.txt" 2>&1
  rc=$?; grep -E "^(FAILED|ERROR)|passed|failed" "$WORK/suite.txt" | tail -n 30; echo "test suite: exit $rc, $(since "$t0") s"
  [ $rc = 0 ] || status=1
fi

if [ -n "$SAMPLE" ]; then
  echo "== 3. sample screens at $WS ranks: CUDA build, triton 3.7, toolkit hidden | CPU build, triton 3.6, system toolkit"
  (cd "$ROOT" && hidden env PKB_CACHE_DIR="$WORK/cache-cuda" bash -c "screens '$VENV/bin/python'") | tee "$WORK/cuda.txt"
  echo "--"
  (cd "$ROOT" && PKB_CACHE_DIR="$WORK/cache-cpu" bash -c "screens '$CPU_VENV/bin/python'") | tee "$WORK/cpu.txt"
  python3 - "$WORK/cuda.txt" "$WORK/cpu.txt" <<'PY' || status=1
import sys
rows = [[ln.rstrip("\n").split("\t") for ln in open(p) if ln.strip()] for p in sys.argv[1:]]
print("| file | CUDA build, triton 3.7, wheels' nvcc | s | CPU build, triton 3.6, system nvcc | s | same |")
print("|---|---|---|---|---|---|")
same = len(rows[0]) == len(rows[1])
def name(f):
    tree, file = f.split("/", 1)
    return f"{tree.split('_')[-1]} {tree.split('_')[1]}: {file}"
for a, b in zip(*rows):
    eq = a[:4] == b[:4]
    same &= eq
    print(f"| {name(a[0])} | {' '.join(a[1:4])} | {a[4]} | {' '.join(b[1:4])} | {b[4]} | {'yes' if eq else 'NO'} |")
for a in rows[0]:
    print(f"  {name(a[0])}: {a[5] if len(a) > 5 else ''}")
print("verdicts:", "identical" if same else "DIFFERENT")
sys.exit(0 if same else 1)
PY
fi

[ "$CUBLAS" = 1 ] && echo "== 4. an extension calling cuBLAS, system toolkit visible"
for py in $([ "$CUBLAS" = 1 ] && echo "$VENV/bin/python $CPU_VENV/bin/python"); do
  out=$(cd "$ROOT" && PKB_CACHE_DIR="$WORK/cache-cublas" "$(dirname "$py")/pkb" check --nproc-per-node 1 \
        tests/programs/cuda_cublas_call.py 2>&1); rc=$?
  echo "$py: exit $rc: $(grep -m1 -E "^(NOT SIMULATED|ERROR|REJECT)" <<< "$out")"
  [ $rc = 6 ] || status=1
done
exit $status
