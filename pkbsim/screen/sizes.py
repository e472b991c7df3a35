"""Stage 3, sizes: the candidate at larger sizes than the screen's, up to the benchmark's own (issue 41).

The functional stage runs a ParallelKernelBench problem at a 64 x 64 base shape; the benchmark's harness runs it
at 1024 x 1024 (`--m`, `--n`: its problems take any base shape). Two kinds of fault hide in between:

- a branch the screen's size never takes (a candidate that chunks its GEMM only when M > 512, with a chunk offset
  that ignores the chunk's first row): the sizes keep one side at the full size and the other at the screen's,
  so a threshold on either side is crossed for a sixteenth of the full size's work;
- arithmetic that leaves a few elements in a million beyond the tolerance (a product rounded once where the
  reference rounds three times, a multiply by a rounded reciprocal where the reference divides): only the
  number of elements shows it, so the last sizes are the half and the full size, on the benchmark's own trial 0.

Each size is one call in a world of its own at the screen's world size (candidate_side._sizes), then the
reference at the same size and trial here, compared by the task's tolerance. Sizes run in order of elements
while the budget (`SIZES_SECONDS` of the candidate's runs) lasts, each run's time predicting the next's; a
size beyond the budget, a limit of pkb, or a reference beyond its budgets ends the stage with a note, never a
reject. A problem whose inputs do not grow with the size (every size's inputs repeat the screen's) then
runs the benchmark's trials 3 and 4, which the functional stage did not, and fresh draws while the budget lasts.

A verdict: "numerics" when the elements beyond the tolerance are a small share of an output, finite, (a rounding
difference, which the full size shows and the screen's size does not); else "wrong_output_at_size". At a size
the benchmark never runs, errors that are rounding alone (finite, each within NEAR_TOLERANCE times its element's
tolerance) are a note and the stage goes on: the tolerance is the benchmark's at its own size, and a problem's
values may scale with the size (a layernorm's rows normalised by their length), so more exact arithmetic than
the reference's can cross it there and not at the full size (gemini-3-pro 9, scored correct on a GPU). On trials
0-4 both reject under both rule sets: at the full size the benchmark's harness itself runs these inputs with
this tolerance; a smaller size stands in for it as the screen's own size does (the functional stage's first
call rejects under both too). On a later draw, pkb's rules alone (its scorer draws fresh inputs). Only ParallelKernelBench problems (budgeted tasks: their inputs and reference are bounded at any
size) have the stage.
"""
from __future__ import annotations

import math

import torch

from pkbsim.screen.limits import limit_of
from pkbsim.screen.plain import plain
from pkbsim.screen.result import Reason, ReasonKind
from pkbsim.taskrun import Call, mismatches, run_calls
from tasks.parallelkernelbench.compare import ATOL, RTOL, _isclose
from tasks.registry import TaskSpec

NUMERICS_SHARE = 0.01  # at most this share of an output's elements beyond the tolerance: a rounding difference
NEAR_TOLERANCE = 4.0   # an error at most this many times its element's tolerance: rounding, not a wrong result
LAST_TRIAL = 4         # the benchmark's harness runs trials 0-4 (run_local.py --trials, default 5)
LAST_DRAW = 500        # a problem whose inputs do not grow runs up to 496 more draws (pkb's scorer draws its own)
DRAW_BYTES = 256 << 20  # and stops drawing once the outputs it hands back hold this much
SCREEN = {"m": 64, "n": 64}


