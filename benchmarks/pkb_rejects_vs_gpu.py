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

RULES = ("pkb", "parallelkernelbench")


def key(path: str) -> str:
    return "/".join(os.path.normpath(path).split(os.sep)[-2:])


def faults(row: dict) -> list[dict]:
    every = (row.get("reasons") or []) + (row.get("warnings") or [])
    return [r for r in every if r.get("pkb_only")] + [r for r in every if not r.get("pkb_only")]


def functional_faults(row: dict, rule: str) -> list[dict]:
    """The faults that count under `rule` other than a predicted slow-down (the functional stage passed those)."""
    return [r for r in faults(row) if r["kind"] != "slower" and (rule == "pkb" or not r.get("pkb_only"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus_json")
    ap.add_argument("gpu_jsonl")
    args = ap.parse_args()
    with open(args.gpu_jsonl) as f:
        gpu = {d["file"]: d["status"] for d in (json.loads(line) for line in f if line.strip())}
    with open(args.corpus_json) as f:
        rows = [r for tree in json.load(f)["rows"].values() for r in tree]
    counts = {rule: 0 for rule in RULES}
    scored_correct = 0
    for r in sorted(rows, key=lambda r: key(r["candidate"])):
        if gpu.get(key(r["candidate"])) != "correct":
            continue
        scored_correct += 1
        verdicts = r.get("verdicts") or {rule: r["verdict"] for rule in RULES}
        rejected = [rule for rule in RULES if verdicts[rule] == "reject" and functional_faults(r, rule)]
        for rule in rejected:
            counts[rule] += 1
        if rejected:
            first = functional_faults(r, rejected[0])[0]
            site = os.path.basename(first.get("site") or "")
            print(f"{key(r['candidate'])}: reject under {' and '.join(rejected)}'s rules: {first['kind']} at {site}: "
                  f"{first['message'].splitlines()[0][:220]}")
    print(f"{scored_correct} files the GPU scored correct at world size 1 were screened at 8 ranks; rejected: "
          + ", ".join(f"{n} under {rule}'s rules" for rule, n in counts.items()))


if __name__ == "__main__":
    main()
