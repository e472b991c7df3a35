"""The screen's verdict as feedback a code model can act on: the first failing stage, the finding with its
sites and the candidate's own lines around them (deadlock cycle, racing accesses, wrong elements), or on a
pass the predicted speed-up, the bottleneck and the end of the critical path. Short by design: a few
findings, a few quoted lines, one instruction.

`brief` is `pkb screen --feedback`'s text (a few lines, no source quoted); `for_model` is the loop's."""
from __future__ import annotations

import os
import re

from pkbsim import ScreenResult, Verdict

SITE = re.compile(r"(?P<file>[\w./\\-]+\.py):(?P<line>\d+)")
CONTEXT = 2          # lines quoted either side of a site
MAX_SITES = 4        # sites quoted per feedback
MAX_REASONS = 2
MAX_DETAILS = 5
FUNCTION_LINES = 25  # a site on a `def` line quotes the function, up to this many lines
REPLY = "Reply with the whole corrected file in one ```python code block."


def brief(res: ScreenResult) -> str:
    """A few lines a refinement loop can act on (`pkb screen --feedback`)."""
    lines = [f"verdict: {res.verdict} (stage: {res.stage})"]
    for r in res.reasons[:3]:
        lines.append(f"{r.kind}: {r.message}" + (f" [at {r.site}]" if r.site else ""))
    p = res.predicted
    if p:
        lines.append(f"predicted speed-up: {p.speedup:.2f}x ({'uncertain, ' if p.uncertain else ''}bottleneck: "
                     f"{p.bottleneck})")
        if p.critical_path:
            last = p.critical_path[-1]
            lines.append(f"critical path ends in: {last['name']} on rank {last['rank']} at {last['site']}")
    return "\n".join(lines)


def for_model(res: ScreenResult, code: str, target: float) -> str:
    """The feedback for one screened candidate (`code` is its text, as screened)."""
    name = os.path.basename(res.candidate)
    src = code.splitlines()
    head = f"Screen ({res.task}, {res.world_size} ranks on {res.topology}): {str(res.verdict).upper()} at stage {res.stage}."
    out = [head]
    sites: list[int] = []
    if res.verdict is Verdict.REJECT:
        for r in res.reasons[:MAX_REASONS]:
            out.append(f"{r.kind}: {_local(r.message, name, sites)}")
            _local(r.site, name, sites)
        shown = {r.kind for r in res.reasons}
        for f in [f for f in res.findings if f.kind in shown][:1]:
            for d in f.details[:MAX_DETAILS]:
                out.append("  " + _local(d, name, sites))
        if len(res.reasons) > MAX_REASONS:
            out.append(f"(and {len(res.reasons) - MAX_REASONS} more of the same kind)")
    elif res.verdict is Verdict.INCONCLUSIVE:
        r = res.reasons[0] if res.reasons else None
        out.append(f"The simulator could not judge this file ({r.kind if r else 'limit'}: "
                   f"{_local(r.message, name, sites) if r else 'unknown'}). This is a limit of the screen, not "
                   f"necessarily your fault; prefer constructs it can run, or keep the file as it is.")
    p = res.predicted
    if p:
        out += _prediction(p, name, target, sites)
    quoted = _quote(src, sites)
    if quoted:
        out += ["Your file, around those lines:", *quoted]
    out.append(_instruction(res, target))
    return "\n".join(out)


def passed(res: ScreenResult, target: float) -> bool:
    """Whether the loop may stop here: a pass at or above the target speed-up (a pass without a prediction,
    when the cost stage did not run, counts)."""
    if res.verdict is not Verdict.PASS:
        return False
    return res.predicted is None or res.predicted.speedup >= target


def _prediction(p, name: str, target: float, sites: list[int]) -> list[str]:
    out = [f"Predicted at the benchmark size: reference {p.reference_us:.1f} us, yours {p.candidate_us:.1f} us, "
           f"speed-up {p.speedup:.2f}x{' (uncertain)' if p.uncertain else ''}; target {target:.2f}x. "
           f"Bottleneck: {p.bottleneck}."]
    if p.shares:
        parts = [f"{k} {v:.0%}" for k, v in sorted(p.shares.items(), key=lambda kv: -kv[1]) if v >= 0.01]
        if parts:
            out.append("Critical path time: " + ", ".join(parts) + ".")
    if p.critical_path:  # its last operations, summed per operation and line
        by_site: dict[tuple[str, str], list[float]] = {}
        for c in p.critical_path:
            by_site.setdefault((c["name"], c.get("site", "")), []).append(c.get("end_us", 0) - c.get("start_us", 0))
        top = sorted(by_site.items(), key=lambda kv: -sum(kv[1]))[:3]
        out.append(f"End of the critical path (its last {len(p.critical_path)} operations), by line: " + "; ".join(
            f"{op} {_local(site, name, sites) or 'outside your file'}"
            + (f" x{len(d)}" if len(d) > 1 else "") + f" {sum(d):.1f} us" for (op, site), d in top) + ".")
    for n in p.notes[:2]:
        out.append(f"Note: {n}")
    return out


def _instruction(res: ScreenResult, target: float) -> str:
    if res.verdict is Verdict.REJECT:
        return "Fix this. " + REPLY
    if res.verdict is Verdict.INCONCLUSIVE:
        return "If you can, express the same algorithm so the screen can run it. " + REPLY
    if passed(res, target):
        return f"It is correct and reaches the target ({target:.2f}x): done."
    return (f"It is correct; make it faster (above {target:.2f}x) without breaking it, attacking the bottleneck. "
            + REPLY)


def _local(text: str, name: str, sites: list[int]) -> str:
    """`text` with the candidate's `path/name.py:N` written `line N` (each N noted in `sites`), and unknown
    sites (`at ?`) named as outside the file."""
    if not text:
        return ""

    def sub(m: re.Match) -> str:
        if os.path.basename(m.group("file")) != name:
            return m.group(0)
        line = int(m.group("line"))
        if line not in sites:
            sites.append(line)
        return f"line {line}"

    return SITE.sub(sub, text).replace(" at ?", " outside your file (in the harness or a library)")


def _quote(src: list[str], sites: list[int]) -> list[str]:
    """The candidate's lines around the first sites, numbered, each site marked with '>'."""
    marked = [s for s in sites if 1 <= s <= len(src)][:MAX_SITES]
    show: set[int] = set()
    for s in marked:
        if src[s - 1].lstrip().startswith(("def ", "async def ")):  # a function's site: quote its body
            show.update(range(s, _function_end(src, s) + 1))
        else:
            show.update(range(max(1, s - CONTEXT), min(len(src), s + CONTEXT) + 1))
    out, prev = [], None
    for i in sorted(show):
        if prev is not None and i > prev + 1:
            out.append("     ...")
        out.append(f"{'>' if i in marked else ' '}{i:4d} | {src[i - 1]}")
        prev = i
    return out


def _function_end(src: list[str], start: int) -> int:
    indent = len(src[start - 1]) - len(src[start - 1].lstrip())
    end = start
    for i in range(start + 1, min(len(src), start + FUNCTION_LINES) + 1):
        line = src[i - 1]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        end = i
    return end
