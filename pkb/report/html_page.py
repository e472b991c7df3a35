"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, no external files."""
from __future__ import annotations

import html
import os

from pkb.batch import summary_row, tally
from pkb.report.collect import Report
from pkb.report.svg import TimelineSkipped, scatter, timeline, trajectory

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left;vertical-align:top}
th{background:#f2f2f2}.pass{color:#2a7a2a;font-weight:600}.reject{color:#b00;font-weight:600}
.inconclusive{color:#a60;font-weight:600}details{margin:6px 0}"""


def _cell(x) -> str:
    return f"<td>{html.escape('' if x is None else str(x))}</td>"


def render(rep: Report, title: str = "pkb report", skipped: list[str] | None = None) -> str:
    """The page; a timeline that is not one pkb wrote (svg.load_timeline) is left out with a note in the page,
    and the same one-line note appended to `skipped`."""
    out = [(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>")]
    summary = tally([r.screen for r in rep.rows])
    out.append(f"<p id='summary'>{len(rep.rows)} candidates screened: {html.escape(summary)}.</p>")
    out.append("<h2>Candidates</h2><table id='candidates'><tr><th>task</th><th>candidate</th><th>screen</th>"
               "<th>stage</th><th>predicted</th><th>bottleneck</th><th>hardware</th><th>measured</th>"
               "<th>reason</th></tr>")
    for r in rep.rows:
        s = summary_row(r.screen, r.score)
        pred = "" if s.predicted is None else f"{s.predicted:.2f}x" + (" (uncertain)" if s.uncertain else "")
        meas = s.measured_text
        verdict = html.escape(s.verdict.value)
        out.append(f"<tr class='row'>{_cell(s.task)}{_cell(s.candidate)}"
                   f"<td class='{verdict}'>{verdict}</td>{_cell(s.stage)}"
                   f"{_cell(pred)}{_cell(s.bottleneck)}{_cell(s.hw_status)}{_cell(meas)}{_cell(s.reason)}</tr>")
    out.append("</table>")
    out.append("<h2>Screening quality</h2>")
    if rep.confusion:
        statuses = sorted({k for v in rep.confusion.values() for k in v})
        out.append("<table id='confusion'><tr><th>screen \\ hardware</th>"
                   + "".join(f"<th>{html.escape(s)}</th>" for s in statuses) + "</tr>")
        for verdict, counts in sorted(rep.confusion.items()):
            out.append(f"<tr><th>{html.escape(verdict)}</th>" + "".join(_cell(counts.get(s, 0)) for s in statuses)
                       + "</tr>")
        out.append("</table>")
    rho = "n/a (fewer than 3 pairs)" if rep.spearman is None else f"{rep.spearman:.2f}"
    out.append(f"<p>Rank correlation (Spearman) of predicted and measured speed-ups: {rho}.</p>")
    out.append(scatter(rep.pairs))
    if rep.gpu_hours_saved is not None:
        out.append(f"<p>GPU hours saved: {rep.gpu_hours_saved:.3f}</p>")
    out += [f"<p class='note'>{html.escape(n)}</p>" for n in rep.notes]
    if rep.trajectories:
        out.append("<h2>Refinement runs</h2>")
    for t in rep.trajectories:
        path = " &rarr; ".join(html.escape(s["verdict"] + (f" ({s['why']})" if s.get("why") else "")
                                           + (f" {s['speedup']:.2f}x" if s.get("speedup") else ""))
                               for s in t["steps"])
        out.append(f"<div class='refine'><h3>{html.escape(t['run'])} / {html.escape(t['task'])}</h3>"
                   f"<p>{path}</p>{trajectory(t['steps'])}</div>")
    out.append("<h2>Timelines</h2>")
    for row in rep.rows:
        r = row.screen
        if row.timeline:
            name = f"{r.task} / {os.path.basename(r.candidate)}"
            try:
                drawn = timeline(row.timeline)
            except TimelineSkipped as e:
                note = f"timeline of {name} skipped: {e}"
                drawn = f"<p class='note'>{html.escape(note)}</p>"
                if skipped is not None:
                    skipped.append(note)
            out.append(f"<details><summary>{html.escape(name)}</summary>{drawn}</details>")
    out.append("</body></html>")
    return "\n".join(out)
