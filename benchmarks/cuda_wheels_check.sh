#!/usr/bin/env bash
# pkb's CUDA toolchain from the package index, end to end (issue 40): a fresh venv under /tmp gets the cuda
# extra's pinned NVIDIA wheels (no torch: compiling needs none); then, in a private mount namespace where the
# system toolkit is hidden (/usr/local/cuda covered, no nvcc on PATH), pkb (this repository's .venv, the
# wheels' site-packages on PYTHONPATH, no PKB_NVCC or CUDA_HOME) must find the wheels' nvcc by itself,
# compile a kernel to the same PTX as the system toolkit, and screen inline-CUDA candidates (in the sandbox)
# with the system toolkit's verdicts. Needs unprivileged user namespaces (unshare -rm) and a system toolkit
# to compare with. Prints what it measured; exit 1 on a difference. Results: docs/screening.md.
# Usage: benchmarks/cuda_wheels_check.sh [VENV_DIR (default /tmp/pkb-cuda-wheels)] [WORLD_SIZE (default 2)]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=$ROOT/.venv/bin/python
VENV=${1:-/tmp/pkb-cuda-wheels}
WS=${2:-2}
WORK=$(mktemp -d /tmp/pkb-cuda-wheels-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CANDIDATES="tests/cuda_candidates/one_shot_all_reduce.py tests/broken_candidates/all_reduce__compile_error.py"

since() { awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $1 }"; }
export -f since
# the extra's pins, read from pyproject.toml (one list to keep)
mapfile -t PINS < <("$PY" -c "import tomllib; [print(p) for p in tomllib.load(open('$ROOT/pyproject.toml','rb'))['project']['optional-dependencies']['cuda']]")
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
start=$(date +%s.%N)
"$VENV/bin/pip" install --quiet "${PINS[@]}" 2>&1 | grep -v '^WARNING: Location' || true
echo "pip install of ${#PINS[@]} pinned wheels: $(since "$start") s, $(du -sh "$VENV" | cut -f1) venv"
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")

cat > "$WORK/probe.py" <<'EOF'
"""Which nvcc pkb finds, and the PTX it makes of a kernel using CUB, with pkb's flags. The source sits at one
path for both toolchains: internal-linkage names carry a hash of it (compile_to_ptx's temporary folder would
make any two builds differ)."""
import os, subprocess, sys
from pkbsim.ptx.compile import BASE_FLAGS, TORCH_FLAGS, find_nvcc
src = ('#include <cub/cub.cuh>\n#include <cuda_fp16.h>\n__global__ void k(float* a, const __half* b, int n) {\n'
       '  typedef cub::WarpReduce<float> R; __shared__ typename R::TempStorage t;\n'
       '  int i = blockIdx.x * blockDim.x + threadIdx.x; float v = i < n ? __half2float(b[i]) : 0.f;\n'
       '  float s = R(t).Sum(v); if (threadIdx.x == 0) atomicAdd(a, s);\n}\n')
nvcc = find_nvcc()
print("nvcc", nvcc)
cu = os.path.join(os.path.dirname(sys.argv[1]), "kernel.cu")
open(cu, "w").write(src)
subprocess.run([nvcc, *BASE_FLAGS, *TORCH_FLAGS, "-o", sys.argv[1], cu], check=True)
EOF

run() {  # $1: system|wheels; runs the probe and the screens, each with a build cache of its own
  local tag=$1 cache=$WORK/cache-$1
  if [ "$tag" = wheels ]; then
    local cuda; cuda=$(readlink -f /usr/local/cuda)
    # hide the system toolkit: its folder covered, nvcc on PATH replaced by /dev/null (not executable)
    unshare -rm bash -c "mount -t tmpfs none '$cuda' && for n in \$(type -ap nvcc); do mount --bind /dev/null \"\$n\"; done
      cd '$ROOT' && env -u PKB_NVCC -u CUDA_HOME PYTHONPATH='$SITE' PKB_CACHE_DIR='$cache' bash -c 'body $tag'"
  else
    (cd "$ROOT" && PKB_CACHE_DIR=$cache body "$tag")
  fi
}
body() {
  local tag=$1
  $PY "$WORK/probe.py" "$WORK/$tag.ptx"
  for c in $CANDIDATES; do
    local t0; t0=$(date +%s.%N)
    local v; v=$(.venv/bin/pkb screen "$c" --task all_reduce --world-size "$WS" --no-cost --seed 1 --json 2>/dev/null \
      | $PY -c "import json,sys; d=json.load(sys.stdin); r=d.get('reasons') or [{}]; print(d.get('verdict'), d.get('stage'), r[0].get('kind'), r[0].get('message'))" || true)
    echo "screen $(basename "$c"): $v ($(since "$t0") s)"
  done
}
export -f body
export PY WORK CANDIDATES WS ROOT

echo "== system toolkit"; run system | tee "$WORK/system.txt"
echo "== wheels, system toolkit hidden"; run wheels | tee "$WORK/wheels.txt"
status=0
# -lineinfo names each header by its path: those .file lines differ by the toolkit's folder alone
code() { grep -v '^[[:space:]]*\.file' "$1"; }
files=$(diff <(grep '^[[:space:]]*\.file' "$WORK/system.ptx") <(grep '^[[:space:]]*\.file' "$WORK/wheels.ptx") | grep -c '^<' || true)
if cmp -s <(code "$WORK/system.ptx") <(code "$WORK/wheels.ptx"); then
  echo "PTX: identical ($(wc -c < "$WORK/system.ptx") bytes) but for $files .file lines naming the toolkit's folder"
else echo "PTX: DIFFERENT"; diff <(code "$WORK/system.ptx") <(code "$WORK/wheels.ptx") | head -20; status=1; fi
v() { grep '^screen' "$1" | sed 's/ ([0-9.]* s)$//'; }
if [ "$(v "$WORK/system.txt")" = "$(v "$WORK/wheels.txt")" ]; then echo "verdicts: identical"
else echo "verdicts: DIFFERENT"; status=1; fi
grep -q "^nvcc $SITE/nvidia/cu13/bin/nvcc$" "$WORK/wheels.txt" || { echo "the wheels' nvcc was not the one found"; status=1; }
exit $status
