"""One numbering of the layers everywhere. The product card certifies six layers; each layer
package declares the card layer it belongs to (``number``, ``card`` in its ``Layer``), the
registry orders by it, and the README, the suites, the console and the report all show the
registry's "N. title" — a number written anywhere else that disagrees is a test failure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from kgc.core import report
from kgc.core.registry import cards, load_layers
from kgc.fleet.collect import allure_result
from systree import intel_good

# The product card: which package certifies which of its six layers (the spec, not code).
CARD = {
    "iommu": 1,
    "vfio": 2, "persistence": 2, "reboot": 2,
    "runtime": 3, "nri": 3,
    "gpu": 4,
    "sizing": 5,
    "keda": 6,
}
# "layer 2", "Layer 4–6", "layers 2-3" — not a duration ("host layers 15–33 s")
MENTION = re.compile(r"\b[Ll]ayers? (?>(\d+)(?:\s*[–-]\s*(\d+))?)(?!\s*(?:s|ms|min)\b)")


def test_the_registry_numbers_the_six_card_layers_in_report_order() -> None:
    layers = load_layers()
    assert {n: lay.number for n, lay in layers.items()} == CARD
    numbers = [lay.number for lay in layers.values()]
    assert numbers == sorted(numbers), f"report order is not card order: {numbers}"
    assert sorted(cards(layers)) == [1, 2, 3, 4, 5, 6]
    for n, (label, names) in cards(layers).items():
        assert label.startswith(f"{n}. ") and len(label) > len(f"{n}. "), label
        assert {layers[x].card for x in names} == {label.split(". ", 1)[1]}, names


def test_the_readme_table_is_the_registrys_cards() -> None:
    readme = (REPO / "README.md").read_text()
    m = re.search(r"\| layer \| marker \| what is proven \|\n\|---\|---\|---\|\n((?:\|.*\n)+)",
                  readme)
    assert m, "README lost its table of layers"
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in m.group(1).splitlines()]
    layers = load_layers()
    want = []
    for label, names in cards(layers).values():
        scope = ["host" if str(layers[x].scope) == "node" else "cluster" for x in names]
        marks = ", ".join(f"`{x}`" for x in dict.fromkeys([*scope, *names]))
        want.append((label, marks))
    assert [(r[0], r[1]) for r in rows] == want


def _owner(path: Path) -> str | None:
    """The layer a file belongs to (conformance/<layer>/…, src/kgc/layers/<layer>/…)."""
    rel = path.relative_to(REPO).parts
    if rel[0] == "conformance" and len(rel) > 2:
        return rel[1]
    if rel[:3] == ("src", "kgc", "layers") and len(rel) > 4:
        return rel[3]
    return None


def _texts() -> list[tuple[Path, str]]:
    files = [REPO / "README.md", *(REPO / "docs").rglob("*.md"),
             *(REPO / "benchmarks").rglob("*.md"), *(REPO / "conformance").rglob("*.py"),
             *(REPO / "src" / "kgc").rglob("*.py")]
    return [(p, p.read_text()) for p in files if not p.name.endswith("_pb2.py")]


def disagreements(docs: list[tuple[Path, str]]) -> list[str]:
    """Every "layer N" that the registry contradicts: in a layer's own files N is that
    layer's number; elsewhere N is a card number, and a single one is written as the
    registry shows it: "layer N. title" or "layer N (title)"."""
    layers = load_layers()
    label = {n: lab for n, (lab, _) in cards(layers).items()}
    bad = []
    for p, text in docs:
        owner = _owner(p)
        for m in MENTION.finditer(text):
            first, last = int(m.group(1)), int(m.group(2) or m.group(1))
            where = f"{p.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}"
            if owner in layers:
                if (first, last) != (layers[owner].number, layers[owner].number):
                    bad.append(f"{where}: {m.group(0)!r} in layer {owner}, which is "
                               f"{layers[owner].label!r}")
            elif not {first, last} <= set(label):
                bad.append(f"{where}: {m.group(0)!r}: no such card layer")
            elif m.group(2) is None:
                title = label[first].split(". ", 1)[1]
                if not text.startswith((f". {title}", f" ({title})"), m.end()):
                    bad.append(f"{where}: {m.group(0)!r} is not written "
                               f"'layer {label[first]}'")
    return bad


def test_every_layer_number_written_agrees_with_the_registry() -> None:
    assert disagreements(_texts()) == []


def test_the_mention_scan_catches_a_wrong_number() -> None:
    """The scan itself: a suite that calls persistence layer 3 (main's mistake) is caught,
    and so is a README sentence with a bare or an unknown number."""
    suite = REPO / "conformance" / "persistence" / "test_persistence.py"
    readme = REPO / "README.md"
    cases = [(suite, '"""Layer 3 — persistence."""', 1), (suite, '"""Layer 2 — ok."""', 0),
             (readme, "see layer 2 for the binding", 1), (readme, "layer 7. Nothing", 1),
             (readme, "layers 4-6 are cluster layers", 0), (readme, "host layers 15–33 s", 0),
             (readme, "layer 2. VFIO binding and persistence", 0),
             (readme, "layer 3 (containerd + NRI)", 0)]
    assert [len(disagreements([(p, t)])) for p, t, _ in cases] == [n for _, _, n in cases]


def test_every_suite_opens_with_its_card_layer() -> None:
    for name, lay in load_layers().items():
        doc = (REPO / "conformance" / name / f"test_{name}.py").read_text()
        assert doc.startswith(f'"""Layer {lay.label}'), (name, doc[:80])


def test_the_reports_layer_labels_come_from_the_registry() -> None:
    layers = load_layers()
    for name, lay in layers.items():
        assert dict(report.layer_labels(name)) == {"epic": name, "suite": lay.label,
                                                    "subSuite": name}
        r = {"target": "n", "check": f"{name}.x", "layer": name, "title": "t",
             "severity": "normal", "status": "pass", "reason": "ok"}
        got = {(lab["name"], lab["value"]) for lab in allure_result(r, 0)["labels"]}
        assert {("epic", name), ("suite", lay.label), ("parentSuite", "n")} <= got
    rows = [{"target": "n", "check": f"{name}.x", "layer": name, "status": "pass",
             "reason": "ok"} for name in reversed(list(layers))]
    heads = [ln.strip() for ln in report.summary_table(rows) if not ln.startswith("    ")][1:-1]
    assert heads == [label for label, _ in cards(layers).values()]


def test_a_run_labels_its_results_with_the_card_layer(tmp_path: Path) -> None:
    """What users see: the console summary's headings and the Allure suites of a real run."""
    node = intel_good(tmp_path / "node")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "host and not destructive", "-p", "no:randomly",
         "--report-dir", str(tmp_path / "r"), "--kgc-root", str(node.root),
         "conformance/vfio", "conformance/iommu"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    layers = load_layers()
    results = [json.loads(p.read_text())
               for p in (tmp_path / "r" / "allure-results").glob("*-result.json")]
    assert results, proc.stdout[-3000:]
    for res in results:
        lab = {x["name"]: x["value"] for x in res["labels"]}
        assert lab["suite"] == layers[lab["epic"]].label, lab
    out = proc.stdout
    one, two = layers["iommu"].label, layers["vfio"].label
    assert f"\n  {one}\n" in out and f"\n  {two}\n" in out, out[-3000:]
    assert out.index(f"\n  {one}\n") < out.index(f"\n  {two}\n")
