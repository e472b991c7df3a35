#!/bin/sh
# The scorer's clock cross-check on one GPU (world size 1, NCCL, all_reduce at full size, sandboxed): the
# reference against itself, two honest candidates, and candidates that patch the time source the worker uses
# (the Guard's timer code, the Guard's clock and events through gc, the reported seconds, torch.cuda.Event.
# elapsed_time, and a subtle 20% shave). Prints per score: status, speed-up, noise margin, the clock check
# (median unexplained share of a batch, and the tolerance) and the first findings. What to expect: the
# reference and the honest ones with no "scorer's clock" finding; every patch "integrity", except that the 20%
# shave may pass unseen where its tolerance is above 0.2, and then must not be "faster".
# Run from the repo root on the GPU machine with .whl carried (the wheels pkb needs and Debian's `bwrap`), as
# benchmarks/sandboxed_scores.sh does:
#   sh benchmarks/timing_integrity_gpu.sh OUT_DIR [CALLS]      (CALLS per timed batch, default 4)
set -u
out=${1:?usage: $0 OUT_DIR [CALLS]}
calls=${2:-4}
. benchmarks/gpu_env.sh
reference_candidate "$out/candidates"
for pair in reference:$out/candidates/reference.py honest_skip:tests/gpu_candidates/fast_all_reduce.py \
            honest_sleeper:tests/clock_candidates/honest_sleeper.py \
            swap_timer_code:tests/clock_candidates/swap_timer_code.py \
            slow_guard_clock:tests/clock_candidates/slow_guard_clock.py \
            rewrite_reported_seconds:tests/clock_candidates/rewrite_reported_seconds.py \
            patch_elapsed_time:tests/gpu_candidates/patch_elapsed_time.py \
            shave_event_time:tests/gpu_candidates/shave_event_time.py; do
  name=${pair%%:*}; file=${pair#*:}
  python3 -m pkb.cli.main score --task all_reduce "$file" --nproc-per-node 1 --backend nccl --preset full \
      --calls "$calls" --timeout 300 --json > "$out/$name.json" 2> "$out/$name.err"
  rc=$?
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); c=d.get('clock_check') or {}; \
print(sys.argv[2], 'exit', sys.argv[3], d['status'], 'speedup', d.get('speedup') and round(d['speedup'], 3), \
'noise', d.get('noise_margin') and round(d['noise_margin'], 3), 'unexplained', c.get('unexplained') and round(c['unexplained'], 4), \
'tolerance', c.get('tolerance') and round(c['tolerance'], 4), 'ref_ms', d.get('reference_ms'), 'cand_ms', d.get('candidate_ms'), \
[f['message'][:160] for f in d.get('findings', [])][:2])" "$out/$name.json" "$name" $rc \
    || { echo "$name exit $rc"; tail -3 "$out/$name.err"; }
done
