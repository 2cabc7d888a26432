"""Report artefacts (pure): the CSVs of every timestamp and phase, the console table, and
the timeline picture -- one self-contained SVG, Kata and the baseline side by side.

Nothing here does I/O: each function returns text; the caller writes it next to
verdict.json and attaches it to the Allure result (``text/csv``, ``image/svg+xml``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from kgc.layers.keda.checks import analyse
from kgc.layers.keda.evidence import ClassRun, KedaEvidence, Stamp
from kgc.layers.keda.phases import (
    BOUNDS,
    MEASURES,
    OK,
    OUT_OF_ORDER,
    PHASES,
    STALLED,
    TITLES,
    PodPhases,
    class_phases,
)
from kgc.layers.keda.stats import fmt_num, format_table

# Okabe-Ito palette (distinguishable with the common colour-vision deficiencies)
COLORS = {
    "decision": "#E69F00",
    "creation": "#56B4E9",
    "scheduling": "#009E73",
    "sandbox": "#D55E00",
    "start": "#0072B2",
    "ready": "#CC79A7",
}
STALL_COLOR = "#B00020"


# ---------------------------------------------------------------------------------------
# CSV


def _utc(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return ""
    try:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return ""


def _n(x: float | None, digits: int = 6) -> str:
    if x is None or not math.isfinite(x):
        return ""
    return f"{x:.{digits}f}"


TIMESTAMP_COLUMNS = (
    "role", "runtime_class", "repetition", "rank", "pod", "node", "milestone",
    "t_since_trigger_s", "client_monotonic_s", "client_wall_utc", "api_time_utc",
    "receipt_minus_api_s", "detail",
)


class _TsRows:
    """Writes the rows of one repetition."""

    def __init__(self, w: Any, role: str, rc: str, rep: int, t0: float | None,
                 off: float | None) -> None:
        self.w, self.role, self.rc, self.rep, self.t0, self.off = w, role, rc, rep, t0, off

    def __call__(self, milestone: str, s: Stamp | None, detail: str = "", pod: str = "",
                 rank: Any = "", node: str = "", api: float | None = None) -> None:
        rel = "" if s is None or self.t0 is None else _n(s.mono - self.t0)
        lag = "" if (s is None or api is None or self.off is None) else _n(
            s.wall + self.off - api, 3)
        self.w.writerow([self.role, self.rc, self.rep, rank, pod, node, milestone, rel,
                         _n(s.mono if s else None), _utc(s.wall if s else None),
                         _utc(api), lag, detail])


def timestamps_csv(ev: KedaEvidence) -> str:
    """Every recorded timestamp, one row each: repetition events (trigger, active, each
    replica change, lowered, scaled_down, stalls) and every pod milestone, with the client
    receipt times (monotonic, wall), the API's own timestamp, and receipt − API in the API
    server's clock (using the estimated clock offset)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TIMESTAMP_COLUMNS)
    off = ev.clock.offset_s if ev.clock is not None else None
    for run in ev.runs():
        ranks = {pp.pod: pp.rank for pp in class_phases(run) if pp.pod is not None}
        for rep in run.repetitions:
            row = _TsRows(w, run.role, run.runtime_class or "", rep.index,
                          rep.trigger.mono if rep.trigger is not None else None, off)
            row("trigger", rep.trigger, "" if rep.trigger else "not recorded")
            if rep.active is not None:
                row("active", rep.active, "ScaledObject Active=True")
            for m in sorted(rep.scale, key=lambda m: m.at.mono):
                row(f"replicas:{m.source}", m.at, f"desired replicas {m.replicas}")
            for pod in sorted(rep.pods, key=lambda p: ranks.get(p.name, 0)):
                for ms in ("created", "scheduled", "sandbox_ready", "started", "ready"):
                    s, api = pod.observed.get(ms), pod.api.get(ms)
                    if s is None and api is None:
                        continue
                    row(ms, s, "" if s else "API timestamp only", pod.name,
                        ranks.get(pod.name, ""), pod.node or "", api)
                if "ready" not in pod.observed and pod.detail:
                    row("last-status", None, pod.detail, pod.name, ranks.get(pod.name, ""),
                        pod.node or "")
            if rep.lowered is not None:
                row("lowered", rep.lowered, "trigger lowered")
            if rep.scaled_down is not None:
                row("scaled_down", rep.scaled_down, "no pod left")
            for st in rep.stalls:
                row(f"stall:{st.phase}", st.at,
                    f"waited {st.waited_s:g} s of {st.timeout_s:g} s"
                    + (f": {st.detail}" if st.detail else ""), st.pod or "")
    return buf.getvalue()


PHASE_COLUMNS = ("role", "runtime_class", "repetition", "rank", "pod", "node", "measure",
                 "status", "seconds", "note")


