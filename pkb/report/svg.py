"""Small inline SVG charts for the self-contained HTML report (no JavaScript, no external files)."""
from __future__ import annotations

import html
import json
import math

from candidate_sandbox.untrusted_file import UntrustedFile, read_regular
from pkbsim import Verdict


def scatter(pairs: list, width: int = 420, height: int = 320) -> str:
    """Predicted vs measured speed-up on log axes, with the y = x line."""
    if not pairs:
        return "<p>No candidate has both a predicted and a measured speed-up yet.</p>"
    vals = [v for p in pairs for v in p[:2] if v and v > 0]
    lo, hi = math.log10(min(vals) / 1.5), math.log10(max(vals) * 1.5)
    pad = 40

    def xy(px: float, py: float) -> tuple[float, float]:
        fx = (math.log10(px) - lo) / (hi - lo)
        fy = (math.log10(py) - lo) / (hi - lo)
        return pad + fx * (width - 2 * pad), height - pad - fy * (height - 2 * pad)

    x0, y0 = xy(10 ** lo, 10 ** lo)
    x1, y1 = xy(10 ** hi, 10 ** hi)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="scatter">',
             f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="#bbb" stroke-dasharray="4"/>',
             f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle">predicted speed-up (log)</text>',
             (f'<text x="12" y="{height / 2}" transform="rotate(-90 12 {height / 2})" text-anchor="middle">'
             f'measured speed-up (log)</text>')]
    for pred, meas, label in pairs:
        if pred and meas and pred > 0 and meas > 0:
            x, y = xy(pred, meas)
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#3465a4"><title>{html.escape(label)}: '
                         f'predicted {pred:.2f}x, measured {meas:.2f}x</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


MAX_TIMELINE_BYTES = 64 << 20   # a screen's trace is a few MiB at most; anything larger is not one of ours


class TimelineSkipped(Exception):
    """A timeline that cannot be drawn (not a regular file, too large, not a trace pkb writes); its message is
    the one-line reason."""


