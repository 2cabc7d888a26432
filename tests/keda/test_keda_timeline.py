"""Report artefacts: the timestamp and phase CSVs, the console table, the timeline SVG."""

from __future__ import annotations

import csv
import io
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kedasynth import pod, synth, uniform

from kgc.layers.keda.evidence import KedaEvidence
from kgc.layers.keda.phases import MEASURES, PHASES
from kgc.layers.keda.timeline import (
    COLORS,
    PHASE_COLUMNS,
    TIMESTAMP_COLUMNS,
    phase_table,
    phases_csv,
    timeline_svg,
    timestamps_csv,
)

SVG = "{http://www.w3.org/2000/svg}"


def _ev() -> KedaEvidence:
    kata = [[pod(sandbox=3.0), pod(decision=4.0, sandbox=2.5)],
            [pod(sandbox=None), pod(sandbox=None, start=None, ready=None, stall=True)]]
    return synth({"kata": kata, "baseline": uniform(2, 2)}, stall_wait=20.0)


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_timestamps_csv_holds_every_timestamp_with_both_clocks():
    ev = _ev()
    rows = _rows(timestamps_csv(ev))
    assert tuple(rows[0].keys()) == TIMESTAMP_COLUMNS
    pods = [p for run in ev.runs() for rep in run.repetitions for p in rep.pods]
    observed = sum(len(p.observed) for p in pods)
    assert sum(1 for r in rows if r["milestone"] in ("created", "scheduled", "sandbox_ready",
                                                     "started", "ready")) == observed
    trig = [r for r in rows if r["milestone"] == "trigger"]
    assert len(trig) == 4 and all(r["t_since_trigger_s"] == "0.000000" for r in trig)
    ready = next(r for r in rows if r["pod"] == "kata-1-1" and r["milestone"] == "ready")
    # decision 1 + creation .05 + scheduling .02 + sandbox 3 + start .2 + ready .1
    assert float(ready["t_since_trigger_s"]) == pytest.approx(4.37)
    assert ready["client_wall_utc"].endswith("+00:00") and ready["api_time_utc"]
    assert 0 <= float(ready["receipt_minus_api_s"]) < 1
    stall = [r for r in rows if r["milestone"].startswith("stall:")]
    assert len(stall) == 1 and "waited 20 s of 20 s" in stall[0]["detail"]
    assert any(r["milestone"] == "last-status" and r["detail"] == "Pending" for r in rows)
    assert {r["milestone"] for r in rows} >= {"active", "replicas:deployment", "lowered",
                                              "scaled_down"}


def test_phases_csv_has_every_measure_of_every_pod_and_never_a_zero_for_missing():
    rows = _rows(phases_csv(_ev()))
    assert tuple(rows[0].keys()) == PHASE_COLUMNS
    assert len(rows) == 8 * len(MEASURES)
    gap = next(r for r in rows if r["pod"] == "kata-2-1" and r["measure"] == "sandbox")
    assert gap["status"] == "missing" and gap["seconds"] == ""
    stalled = next(r for r in rows if r["pod"] == "kata-2-2" and r["measure"] == "sandbox")
    assert stalled["status"] == "stalled" and float(stalled["seconds"]) == pytest.approx(20.0)


def test_csv_of_an_empty_record_is_just_the_header():
    ev = KedaEvidence("not-run", "no cluster")
    assert timestamps_csv(ev) == ",".join(TIMESTAMP_COLUMNS) + "\n"
    assert phases_csv(ev) == ",".join(PHASE_COLUMNS) + "\n"


def test_phase_table_for_the_console():
    text = phase_table(_ev())
    assert text.splitlines()[0].startswith("phase")
    assert "sandbox ready" in text and "stalled" in text and "ratio (p50)" in text


def _svg(ev: KedaEvidence, **kw) -> ET.Element:
    return ET.fromstring(timeline_svg(ev, **kw).encode())


def test_svg_is_well_formed_and_self_contained():
    text = timeline_svg(_ev())
    root = ET.fromstring(text.encode())
    assert root.tag == SVG + "svg"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    assert "href=\"http" not in text and "<script" not in text and "@import" not in text
    # the only reference is the internal hatch pattern
    assert text.count("url(#") == text.count("url(#kgc-stall)")


