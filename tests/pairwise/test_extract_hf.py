"""`judge --pairwise` with a local transformers VLM (a tiny random LLaVA written here and
loaded through the same `hf:` code as a real one): the verdict probabilities of both orders
equal an independent computation from the saved model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy.special import logsumexp

from tests.conftest import runner

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory):
    from tiny_models import tiny_llava

    return tiny_llava(tmp_path_factory.mktemp("models") / "tiny-llava")


def _table(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(
            tmp_path / f"img{i}.png")
        rows.append({"id": f"{i:05d}", "image": f"img{i}.png", "instruction": "Describe it.",
                     "response_a": f"There are {i + 2} red circles.",
                     "response_b": "Score: 4 blue squares."})
    rows.append({"id": "00099", "image": "img0.png", "instruction": "Describe it.",
                 "response_a": "Same.", "response_b": "Same."})
    pd.DataFrame(rows).to_csv(tmp_path / "pairs.csv", index=False)
    return tmp_path / "pairs.csv"


def _hand(llava_dir, image, text, labels):
    """p over the verdict labels at the forced position after " Verdict:", every
    spelling of a label (with or without the byte-level space mark) added."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    proc = AutoProcessor.from_pretrained(llava_dir)
    model = AutoModelForImageTextToText.from_pretrained(llava_dir).eval()
    full = f"USER: <image>\n{text} ASSISTANT: Verdict:"
    with Image.open(image) as im:
        inputs = proc(images=im.convert("RGB"), text=full, return_tensors="pt")
    with torch.inference_mode():
        logp = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1).numpy()
    tok = proc.tokenizer
    out = []
    for lab in labels:
        ids = [i for i in range(len(tok)) if tok.convert_ids_to_tokens(i).lstrip("\u0120") == lab]
        assert ids, lab  # every spelling ("A", "ĠA" where the vocabulary has it) added
        out.append(logsumexp(logp[ids]))
    p = np.exp(np.array(out) - logsumexp(out))
    return p


def test_local_vlm_pairwise_both_orders_equal_a_hand_computation(llava_dir, tmp_path):
    from scoreband.cli import app
    from scoreband.pairwise.extract import PairPrompt

    table = _table(tmp_path)
    out = tmp_path / "judged.csv"
    # the tiny tokenizer spells "tie" with three tokens: refused with the fix, before any work
    r = runner.invoke(app, ["judge", "--pairwise", str(table), "--judge", f"hf:{llava_dir}",
                            "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code != 0 and not out.exists()
    said = " ".join(r.output.split())
    assert "verdict label(s) ['tie'] are not single tokens" in said and "--tie-token" in said
    r = runner.invoke(app, ["judge", "--pairwise", str(table), "--judge", f"hf:{llava_dir}",
                            "--tie-token", "C", "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    res = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(res["id"]) == ["00000", "00001", "00002", "00099"]   # cells kept as written
    assert "identical" in res.loc[3, "pair_error"] and res.loc[3, "pair_p_a"] == ""
    prompt = PairPrompt(tie="C")
    for i in range(3):
        row = res.iloc[i]
        a, b = row["response_a"], row["response_b"]
        img = tmp_path / row["image"]
        ab = _hand(llava_dir, img, prompt.render("Describe it.", a, b), ["A", "B", "C"])
        ba_shown = _hand(llava_dir, img, prompt.render("Describe it.", b, a), ["A", "B", "C"])
        ba = ba_shown[[1, 0, 2]]  # mapped back: the B/A answer's "A" is the original B
        got_ab = row[["pair_ab_p_a", "pair_ab_p_b", "pair_ab_p_tie"]].to_numpy(float)
        got_ba = row[["pair_ba_p_a", "pair_ba_p_b", "pair_ba_p_tie"]].to_numpy(float)
        np.testing.assert_allclose(got_ab, ab, atol=1e-5)
        np.testing.assert_allclose(got_ba, ba, atol=1e-5)
        np.testing.assert_allclose(float(row["pair_pref"]), (ab[0] + ba[0] - ab[1] - ba[1]) / 2,
                                   atol=1e-5)
        np.testing.assert_allclose(float(row["pair_position_bias"]), (ab[0] - ba[0]) / 2,
                                   atol=1e-5)


def test_pairwise_template_and_rubric_are_used_and_checked(llava_dir, tmp_path):
    from scoreband.cli import app

    table = _table(tmp_path)
    out = tmp_path / "judged.csv"
    r = runner.invoke(app, ["judge", "--pairwise", str(table), "--judge", f"hf:{llava_dir}",
                            "--no-tie", "--template", "Q: {instruction} A: {response} B: "
                            "{response_b} {oops}", "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code != 0 and "unknown field {oops}" in " ".join(r.output.split())
    assert not out.exists()
    r1 = runner.invoke(app, ["judge", "--pairwise", str(table), "--judge", f"hf:{llava_dir}",
                             "--no-tie", "--out", str(out)])
    assert r1.exit_code == 0, r1.output
    other = tmp_path / "judged2.csv"
    r2 = runner.invoke(app, ["judge", "--pairwise", str(table), "--judge", f"hf:{llava_dir}",
                             "--no-tie", "--rubric", "prefer the shorter response.",
                             "--out", str(other)])
    assert r2.exit_code == 0, r2.output
    p1 = pd.read_csv(out)["pair_ab_p_a"].to_numpy(float)[:3]
    p2 = pd.read_csv(other)["pair_ab_p_a"].to_numpy(float)[:3]
    assert np.isfinite(p1).all() and not np.allclose(p1, p2)  # the rubric reached the model
    assert (pd.read_csv(out)["pair_ab_p_tie"].fillna(0) == 0).all()  # --no-tie: A or B only
