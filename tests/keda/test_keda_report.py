"""The KEDA layer's report artefacts, from recorded lab runs (fixtures/keda): the CSV of
every timestamp and the timeline SVG lie next to verdict.json and are attached (CSV, SVG)
to the Allure result of every keda check; the console shows the per-phase table; and the
HTML report shows the timeline picture -- checked in headless Chromium, driven through the
DevTools protocol, by reading the rendered DOM after opening the attachment."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from conftest import REPO
from kgc.core.bundle import load_bundle
from kgc.core.registry import load_layers
from kgc.kube import WaitTimeout
from kgc.layers.keda.evidence import KedaEvidence
from kgc.layers.keda.phases import OK, PHASES, class_phases
from kgc.layers.keda.timeline import artefacts

GOOD = REPO / "fixtures" / "keda" / "lab-good.json"
STALLED = REPO / "fixtures" / "keda" / "lab-unschedulable.json"


def replay_suite(bundle: Path, rdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "keda", "--snapshot", str(bundle), "--profile",
         "lab", "--report-dir", str(rdir), "-p", "no:cacheprovider"],
        cwd=rdir.parent, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def good_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    rdir = tmp_path_factory.mktemp("keda-report") / "reports"
    out = replay_suite(GOOD, rdir)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    return rdir, out.stdout


def test_artefacts_lie_next_to_verdict_json_and_the_console_shows_the_table(
        good_report: tuple[Path, str]) -> None:
    rdir, stdout = good_report
    assert (rdir / "verdict.json").exists()
    ev = load_bundle(GOOD, load_layers()).part("keda")
    from kgc.core.profile import load_profile

    want = {n: data for n, _m, data in artefacts(KedaEvidence.from_dict(ev),
                                                 load_profile("lab"))}
    for name in ("keda-timestamps.csv", "keda-phases.csv", "keda-timeline.svg",
                 "keda-phases.txt"):
        assert (rdir / name).read_bytes() == want[name], name
    table = want["keda-phases.txt"].decode()
    assert "keda on kgc-lab: keda-phases.txt" in stdout
    for line in table.splitlines():
        assert line in stdout, line


def test_every_keda_result_carries_the_csv_and_svg_attachments(
        good_report: tuple[Path, str]) -> None:
    rdir, _ = good_report
    results = [json.loads(p.read_text()) for p in (rdir / "allure-results").glob(
        "*-result.json")]
    keda = [r for r in results if any(lab.get("name") == "epic" and lab.get("value") == "keda"
                                      for lab in r.get("labels", []))]
    assert len(keda) == 9
    for r in keda:
        att = {a["name"]: a for a in r.get("attachments", [])}
        assert att["keda-timeline.svg"]["type"] == "image/svg+xml"
        assert att["keda-timestamps.csv"]["type"] == "text/csv"
        assert att["keda-phases.csv"]["type"] == "text/csv"
        svg = (rdir / "allure-results" / att["keda-timeline.svg"]["source"]).read_text()
        assert svg == (rdir / "keda-timeline.svg").read_text()


def test_a_stalled_run_draws_its_stall_and_writes_it_to_the_csv(tmp_path: Path) -> None:
    rdir = tmp_path / "reports"
    out = replay_suite(STALLED, rdir)
    assert out.returncode == 1  # not certified: the scale-up stalled
    svg = (rdir / "keda-timeline.svg").read_text()
    assert svg.count('class="stall" data-phase="scheduling"') == 6
    csv = (rdir / "keda-timestamps.csv").read_text()
    assert "stall:scheduling" in csv and "Insufficient nvidia.com/gpu" in csv


# --------------------------------------------------------------------------- HTML + Chromium


class Chromium:
    """Headless Chromium driven through the DevTools protocol (websocket)."""

    def __init__(self) -> None:
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        assert exe, "Debian's chromium is not installed: scripts/bootstrap.sh installs it"
        self.profile = tempfile.mkdtemp(prefix="kgc-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        self._until("Chromium's DevTools port", lambda: port_file.exists()
                    and port_file.read_text().strip(), 30)
        port = port_file.read_text().split()[0]
        pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json",
                                                  timeout=10).read())
        page = next(p for p in pages if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60)
        self.n = 0

    @staticmethod
    def _until(what: str, probe: Any, timeout_s: float) -> Any:
        from kgc.kube import wait_for

        return wait_for(what, probe, timeout_s, interval_s=0.25)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return dict(msg.get("result") or {})

    def js(self, expr: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=True,
                      returnByValue=True)
        return (r.get("result") or {}).get("value")

    def wait_js(self, what: str, expr: str, timeout_s: float = 60) -> Any:
        return self._until(what, lambda: self.js(expr), timeout_s)

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            self.proc.wait(20)
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture
def chromium() -> Iterator[Chromium]:
    c = Chromium()
    try:
        yield c
    finally:
        c.close()


@pytest.mark.lab  # Allure 3 and Chromium: the lab tier
def test_the_html_report_shows_the_timeline_picture(good_report: tuple[Path, str],
                                                    chromium: Chromium) -> None:
    rdir, _ = good_report
    out = subprocess.run([sys.executable, "-m", "kgc.cli", "report", "--results",
                          str(rdir / "allure-results"), "--out", str(rdir / "html")],
                         cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    index = rdir / "html" / "index.html"
    by_id = json.loads((rdir / "html" / "test-results.json").read_text())["byId"]
    tr = next(k for k, v in by_id.items() if v["name"].startswith("keda.phase-budgets"))
    chromium.call("Page.enable")
    chromium.call("Page.navigate", url=f"{index.as_uri()}#/{tr}")
    att = ("[...document.querySelectorAll('[data-testid=test-result-attachment]')]"
           ".find(a => a.textContent.includes('keda-timeline.svg'))")
    content = f"({att} || document).querySelector('[data-testid=image-attachment-content]')"
    chromium.wait_js("the test result page with its attachments", f"!!{att}", 120)
    # the attachment opens on click, as a reader would open it (the page may still be
    # rendering when it first shows: click again until the content is there)
    for _ in range(6):
        if chromium.js(f"!!{content}"):
            break
        chromium.js(f"{att}.querySelector('[data-testid=test-result-attachment-header] "
                    "button').click()")
        try:
            chromium.wait_js("the attachment to open", f"!!{content}", 5)
        except WaitTimeout:
            continue
    img = f"{content}.querySelector('img')"
    chromium.wait_js("the timeline image rendered", f"(() => {{ const i = {img}; return !!i "
                     "&& i.complete && i.naturalWidth > 0 })()", 60)
    size = chromium.js(f"(() => {{ const i = {img}; return [i.naturalWidth, i.naturalHeight] }})()")
    svg = chromium.js(f"fetch({img}.src).then(r => r.text())")
    assert svg == (rdir / "keda-timeline.svg").read_text()
    assert size[0] > 1000 and size[1] > 200, size  # the picture, not an icon
    # the rendered picture holds one bar per measured phase of every pod of the record
    ev = KedaEvidence.from_dict(load_bundle(GOOD, load_layers()).part("keda"))
    want = sum(1 for run in ev.runs() for pp in class_phases(run) for ph in PHASES
               if pp.values[ph].status == OK)
    bars = chromium.js(f"fetch({img}.src).then(r => r.text()).then(t => new DOMParser()"
                       ".parseFromString(t, 'image/svg+xml').querySelectorAll('rect.phase')"
                       ".length)")
    assert bars == want and want > 18 * 5, (bars, want)
    # a screenshot of the picture as shown, next to the report, for a human look
    chromium.js(f"{img}.scrollIntoView({{block: 'center'}})")
    shot = chromium.call("Page.captureScreenshot", format="png")["data"]
    (rdir / "html-timeline.png").write_bytes(base64.b64decode(shot))
