"""The pairwise-systems section of the HTML report: win matrix with intervals, win rates and
Bradley-Terry strengths as a forest plot, the judge's position bias by task; rendered in
headless Chromium with every figure visible."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from scoreband.errors import InputError
from scoreband.pairwise.extract import judge_pairs, make_pair_judge
from scoreband.pairwise.ranking import rank_systems
from scoreband.pairwise.report import position_bias_by_task, win_matrix
from scoreband.report.html import write_report
from scoreband.world.pairwise import world_pairs

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def ranking(tmp_path_factory):
    df = world_pairs(150, seed=3)
    judged, _ = judge_pairs(df, make_pair_judge("sim-pair-biased"))
    judged.loc[np.random.default_rng(0).random(len(judged)) > 0.3, "human"] = ""
    doc, _ = rank_systems(judged, label_col="human",
                          probs=["pair_p_a", "pair_p_b", "pair_p_tie"])
    doc["position_bias"] = position_bias_by_task(judged)
    d = tmp_path_factory.mktemp("pw")
    (d / "rank.json").write_text(json.dumps(doc))
    write_report([d / "rank.json"], d / "rank.html")
    return d, doc


def test_the_section_shows_the_matrix_the_forest_and_the_bias(ranking):
    d, doc = ranking
    html = (d / "rank.html").read_text()
    caps = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)
    assert [c.split(":")[0].split(" ")[0] for c in caps] == ["Win", "Each", "The"]
    assert "position bias" in caps[2] and "pairwise: which system wins" in html
    # the simulated judge's bias (0.12) is what each task shows, within its interval
    for task, v in doc["position_bias"]["tasks"].items():
        assert v["ci"][0] - 0.02 < 0.12 < v["ci"][1] + 0.02, task
    names, p, lo, hi, _ = win_matrix(doc)
    off = ~np.eye(len(names), dtype=bool)
    assert np.allclose((p + p.T)[off], 1)
    has = off & np.isfinite(lo)
    assert has.sum() >= 6 and np.all((lo[has] <= p[has]) & (p[has] <= hi[has]))
    assert f"{p[0, 1]:.2f}" in html  # the matrix's numbers are in the page
    assert "Bradley-Terry strength" in html and "win rate" in html


def test_an_edited_pairwise_file_is_refused_by_name(ranking, tmp_path):
    d, doc = ranking
    bad = dict(doc, ranking=[dict(doc["ranking"][0], ranks="1-2")])
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"bad.json: .*ranking"):
        write_report([tmp_path / "bad.json"], tmp_path / "x.html")


def test_without_position_bias_the_section_has_two_figures(ranking, tmp_path):
    _, doc = ranking
    doc = {k: v for k, v in doc.items() if k != "position_bias"}
    out = write_report([doc], tmp_path / "r.html")
    assert out.read_text().count("<figure>") == 2


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium (.ci/run does)")
def test_every_pairwise_figure_is_visible_in_chromium(ranking, tmp_path):
    d, _ = ranking
    page = d / "rank.html"
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--enable-logging=stderr", "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND"]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0 and "net::ERR" not in dom.stderr, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr
    assert dom.stdout.count("<svg") == page.read_text().count("<svg") == 3
    figures = re.findall(r"<figure>(.*?)<figcaption>", page.read_text(), flags=re.S)
    for i, fig in enumerate(figures):
        one = tmp_path / f"f{i}.html"
        one.write_text(f"<!doctype html><html><body style='margin:0;background:#fff'>"
                       f"<div style='width:900px'>{fig}</div></body></html>")
        shot = tmp_path / f"f{i}.png"
        r = subprocess.run([*base, "--window-size=900,900", f"--screenshot={shot}",
                            one.as_uri()], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-1000:]
        im = np.asarray(Image.open(shot).convert("L"), dtype=float)
        assert (im < 200).mean() > 0.002 and im.std() > 5, i


def test_skipped_systems_listed_in_the_section(tmp_path):
    """A system with no human-labeled pair is named in the report with why it is not
    ranked."""
    df = world_pairs(60, seed=5)
    judged, _ = judge_pairs(df, make_pair_judge("sim-pair-fair"))
    judged.loc[(judged.system_a == "sys-d") | (judged.system_b == "sys-d"), "human"] = ""
    doc, _ = rank_systems(judged, label_col="human",
                          probs=["pair_p_a", "pair_p_b", "pair_p_tie"])
    assert list(doc["skipped_systems"]) == ["sys-d"]
    (tmp_path / "r.json").write_text(json.dumps(doc))
    write_report([tmp_path / "r.json"], tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert "Systems not ranked" in html and "sys-d" in html