def phases_csv(ev: KedaEvidence) -> str:
    """Every pod's value of every phase and span (``status`` ok/missing/out-of-order/
    invalid/stalled/not-reached; ``seconds`` empty unless measured or a stall's bound)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(PHASE_COLUMNS)
    for run in ev.runs():
        for pp in class_phases(run):
            for m in MEASURES:
                v = pp.values[m]
                w.writerow([run.role, run.runtime_class or "", pp.repetition, pp.rank,
                            pp.pod or "", pp.node or "", m, v.status, _n(v.seconds), v.note])
    return buf.getvalue()


def phase_table(ev: KedaEvidence, profile: Any = None) -> str:
    """The console's per-phase table (p50/p95/max per class, ratio at the profile's stat)."""
    a = analyse(ev, profile)
    return format_table(a.stats, a.ratios)


# ---------------------------------------------------------------------------------------
# SVG

ROW_H = 12
ROW_GAP = 4
LABEL_W = 170
PLOT_W = 460
PANEL_GAP = 36
MARGIN = 16
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"


def _nice_step(span: float, target_ticks: int = 6) -> float:
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / target_ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _extent(rows: Sequence[PodPhases]) -> float:
    """Seconds since the trigger covered by the bars of these rows."""
    end = 0.0
    for r in rows:
        t0 = r.marks.get("trigger")
        if t0 is None:
            continue
        for v in r.marks.values():
            end = max(end, v - t0)
        for p in PHASES:
            val = r.values[p]
            if val.status == STALLED and val.seconds is not None:
                start = r.marks.get(BOUNDS[p][0])
                if start is not None:
                    end = max(end, start - t0 + val.seconds)
    return end


def _t(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def timeline_svg(ev: KedaEvidence, *, max_rows: int = 120, title: str = "") -> str:
    """Per pod, its phases as coloured bars from the trigger (x = 0) on one shared time axis
    in seconds; Kata left, the baseline right; a legend on top. Every measured bar carries
    ``data-phase`` and ``data-seconds`` and its width is ``seconds × data-px-per-s`` of the
    root element. A stalled phase is a hatched bar to the point the wait gave up (to the
    axis end when unknown); a missing phase leaves a gap. At most ``max_rows`` pods per
    class are drawn (the rest are counted in the panel's footer)."""
    runs: list[ClassRun] = list(ev.runs())
    panels = [(run, class_phases(run)) for run in runs]
    extent = max([_extent(rows) for _, rows in panels] + [0.0])
    step = _nice_step(extent if extent > 0 else 1.0)
    axis_end = step * max(1, math.ceil(extent / step - 1e-9)) if extent > 0 else step
    pxs = PLOT_W / axis_end
    nrows = max([min(len(rows), max_rows) for _, rows in panels] + [1])
    legend_y = MARGIN + 22
    top = legend_y + 44
    plot_h = nrows * (ROW_H + ROW_GAP)
    height = top + 18 + plot_h + 44
    panel_w = LABEL_W + PLOT_W
    width = MARGIN * 2 + max(1, len(panels)) * panel_w + max(0, len(panels) - 1) * PANEL_GAP
    heading = title or "KEDA scale-up timeline: " + " vs ".join(r.label for r in runs)
    out: list[str] = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{FONT}" font-size="11" '
        f'data-px-per-s="{pxs:.6f}" data-axis-end-s="{_t(axis_end)}">',
        f"<title>{escape(heading)}</title>",
        '<defs><pattern id="kgc-stall" patternUnits="userSpaceOnUse" width="6" height="6" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
        f'<rect width="3" height="6" fill="{STALL_COLOR}"/></pattern></defs>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{MARGIN}" y="{MARGIN + 4}" font-size="14" font-weight="bold">'
        f"{escape(heading)}</text>",
    ]
    # legend
    x = MARGIN
    for p in PHASES:
        out.append(f'<rect x="{x}" y="{legend_y}" width="12" height="12" fill="{COLORS[p]}"/>')
        label = TITLES[p]
        out.append(f'<text x="{x + 16}" y="{legend_y + 10}">{escape(label)}</text>')
        x += 16 + int(6.3 * len(label)) + 18
    out.append(f'<rect x="{x}" y="{legend_y}" width="12" height="12" fill="url(#kgc-stall)" '
               f'stroke="{STALL_COLOR}"/>')
    out.append(f'<text x="{x + 16}" y="{legend_y + 10}">stalled (never completed)</text>')
    out.append(f'<text x="{MARGIN}" y="{legend_y + 28}" fill="#555555">time since the '
               "trigger was raised, seconds (client receipt times of watch events); a gap "
               "is a phase not observed; ! marks one whose milestones are out of order</text>")

    for i, (run, rows) in enumerate(panels):
        px0 = MARGIN + i * (panel_w + PANEL_GAP)
        x0 = px0 + LABEL_W
        e2e = [d for r in rows if (d := r.seconds("e2e")) is not None]
        sub = f"{run.label} ({run.role}): {len(run.repetitions)} repetitions, {len(rows)} pods"
        if e2e:
            sub += f", end to end {fmt_num(min(e2e))}-{fmt_num(max(e2e))} s"
        out.append(f'<g data-role={quoteattr(run.role)}>')
        out.append(f'<text x="{px0}" y="{top + 6}" font-size="12" font-weight="bold">'
                   f"{escape(sub)}</text>")
        y_plot = top + 18
        # grid + axis
        ticks = int(round(axis_end / step))
        for k in range(ticks + 1):
            tx = x0 + k * step * pxs
            out.append(f'<line x1="{tx:.2f}" y1="{y_plot}" x2="{tx:.2f}" '
                       f'y2="{y_plot + plot_h}" stroke="#e0e0e0" stroke-width="1"/>')
            out.append(f'<text x="{tx:.2f}" y="{y_plot + plot_h + 14}" text-anchor="middle">'
                       f"{_t(k * step)}</text>")
        out.append(f'<line x1="{x0}" y1="{y_plot + plot_h}" x2="{x0 + PLOT_W}" '
                   f'y2="{y_plot + plot_h}" stroke="#333333" stroke-width="1"/>')
        out.append(f'<text x="{x0 + PLOT_W / 2:.1f}" y="{y_plot + plot_h + 30}" '
                   'text-anchor="middle">seconds since trigger</text>')
        prev_rep = None
        for j, r in enumerate(rows[:max_rows]):
            y = y_plot + j * (ROW_H + ROW_GAP) + ROW_GAP / 2
            if prev_rep is not None and r.repetition != prev_rep:
                ly = y - ROW_GAP / 2
                out.append(f'<line x1="{px0}" y1="{ly:.1f}" x2="{x0 + PLOT_W}" y2="{ly:.1f}" '
                           'stroke="#bbbbbb" stroke-dasharray="3,3"/>')
            prev_rep = r.repetition
            name = r.pod or "(never created)"
            if len(name) > 18:
                name = name[:8] + "…" + name[-9:]
            out.append(f'<text x="{x0 - 6}" y="{y + ROW_H - 2:.1f}" text-anchor="end">'
                       f"{escape(f'r{r.repetition} #{r.rank} {name}')}</text>")
            out.extend(_bars(r, x0, y, pxs, axis_end))
        if len(rows) > max_rows:
            out.append(f'<text x="{px0}" y="{y_plot + plot_h + 30}" fill="#555555">'
                       f"{len(rows) - max_rows} more pods not drawn</text>")
        out.append("</g>")
    if not panels:
        out.append(f'<text x="{MARGIN}" y="{top + 20}">no runtime class was measured'
                   f"{': ' + escape(ev.message) if ev.message else ''}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _bars(r: PodPhases, x0: float, y: float, pxs: float, axis_end: float) -> list[str]:
    t0 = r.marks.get("trigger")
    if t0 is None:
        return [f'<text x="{x0 + 4}" y="{y + ROW_H - 2:.1f}" fill="{STALL_COLOR}">'
                "no trigger time recorded</text>"]
    out = []
    for p in PHASES:
        v = r.values[p]
        start_m = BOUNDS[p][0]
        if start_m not in r.marks:
            continue
        start = r.marks[start_m] - t0
        bx = x0 + start * pxs
        tag = (f"{r.role} r{r.repetition} #{r.rank} {r.pod or '(never created)'}: "
               f"{TITLES[p]}")
        if v.status == OK and v.seconds is not None:
            out.append(
                f'<rect class="phase" data-phase="{p}" data-seconds="{v.seconds:.6f}" '
                f'x="{bx:.3f}" y="{y:.1f}" width="{v.seconds * pxs:.3f}" height="{ROW_H}" '
                f'fill="{COLORS[p]}"><title>{escape(tag)} {v.seconds:.3f} s '
                f"(from {start:.3f} s)</title></rect>")
        elif v.status == OUT_OF_ORDER:  # named where it starts, never drawn as a gap
            out.append(
                f'<text class="out-of-order" data-phase="{p}" x="{bx:.3f}" '
                f'y="{y + ROW_H - 2:.1f}" fill="{STALL_COLOR}">!<title>{escape(tag)} '
                f"{escape(v.note)}</title></text>")
        elif v.status == STALLED:
            length = v.seconds if v.seconds is not None else max(0.0, axis_end - start)
            out.append(
                f'<rect class="stall" data-phase="{p}" x="{bx:.3f}" y="{y:.1f}" '
                f'width="{length * pxs:.3f}" height="{ROW_H}" fill="url(#kgc-stall)" '
                f'stroke="{STALL_COLOR}" stroke-width="0.8"><title>{escape(tag)} stalled '
                f"{escape(v.note)}</title></rect>")
    return out


# ---------------------------------------------------------------------------------------
# the layer's report artefacts

Artefact = tuple[str, str, bytes]


def artefacts(ev: Any, profile: Any = None) -> list[Artefact]:
    """The files a report carries for one KEDA record: ``(filename, mime, bytes)`` --
    every timestamp and every phase as CSV, the timeline picture (SVG) and the per-phase
    table (text, also shown on the console). Nothing when no class was measured."""
    if not isinstance(ev, KedaEvidence) or not ev.runs():
        return []
    return [
        ("keda-timestamps.csv", "text/csv", timestamps_csv(ev).encode()),
        ("keda-phases.csv", "text/csv", phases_csv(ev).encode()),
        ("keda-timeline.svg", "image/svg+xml", timeline_svg(ev).encode()),
        ("keda-phases.txt", "text/plain", phase_table(ev, profile).encode()),
    ]
