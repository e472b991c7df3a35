# Sourced by the benchmarks' GPU scripts (run from the repo root on a lent GPU machine, .whl carried): the
# wheels pkb needs there, Debian's bwrap for the candidate sandbox, and NVLink multicast off as that machine
# has it.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
chmod +x .whl/bwrap
export PYTHONPATH=/tmp/site:$PWD PKB_BWRAP=$PWD/.whl/bwrap
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# all_reduce's reference as a candidate file (the reference against itself): reference_candidate DIR
reference_candidate() {
  mkdir -p "$1"
  module=$(python3 -c "from tasks.registry import get; print(get('all_reduce').module.__name__)")
  printf 'from %s import reference as solution  # the reference against itself\n' "$module" > "$1/reference.py"
}
