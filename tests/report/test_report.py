"""The HTML report: self-contained, one per results kind, and opened in headless Chromium
(no console errors, no network request, figures rendered) where Chromium is installed
(.ci/run installs it)."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from scoreband.cli import app
from scoreband.metrics import binomial_ci as clopper_pearson
from scoreband.report.html import kind_of
from tests.conftest import runner


def test_clopper_pearson_matches_the_exact_interval():
    lo, hi = clopper_pearson(9, 10)
    assert lo == pytest.approx(0.5550, abs=1e-4) and hi == pytest.approx(0.9975, abs=1e-4)
    assert clopper_pearson(0, 10)[0] == 0.0


def test_every_study_writes_a_self_contained_report(results):
    for f in (results / "ev.html", results / "js" / "report.html",
              results / "st" / "report.html"):
        html = f.read_text()
        assert html.count("<svg") >= 1 and "<script" not in html
        assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html), f
        assert "What the numbers mean" in html and "Provenance" in html
        assert f.stat().st_size < 1_000_000
    ev = (results / "ev.html").read_text()
    assert "Clopper-Pearson" in ev and "Calibration curve" in ev and "least covered" in ev
    assert "Reliability map" in (results / "js" / "report.html").read_text()
    assert json.loads((results / "ev.json").read_text())["calibration_curve"]


def test_report_command_combines_results_and_refuses_others(results, tmp_path):
    out = tmp_path / "all.html"
    r = runner.invoke(app, ["report", str(results / "ev.json"), str(results / "js" /
                                                                    "results.json"),
                            str(results / "st" / "results.json"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert all(t in html for t in ("evaluate:", "judge study", "stress study"))
    (tmp_path / "x.json").write_text('{"a": 1}')
    r = runner.invoke(app, ["report", str(tmp_path / "x.json"), "--out", str(out)])
    assert r.exit_code == 2 and "not a scoreband results file" in " ".join(r.output.split())
    r = runner.invoke(app, ["report", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "not a readable results JSON" in " ".join(r.output.split())
    assert kind_of(json.loads((results / "ev.json").read_text())) == "evaluate"


def test_a_report_explains_itself(results, tmp_path):
    """Every PNG the study wrote is inlined; the provenance is folded and tabulated; two
    results of one kind get titles that tell them apart."""
    html = (results / "st" / "report.html").read_text()
    pngs = sorted(p.name for p in (results / "st").glob("*.png"))
    assert pngs and html.count("data:image/png;base64,") == len(pngs)
    assert all(f"{name}, as the command wrote it" in html for name in pngs)
    assert "<details><summary>" in html and "package numpy" in html
    out = tmp_path / "two.html"
    r = runner.invoke(app, ["report", str(results / "ev.json"), str(results / "ev.json"),
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    titles = re.findall(r"<h2>(.*?)</h2>", out.read_text())
    assert len([t for t in titles if t.startswith("evaluate")]) == 2
    assert len(set(titles)) == len(titles), titles


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium (.ci/run does)")
@pytest.mark.parametrize("name", ["ev.html", "js/report.html", "st/report.html"])
def test_report_opens_in_headless_chromium(results, name, tmp_path):
    page = results / name
    shot = tmp_path / "shot.png"
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--enable-logging=stderr", "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1000,1800"]
    r = subprocess.run([*base, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    log = r.stderr
    assert "Uncaught" not in log and not re.search(r"CONSOLE.*(error|Error)", log), log
    assert "net::ERR" not in log, log  # nothing was fetched (every request would fail)
    im = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert im.std() > 10 and (im < 128).mean() > 0.005  # text and figures drawn, not blank
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120).stdout
    assert dom.count("<svg") == page.read_text().count("<svg") >= 1


def test_the_evaluate_report_shows_the_evidence(results):
    """The evaluate report's figures: the calibration curve with intervals, coverage by
    level, band width against the error, coverage per group and the groups' reliability
    map; the numbers of the verdict are in the figures; '±' and UPS are explained."""
    html = (results / "ev.html").read_text()
    caps = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)
    for what in ("Calibration curve", "Coverage where it matters", "Is the band wide where "
                 "the score is wrong", "Coverage per group", "Reliability map of the groups",
                 "Distribution of the calibrated band widths (crc at alpha 0.1, 3 splits)"):
        assert any(c.startswith(what) for c in caps), what
    doc = json.loads((results / "ev.json").read_text())
    curve = doc["calibration_curve"]
    assert len(curve) == 6 and all(len(c["ci"]) == 2 for c in curve)
    assert f"{doc['after']['coverage']['mean']:.3f}" in html  # verdict number, in the curve
    assert "mean ± std" in html and "Is it useful?" in html
    by = doc["coverage_by_level"]
    assert set(by["target"]) == {"1", "2", "3", "4", "5"}
    assert all(len(v["ci"]) == 2 and v["n_items"] > 0 for v in by["target"].values())


@pytest.mark.slow  # headless Chromium per report (7-10 s each)
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium (.ci/run does)")
@pytest.mark.parametrize("name,least", [("st/report.html", 3), ("ev.html", 6)])
def test_every_figure_of_a_report_is_visible(results, tmp_path, name, least):
    """Each figure of the stress and evaluate reports (inline SVGs and the PNGs written),
    cut out on a page of its own and screenshot in headless Chromium, shows ink (not a
    blank box)."""
    html = (results / name).read_text()
    figures = re.findall(r"<figure>(.*?)<figcaption>", html, flags=re.S)
    assert len(figures) >= least
    for i, fig in enumerate(figures):
        page = tmp_path / f"f{i}.html"
        page.write_text(f"<!doctype html><html><body style='margin:0;background:#fff'>"
                        f"<div style='width:900px'>{fig}</div></body></html>")
        shot = tmp_path / f"f{i}.png"
        r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", "--window-size=900,900",
                            f"--screenshot={shot}", page.as_uri()], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-1000:]
        im = np.asarray(Image.open(shot).convert("L"), dtype=float)
        assert (im < 200).mean() > 0.002 and im.std() > 5, (i, fig[:120])