def load_timeline(path: str) -> list[dict]:
    """The complete events ("X") of a Chrome trace a screen wrote, each checked: a dict with integer pid and
    tid, finite non-negative ts and dur. Timelines are written where candidates run, so one can be anything:
    a FIFO (opened without blocking, then refused as not a regular file), a link (not followed), a huge or
    malformed file. Raises TimelineSkipped naming why; FileNotFoundError when there is none."""
    try:
        data = read_regular(path, MAX_TIMELINE_BYTES)
    except UntrustedFile as e:
        why = {"type": f"not a regular file ({e.what})",
               "size": f"{e.size} bytes, over the {MAX_TIMELINE_BYTES >> 20} MiB a timeline may have"}
        raise TimelineSkipped(why.get(e.problem, "it changed while read")) from None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise TimelineSkipped(f"not JSON ({str(e).splitlines()[0][:80]})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TimelineSkipped("not a Chrome trace (no list of events)")
    spans = []
    for e in events:
        if not isinstance(e, dict):
            raise TimelineSkipped(f"an event that is not an object: {str(e)[:80]}")
        if e.get("ph") != "X":
            continue
        pid, tid, ts, dur = e.get("pid"), e.get("tid", 0), e.get("ts"), e.get("dur", 0)
        if not (_integer(pid) and _integer(tid) and _number(ts) and _number(dur)):
            raise TimelineSkipped(f"an event with a malformed pid, tid, ts or dur: {str(e)[:80]}")
        spans.append(e)
    return spans


def _integer(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and abs(x) < 2**31


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and 0 <= x < 1e15


def timeline(path: str | None, width: int = 900, max_events: int = 400) -> str:
    """The candidate's simulated timeline (a Chrome trace written by the screen) as lanes per rank/stream.
    Raises TimelineSkipped for a file that is not a timeline pkb wrote (load_timeline)."""
    if not path:
        return "<p>No timeline recorded.</p>"
    try:
        events = load_timeline(path)
    except FileNotFoundError:
        return "<p>No timeline recorded.</p>"
    spans = events[:max_events]
    if not spans:
        return "<p>The timeline is empty.</p>"
    lanes = sorted({(e["pid"], e.get("tid", 0)) for e in spans})
    lane_of = {lane: i for i, lane in enumerate(lanes)}
    end = max(e["ts"] + e.get("dur", 0) for e in spans) or 1.0
    row, left = 14, 110
    height = row * len(lanes) + 24
    colour = {"compute": "#73a857", "collective": "#3465a4", "p2p": "#c17d11", "signal_put": "#75507b",
              "signal_wait": "#cc0000"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="timeline">']
    for i, (pid, tid) in enumerate(lanes):
        parts.append(f'<text x="2" y="{i * row + 11}" font-size="10">rank {pid} stream {tid}</text>')
    scale = (width - left - 10) / end
    for e in spans:
        i = lane_of[(e["pid"], e.get("tid", 0))]
        x, w = left + e["ts"] * scale, max(1.0, e.get("dur", 0) * scale)
        fill = colour.get(str(e.get("cat", "")), "#888")
        parts.append(f'<rect x="{x:.1f}" y="{i * row + 2}" width="{w:.1f}" height="{row - 4}" fill="{fill}">'
                     f'<title>{html.escape(str(e.get("name", "")))} {e.get("dur", 0):.1f} us</title></rect>')
    parts.append(f'<text x="{left}" y="{height - 6}" font-size="10">0 us</text>'
                 f'<text x="{width - 10}" y="{height - 6}" font-size="10" text-anchor="end">{end:.1f} us</text></svg>')
    return "".join(parts)


def trajectory(steps: list[dict], width: int = 420, height: int = 200) -> str:
    """One refinement run of one task: per step its verdict (colour) and predicted speed-up (height); steps
    without a prediction (rejected, malformed) sit on the axis, marked with a cross."""
    if not steps:
        return "<p>No steps.</p>"
    pad, top = 40, max([1.2] + [s["speedup"] * 1.1 for s in steps if s.get("speedup")])
    last = max(s["step"] for s in steps)
    first = min(s["step"] for s in steps)

    def xy(step: int, value: float) -> tuple[float, float]:
        fx = (step - first) / max(1, last - first)
        return pad + fx * (width - 2 * pad), height - pad - value / top * (height - 2 * pad)

    colour = {Verdict.PASS: "#2a7a2a", Verdict.INCONCLUSIVE: "#a60", Verdict.REJECT: "#b00", "malformed": "#888"}
    x0, y1 = xy(first, 1.0)
    x1, _ = xy(last, 1.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="trajectory">',
             f'<line x1="{x0:.1f}" y1="{y1:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="#bbb" stroke-dasharray="4"/>',
             f'<text x="{x1:.1f}" y="{y1 - 4:.1f}" font-size="10" text-anchor="end">reference (1x)</text>',
             f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle" font-size="12">step</text>',
             (f'<text x="12" y="{height / 2}" transform="rotate(-90 12 {height / 2})" text-anchor="middle" '
              f'font-size="12">predicted speed-up</text>')]
    line = [xy(s["step"], s["speedup"]) for s in steps if s.get("speedup")]
    if len(line) > 1:
        parts.append('<polyline fill="none" stroke="#3465a4" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in line) + '"/>')
    for s in steps:
        x, y = xy(s["step"], s.get("speedup") or 0.0)
        tip = html.escape(f"step {s['step']}: {s['verdict']} ({s.get('why') or s.get('stage') or ''})"
                          + (f", predicted {s['speedup']:.2f}x" if s.get("speedup") else ""))
        fill = colour.get(s["verdict"], "#888")
        if s.get("speedup"):
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" class="step {s["verdict"]}">'
                         f'<title>{tip}</title></circle>')
        else:
            parts.append(f'<path d="M{x - 5:.1f},{y - 5:.1f}L{x + 5:.1f},{y + 5:.1f}M{x - 5:.1f},{y + 5:.1f}'
                         f'L{x + 5:.1f},{y - 5:.1f}" stroke="{fill}" stroke-width="2" class="step {s["verdict"]}">'
                         f'<title>{tip}</title></path>'
                         f'<text x="{x:.1f}" y="{y - 9:.1f}" font-size="10" text-anchor="middle">'
                         f'{html.escape(s.get("why") or s["verdict"])}</text>')
        parts.append(f'<text x="{x:.1f}" y="{height - pad + 14}" font-size="10" text-anchor="middle">{s["step"]}</text>')
    parts.append("</svg>")
    return "".join(parts)
