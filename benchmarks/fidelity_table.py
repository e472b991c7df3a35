"""Print `pkb validate-model`'s points as the markdown table docs/timing_model.md shows, so the doc is regenerated
from the model rather than edited by hand: `python benchmarks/fidelity_table.py > /tmp/table.md`."""
from pkbsim.timing.fidelity import evaluate
from pkbsim.timing.units import format_size


def main() -> None:
    print("| point | machine | op (model's choice) | n | size | measured | predicted | error | role | rule | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in evaluate():
        harness = "" if r.harness == "nccl-tests" else f", {r.harness}"
        unit = "us" if r.metric == "time_us" else "GB/s"
        verdict = "-" if r.meets_target is None else "met" if r.meets_target else "**missed**"
        print(f"| {r.id} | {r.topology} | {r.op} ({r.algorithm}/{r.protocol}{harness}) | {r.nranks} | "
              f"{format_size(r.bytes)} | {r.measured:g} {unit} | {r.predicted:.1f} | {r.error_pct:+.1f}% | "
              f"{r.role} | {r.target} | {verdict} |")


if __name__ == "__main__":
    main()