def ladder(task: TaskSpec) -> list[list[int]]:
    """[m, n] base shapes, by elements: each side full with the other at the screen's, then half, then full size
    (powers of two of a problem's own sizes keep its divisibility). Empty when the presets are not m x n."""
    screen, full = task.sizes.get("screen", {}), task.sizes.get("full", {})
    if set(screen) != {"m", "n"} or set(full) != {"m", "n"}:
        return []
    sm, sn, fm, fn = screen["m"], screen["n"], full["m"], full["n"]
    out = []
    for m, n in ((fm, sn), (sm, fn), (fm // 2, fn // 2), (fm, fn)):
        if [m, n] not in out and (m, n) != (sm, sn) and m >= sm and n >= sn:
            out.append([m, n])
    return sorted(out, key=lambda s: s[0] * s[1])


def elements(size) -> int:
    """A base shape's elements (None: the screen's)."""
    m, n = size if size is not None else (SCREEN["m"], SCREEN["n"])
    return m * n


def nbytes(x) -> int:
    """Bytes of the tensors in plain outputs."""
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, dict):
        return sum(nbytes(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    return 0


def describe(size) -> str:
    return f"size {size[0]} x {size[1]}"


def reference_at(task: TaskSpec, size: list[int], trial: int, world_size: int, seed: int, timeout: float) -> list | None:
    """The reference's outputs (plain, per rank) at one size and trial, in a world of its own; None where it did
    not finish cleanly (judge_sizes then runs it again, and says why)."""
    run = run_calls(task, [Call(trial, size={"m": size[0], "n": size[1]})], world_size, seed=seed, timeout=timeout,
                    keep_inputs=False, shape_run=False)
    if run.result.verdict != "ok" or run.raised or not run.calls or not run.calls[0].complete:
        return None
    return [plain(o) for o in run.calls[0].outputs]


def judge_sizes(task: TaskSpec, sized: list[dict], world_size: int, seed: int, timeout: float,
                known: dict | None = None) -> tuple[list[Reason], list[str]]:
    """(reasons, notes): the candidate's runs at each size against the reference's at the same sizes and trials:
    `known` ones ((m, n, trial) -> outputs, from `reference_at` while the candidate's process ran), the others run
    here in one world (under `timeout`: the stage's budget; the reference's own kernels may be slow)."""
    if not sized:
        return [], []
    known = known or {}
    screen = task.sizes.get("screen", SCREEN)
    full = [task.sizes.get("full", {}).get(side) for side in ("m", "n")]  # the benchmark's own size
    rest = [r for r in sized if (r["m"], r["n"], r["trial"]) not in known]
    run = run_calls(task, [Call(r["trial"], size={"m": r["m"], "n": r["n"]}) for r in rest], world_size, seed=seed,
                    timeout=timeout, keep_inputs=False, shape_run=False) if rest else None
    why = ""
    if run is not None:
        lim = next(filter(None, (limit_of(r.error) for r in run.raised)), None)
        f = run.result.findings
        why = lim or (f"the reference fails there ({f[0].message if f else run.result.verdict})"
                      if run.result.verdict != "timeout" else f"the reference's runs took over {timeout:g} s")
    ran = iter(run.calls if run is not None else ())
    notes = []
    for cand in sized:
        size, trial = [cand["m"], cand["n"]], cand["trial"]
        refs = known.get((cand["m"], cand["n"], trial))
        if refs is None:
            ref = next(ran, None)
            if ref is None:
                break
            if not ref.complete:
                notes.append(f"{describe(size)} not compared: {why}")
                continue
            refs = [plain(o) for o in ref.outputs]
        wrong = mismatches(task, cand["outputs"], refs)
        if wrong:
            found = _errors(cand["outputs"], refs)
            if size != full and _rounding_only(found):
                # the tolerance is the benchmark's at its size; at another, a problem's values may have other
                # scales (gemini 9's layernorm: rows normalised by their length), so arithmetic that rounds
                # differently may cross it where the benchmark's own size would not: judged at the full size
                notes.append(f"{describe(size)}, trial {trial}: {_worst(found)}, within {NEAR_TOLERANCE:g}x the "
                             f"tolerance at a size the benchmark does not run (rounding; the full size decides)")
                continue
            reason = _verdict(size, trial, found, wrong, screen)
            if trial > LAST_TRIAL:  # inputs the benchmark's harness never draws; pkb's scorer draws fresh ones
                reason.pkb_only = True
                reason.message += (f" (trial {trial} is beyond the benchmark's trials 0-{LAST_TRIAL}: a fault under "
                                   f"pkb's rules, whose scorer draws fresh inputs)")
            return [reason], notes
    return [], notes


def _errors(outs: list, refs: list) -> list[dict]:
    """Every output tensor's elements beyond the tolerance, by rank (`_tensor_errors`)."""
    return [w for rank, (outs_r, refs_r) in enumerate(zip(outs, refs))
            for j, (o, r) in enumerate(zip(outs_r or (), refs_r or ()))
            for w in _tensor_errors(o, r, f"rank {rank} output_{j}")]


def _rounding_only(found: list[dict]) -> bool:
    """Whether every output beyond the tolerance is so by rounding alone: finite, each worst error within
    NEAR_TOLERANCE times its element's tolerance (a wrong shape or a missing output gives no entry: never)."""
    return bool(found) and all(w["finite"] and w["error"] <= NEAR_TOLERANCE * (ATOL + RTOL * abs(w["expected"]))
                               for w in found)


def _worst(found: list[dict]) -> str:
    w = max(found, key=lambda w: w["bad"])
    return (f"{w['path']}: {w['bad']} of {w['numel']} elements outside rtol={RTOL:g} atol={ATOL:g}, worst error "
            f"{w['error']:.3g} at flat index {w['index']} (got {w['got']:.6g}, expected {w['expected']:.6g})")


def _verdict(size, trial: int, found: list[dict], wrong: list[str], screen: dict) -> Reason:
    where = f"{describe(size)}, trial {trial}"
    worst = max(found, key=lambda w: w["bad"], default=None)
    if worst is not None and worst["finite"] and worst["bad"] <= NUMERICS_SHARE * worst["numel"]:
        return Reason(ReasonKind.NUMERICS, f"numerics at {where}: {_worst(found)}; "
                      + ("the screen's trials 0-2 did not draw inputs that show it" if trial else
                         f"the screen's {screen['m']} x {screen['n']} run had too few elements to show it"))
    return Reason(ReasonKind.WRONG_AT_SIZE, f"wrong output at {where} (right at the screen's {screen['m']} x "
                                            f"{screen['n']}): {wrong[0]}")


def _tensor_errors(out, ref, path: str):
    """Per pair of same-shaped floating tensors in `out` and `ref` (walked alike): how many elements are beyond
    the tolerance, the worst, and whether all of those are finite."""
    if isinstance(out, dict) and isinstance(ref, dict):
        for k in ref:
            if k in out:
                yield from _tensor_errors(out[k], ref[k], f"{path}[{k!r}]")
    elif isinstance(out, (list, tuple)) and isinstance(ref, (list, tuple)):
        for i, (o, r) in enumerate(zip(out, ref)):
            yield from _tensor_errors(o, r, f"{path}[{i}]")
    elif (isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor) and out.shape == ref.shape
          and not out.is_complex() and not ref.is_complex() and out.layout == ref.layout == torch.strided):
        o, r = out.detach().reshape(-1).float(), ref.detach().reshape(-1).float()
        close = _isclose(r, o, ATOL, RTOL)
        bad = int((~close).sum())
        if bad:
            err = torch.where(close, torch.zeros_like(o), (o - r).abs().nan_to_num(math.inf, math.inf, math.inf))
            i = int(err.argmax())
            yield {"path": path, "bad": bad, "numel": o.numel(), "error": float(err[i]), "index": i,
                   "got": float(o[i]), "expected": float(r[i]), "finite": bool(err.isfinite().all())}