def test_bar_widths_are_proportional_to_phase_durations():
    ev = _ev()
    root = _svg(ev)
    pxs = float(root.get("data-px-per-s"))
    bars = [e for e in root.iter(SVG + "rect") if e.get("class") == "phase"]
    assert len(bars) > 20
    for b in bars:
        assert float(b.get("width")) == pytest.approx(float(b.get("data-seconds")) * pxs,
                                                      abs=2e-3)
    # and the sandbox bar of kata-1-1 is 3 s wide, 10x runc's 0.3 s
    kata = next(g for g in root.iter(SVG + "g") if g.get("data-role") == "kata")
    base = next(g for g in root.iter(SVG + "g") if g.get("data-role") == "baseline")
    ks = [float(b.get("width")) for b in kata.iter(SVG + "rect")
          if b.get("data-phase") == "sandbox" and b.get("class") == "phase"]
    bs = [float(b.get("width")) for b in base.iter(SVG + "rect")
          if b.get("data-phase") == "sandbox" and b.get("class") == "phase"]
    assert ks[0] == pytest.approx(3.0 * pxs, abs=2e-3)
    assert ks[0] / bs[0] == pytest.approx(10.0, rel=1e-3)


def test_bars_start_where_their_phase_starts():
    root = _svg(_ev())
    kata = next(g for g in root.iter(SVG + "g") if g.get("data-role") == "kata")
    bars = [b for b in kata.iter(SVG + "rect") if b.get("class") == "phase"][:6]
    assert [b.get("data-phase") for b in bars] == list(PHASES)
    for a, b in zip(bars, bars[1:], strict=False):  # consecutive phases touch
        assert float(a.get("x")) + float(a.get("width")) == pytest.approx(float(b.get("x")),
                                                                          abs=2e-3)


def test_kata_and_baseline_side_by_side_with_legend_and_axis():
    root = _svg(_ev())
    groups = [g.get("data-role") for g in root.iter(SVG + "g") if g.get("data-role")]
    assert groups == ["kata", "baseline"]
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    for p in ("decision", "sandbox ready", "containers started", "stalled (never completed)"):
        assert p in texts
    assert texts.count("seconds since trigger") == 2
    fills = {e.get("fill") for e in root.iter(SVG + "rect")}
    assert set(COLORS.values()) <= fills
    stalls = [e for e in root.iter(SVG + "rect") if e.get("class") == "stall"]
    assert len(stalls) == 1 and stalls[0].get("data-phase") == "sandbox"
    assert float(stalls[0].get("width")) == pytest.approx(
        20.0 * float(root.get("data-px-per-s")), abs=2e-3)


def test_missing_phase_leaves_a_gap_not_a_zero_bar():
    root = _svg(_ev())
    kata = next(g for g in root.iter(SVG + "g") if g.get("data-role") == "kata")
    titles = [b.find(SVG + "title").text for b in kata.iter(SVG + "rect")
              if b.get("class") == "phase"]
    assert not any("kata-2-1: sandbox ready" in t for t in titles)
    assert any("kata-2-1: Ready" in t for t in titles)


def test_text_is_escaped_and_rows_are_capped():
    ev = synth({"kata": uniform(3, 4)})
    run = ev.kata
    reps = tuple(r.__class__(**{**r.__dict__, "pods": tuple(
        p.__class__(**{**p.__dict__, "name": "<pod&\"x\">"}) for p in r.pods)})
        for r in run.repetitions)
    ev2 = KedaEvidence("done", kata=run.__class__(**{**run.__dict__, "repetitions": reps}))
    root = _svg(ev2, max_rows=5, title="a <b> & c")
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    assert "a <b> & c" in texts
    assert any("<pod&" in t for t in texts)
    assert "7 more pods not drawn" in texts
    assert len([e for e in root.iter(SVG + "rect") if e.get("class") == "phase"]) == 5 * 6


def test_svg_of_a_record_without_runs_says_so():
    root = _svg(KedaEvidence("not-run", "no cluster"))
    assert any("no runtime class was measured: no cluster" == (t.text or "")
               for t in root.iter(SVG + "text"))


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
@pytest.mark.lab  # Chromium: the lab tier (skipped here, it would never run in CI)
def test_svg_renders_in_headless_chromium(tmp_path: Path):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (Debian package `chromium`)")
    svg = tmp_path / "timeline.svg"
    svg.write_text(timeline_svg(_ev()))
    page = tmp_path / "page.html"
    page.write_text('<html><body style="margin:0"><img id="t" src="timeline.svg"></body></html>')
    png = tmp_path / "shot.png"
    subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", f"--screenshot={png}", "--window-size=1300,400",
         page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    data = png.read_bytes()
    assert _png_size(data) == (1300, 400)
    assert len(data) > 10_000  # a blank page compresses to a few hundred bytes
