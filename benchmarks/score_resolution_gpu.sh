#!/bin/sh
# The scorer's resolution on one GPU at world size 1, as run by the `run` tool from the repo root with .whl
# and .pkbdata carried (.pkbdata/pkb_head: ParallelKernelBench HEAD's reference/, utils/, run_local.py):
#   sh benchmarks/score_resolution_gpu.sh OUT STEPS [SELF_FROM SELF_TO | FILE ...]
# STEPS, any of: noise (host_bound_noise.py as it comes, pinned to one core, its main thread alone pinned; the CPU facts),
# lottery (each CPU's speed; five short processes each free, pinned and main-thread-pinned: their medians),
# overhead (the per-call clock overhead of every reference, score_clock_overhead.py),
# synthetic (a 5%-faster and a 2%-slower candidate and the reference itself, synthetic_speedups.py, each
# scored), self (the references of 10-100 us by the batch clock scored against themselves, the sampled
# problems SELF_FROM..SELF_TO of results/score_resolution/self_sample.txt, the list a first overhead step printed, or of
# SAMPLE="pkb12_allgather_gemm ..." where given), harness (FILEs of .pkbdata/pkb_dab's
# trees: ParallelKernelBench's own clock, harness_speedups.py, then `pkb score` of the first DEV_SCORES (10) it
# times consistently). INTERLEAVE=1 gives each score --interleave (the jobs taking turns), GRAPHS=1 --graphs (each
# timed batch one CUDA graph replay). Every score is
# `pkb score --json` with the default protocol; its wall time is printed beside it. NPROC=8 scores on 8 GPUs
# (the overhead and harness clocks are of one GPU).
set -u
out=${1:?usage: $0 OUT STEPS [SELF_FROM SELF_TO]}; steps=${2:?}
. benchmarks/gpu_env.sh
head=$PWD/.pkbdata/pkb_head

score() {  # score NAME CANDIDATE ROOT
  t0=$(date +%s.%N)
  python3 -m pkb.cli.main score "$2" --pkb-root "$3" --nproc-per-node "${NPROC:-1}" ${INTERLEAVE:+--interleave} ${GRAPHS:+--graphs} \
    --json > "$out/score.$1.json" \
    2> "$out/score.$1.err"
  rc=$?; t1=$(date +%s.%N)
  python3 - "$out/score.$1.json" "$1" "$rc" "$t0" "$t1" <<'EOF' | tee -a "$out/scores.txt"
import json, sys
path, name, rc, t0, t1 = sys.argv[1:]
try:
    d = json.load(open(path))
except ValueError:
    print(f"{name}: no result (exit {rc})"); sys.exit()
ci = d.get("speedup_ci95") or [0, 0]
clock = d.get("clock_check") or {}
print(f"{name}: {d['status']} {d.get('speedup') or 0:.4f}x CI {ci[0]:.4f}-{ci[1]:.4f} margin {d.get('noise_margin') or 0:.2%}"
      f" ref {d.get('reference_ms') or 0:.4f} ms cand {d.get('candidate_ms') or 0:.4f} ms wall {float(t1) - float(t0):.1f} s"
      f" tolerance {clock.get('tolerance') or 0:.2%} timed as {clock.get('timed_as', 'eager')}"
      f" calls {(clock.get('batches') or [{}])[0].get('calls')}")
EOF
}

case " $steps " in *" overhead "*)
  python3 benchmarks/score_clock_overhead.py --pkb-root "$head" --budget-s "${OVERHEAD_BUDGET_S:-240}" \
    --out "$out/clock_overhead.json" \
    2>&1 | grep -v Warning | tee "$out/clock_overhead.txt" | tail -40 ;;
esac
case " $steps " in *" noise "*)
  { nproc; lscpu | grep -iE 'model name|thread|socket|numa|mhz'; cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor;
    uptime; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,persistence_mode --format=csv; } > "$out/noise_env.txt" 2>&1
  python3 benchmarks/host_bound_noise.py --rounds "${NOISE_ROUNDS:-20}" > "$out/noise_free.jsonl" 2> "$out/noise_free.err"
  python3 benchmarks/host_bound_noise.py --rounds "${NOISE_ROUNDS:-20}" --pin 3 > "$out/noise_pin3.jsonl" 2> "$out/noise_pin3.err"
  python3 benchmarks/host_bound_noise.py --rounds "${NOISE_ROUNDS:-20}" --pin-main 3 > "$out/noise_main3.jsonl" 2> "$out/noise_main3.err"
  grep summary "$out"/noise_*.jsonl ;;
esac
case " $steps " in *" lottery "*)  # how far a process's own offset moves its median: short processes, free and pinned
  python3 benchmarks/host_bound_noise.py --rounds 1 --cpu-scan --kinds add > "$out/cpu_scan.jsonl" 2>/dev/null
  for mode in free pin main; do
    flag=""; [ $mode = pin ] && flag="--pin 3"; [ $mode = main ] && flag="--pin-main 3"
    for i in 1 2 3 4 5; do
      python3 benchmarks/host_bound_noise.py --rounds 2 --kinds allgather,add $flag 2>/dev/null | grep summary \
        | sed "s/^/$mode $i /" | tee -a "$out/lottery.txt"
    done
  done ;;
esac
case " $steps " in *" synthetic "*)
  python3 benchmarks/synthetic_speedups.py /tmp/synthetic | tee "$out/synthetic.json"
  for name in faster slower reference; do score "synthetic_$name" /tmp/synthetic/solutions/1_spin_$name.py /tmp/synthetic; done ;;
esac
case " $steps " in *" self "*)
  from=${3:-1}; to=${4:-10}
  # the sample a first overhead run chose (kept in the repository), else the one this run's printed
  sample=${SAMPLE:-$(cat benchmarks/results/score_resolution/self_sample.txt 2>/dev/null || true)}
  [ -n "$sample" ] || sample=$(sed -n 's/^references of .* by the batch clock ([0-9]*): //p' "$out/clock_overhead.txt")
  i=0
  for slug in $sample; do
    i=$((i + 1)); [ $i -lt "$from" ] || [ $i -gt "$to" ] && continue
    file=$(ls "$head/reference/" | grep "^${slug#pkb}\.py$")
    score "self_$slug" "$head/reference/$file" "$head"
  done ;;
esac
case " $steps " in *" harness "*)
  shift 2
  python3 benchmarks/harness_speedups.py --pkb-root "$head" "$@" 2>"$out/harness.err" | tee "$out/harness.jsonl"
  # only the files the harness's clock times consistently are scored (at most DEV_SCORES of them)
  consistent=$(python3 -c 'import json, sys; [print(r["file"]) for r in map(json.loads, open(sys.argv[1])) if r.get("consistent")]' \
    "$out/harness.jsonl" | head -n "${DEV_SCORES:-10}")
  for f in "$@"; do  # named by tree (its model and language) and file: trees share file names
    tree=$(basename "$(dirname "$f")" | sed 's/^solutions_\([a-z]*\)_.*_\([a-z]*\)-.*$/\2_\1/')
    echo "$consistent" | grep -qxF "$f" && score "dev_${tree}_$(basename "$f" .py)" "$f" "$head"
  done ;;
esac
