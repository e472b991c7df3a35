"""The 8-rank screen's rejects of files a GPU scored correct at world size 1, under each rule set.

    python benchmarks/pkb_rejects_vs_gpu.py CORPUS_JSON GPU_JSONL

CORPUS_JSON is `benchmarks/pkb_corpus.py --json`'s output (its rows carry both verdicts); GPU_JSONL has one
`{"file": "<tree>/<name>.py", "status": ...}` per scored file (benchmarks/results/pkb_agreement/
gpu_ws1_h200.jsonl). A world-size-1 score cannot see a fault that needs peers, so such a reject is either a
fault only 8 ranks show or pkb's own: each is listed with its reason and line, to be read by hand. A reject
for a predicted slow-down is not listed (the functional stage passed it). Prints the list and the counts; no
asserts.
"""
from __future__ import annotations

import argparse
import json
import os

from pkbsim.screen.result import ScreenResult, Semantics, Verdict


def key(path: str) -> str:
    return "/".join(os.path.normpath(path).split(os.sep)[-2:])


def functional_faults(res: ScreenResult) -> list:
    """The faults a verdict counts other than a predicted slow-down (the functional stage passed those)."""
    return [r for r in res.reasons if r.kind != "slower"] if res.verdict is Verdict.REJECT else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus_json")
    ap.add_argument("gpu_jsonl")
    args = ap.parse_args()
    with open(args.gpu_jsonl) as f:
        gpu = {d["file"]: d["status"] for d in (json.loads(line) for line in f if line.strip())}
    with open(args.corpus_json) as f:
        rows = [r for tree in json.load(f)["rows"].values() for r in tree]
    counts = {rule: 0 for rule in Semantics}
    scored_correct = 0
    for r in sorted(rows, key=lambda r: key(r["candidate"])):
        if gpu.get(key(r["candidate"])) != "correct":
            continue
        scored_correct += 1
        res = ScreenResult.from_json(r)
        rejected = [rule for rule in Semantics if functional_faults(res.under(rule))]
        for rule in rejected:
            counts[rule] += 1
        if rejected:
            first = functional_faults(res.under(rejected[0]))[0]
            print(f"{key(r['candidate'])}: reject under {' and '.join(rejected)}'s rules: {first.kind} at "
                  f"{os.path.basename(first.site)}: {first.message.splitlines()[0][:220]}")
    print(f"{scored_correct} files the GPU scored correct at world size 1 were screened at 8 ranks; rejected: "
          + ", ".join(f"{n} under {rule}'s rules" for rule, n in counts.items()))


if __name__ == "__main__":
    main()
