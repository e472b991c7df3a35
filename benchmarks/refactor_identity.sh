#!/usr/bin/env bash
# Outputs a refactor must leave unchanged, captured into one folder so that two trees can be diffed:
#   benchmarks/refactor_identity.sh OUT_DIR
# Two known-good screens (--json), a ParallelKernelBench checkout's problem screened and run (a small fake
# checkout, as tests/test_batch.py builds it), `pkb run` on its built-in default into a fresh store, and
# `pkb report --json` and `pkb leaderboard` (table and --json) on that store. Every seed is fixed. Paths are
# replaced by <root> and <tmp>, measured seconds dropped and a batch's rows sorted (norm below). Run it twice
# on the tree before the change (some broken candidates' findings name whichever rank came first), once after,
# then benchmarks/refactor_identity_compare.py AFTER BEFORE1 BEFORE2.
# Uses the python of PYTHON (default .venv/bin/python) with this tree first on PYTHONPATH.
set -euo pipefail
out=$(realpath -m "${1:?usage: $0 OUT_DIR}")
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
cd "$tmp"
export PYTHONPATH=$root
pkb() { "$python" -m pkb.cli.main "$@"; }
# paths replaced (and the hash of a timeline's path in its name); measured seconds dropped (in notes too); JSON
# re-printed with the rows of a batch (whose order is the order its workers finished in) sorted
norm() {
    sed -E -e "s#$root#<root>#g" -e "s#$tmp#<tmp>#g" -e 's#\([0-9]+\.[0-9] s\)#(<s> s)#g' \
        -e 's#\.[0-9a-f]{8}\.json#.<path hash>.json#g' | "$python" -c '
import json, sys
text = sys.stdin.read()
def canon(x):
    if isinstance(x, dict):
        return {k: canon(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        x = [canon(v) for v in x]
        rows = all(isinstance(v, dict) and "candidate" in v for v in x)
        return sorted(x, key=lambda v: (v.get("task", ""), v["candidate"])) if x and rows else x
    return x
try:
    doc = json.loads(text)
except ValueError:
    print(text, end="")
else:
    print(json.dumps(canon(doc), indent=1))'
}
capture() {  # NAME CMD...: stdout (normalised) and exit code
    local name=$1; shift
    set +e; "$@" >"$tmp/$name.raw" 2>"$tmp/$name.err"; echo "rc=$?" >"$out/$name.rc"; set -e
    norm <"$tmp/$name.raw" >"$out/$name.out"
}

capture screen_all_reduce pkb screen --task all_reduce "$root/tasks/solutions/all_reduce.py" --world-size 4 --seed 7 --json
capture screen_reduce_scatter pkb screen --task reduce_scatter "$root/tasks/solutions/reduce_scatter.py" --world-size 4 --seed 7 --json

"$python" -c "import sys; sys.path.insert(0, '$root/tests'); import pathlib, test_batch; test_batch.fake_pkb_checkout(pathlib.Path('$tmp/pkb'))"
capture screen_pkb pkb screen --task pkb1_all_reduce "$tmp/pkb/solutions_cuda/1_all_reduce_cuda.py" --pkb-root "$tmp/pkb" --world-size 2 --seed 7 --json
capture run_pkb pkb run "$tmp/pkb/solutions_cuda" --pkb-root "$tmp/pkb" --world-size 2 --seed 1 --db "$tmp/pkb.sqlite" --json

capture run_default pkb run --seed 1 --db "$tmp/r.sqlite" --json
capture report_json pkb report --db "$tmp/r.sqlite" --json
capture leaderboard pkb leaderboard --db "$tmp/r.sqlite"
capture leaderboard_json pkb leaderboard --db "$tmp/r.sqlite" --json
echo "wrote $out"
