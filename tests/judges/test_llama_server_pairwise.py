"""``scoreband judge --pairwise`` (the OpenAI-compatible endpoint path) against a real
llama.cpp server (llama-cpp-python's) serving the tiny GGUF model of tests/judges/tiny_gguf.py:
after the word PAIR it writes the one token "Verdict:" and a verdict (" A" most likely, then
"A", " B", "B", " tie": both spellings of A and B), whatever the responses, so it always
prefers the response shown first (a pure position bias); after JUDGE it writes "Score: 4"
(no verdict). Not run by CI; see tests/judges/test_llama_server.py for how to run it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from judges.llama_fixture import HOW
from PIL import Image

from tests.conftest import runner

pytest.importorskip("llama_cpp", reason=HOW)
pytest.importorskip("llama_cpp.server.app", reason=HOW)   # fastapi, uvicorn ...
pytest.importorskip("gguf", reason=HOW)

from judges import llama_fixture  # noqa: E402
from judges.tiny_gguf import VERDICT_LOGITS  # noqa: E402

from tests.knobs import knobs

pytestmark = [pytest.mark.server, pytest.mark.slow]
llama_server = llama_fixture.llama_server   # the module's server (one per module)

VERDICTS = ["A", "B", "tie"]
#: a pairwise template ending with the row's instruction cell (a trigger word: PAIR, JUDGE)
TEMPLATE = ("Instruction: {instruction}\nResponse A: {response}\nResponse B: {response_b}\n"
            "Rubric: {rubric}\nEnd with '{delimiter} X', X A or B{tie_clause}. ")


def _table(tmp_path, instructions, *, same=()):
    """A pair table: image, instruction, two caption columns (rows in ``same``: identical
    captions)."""
    rng = np.random.default_rng(0)
    rows = []
    for i, ins in enumerate(instructions):
        p = tmp_path / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(p)
        rows.append({"image": p.name, "instruction": ins, "cap_a": f"A dog on grass {i}.",
                     "cap_b": f"A dog on grass {i}." if i in same else f"Two cats {i}."})
    pd.DataFrame(rows).to_csv(tmp_path / "pairs.csv", index=False)
    return tmp_path / "pairs.csv"


def _judge(table, out, url, *extra):
    from scoreband.cli import app

    return runner.invoke(app, ["judge", "--pairwise", str(table), "--judge", "openai:tiny",
                               "--base-url", url, "--a-col", "cap_a", "--b-col", "cap_b",
                               "--allow-blind", "--out", str(out), *extra],
                         env={"COLUMNS": "200"})


def _hand(resp: dict) -> np.ndarray:
    """From the server's raw answer: p(A), p(B), p(tie) as shown, at the token after
    "Verdict:", every spelling of a verdict added, normalised over the verdicts."""
    content = resp["choices"][0]["logprobs"]["content"]
    toks = [c["token"] for c in content]
    assert toks[:2] == ["Verdict:", " A"], toks     # one token "Verdict:", then the verdict
    mass = dict.fromkeys(VERDICTS, 0.0)
    seen = set()
    for t in content[1]["top_logprobs"]:
        if t["token"] in seen:
            continue
        seen.add(t["token"])
        if t["token"].strip() in mass:
            mass[t["token"].strip()] += math.exp(t["logprob"])
    assert {" A", "A", " B", "B", " tie"} <= seen   # both spellings of A and B are there
    p = np.array([mass[v] for v in VERDICTS])
    return p / p.sum()


def _theory() -> np.ndarray:
    """p(A), p(B), p(tie) as shown from VERDICT_LOGITS (what the model was built to say)."""
    e = {t: math.exp(x) for t, x in VERDICT_LOGITS.items()}
    p = np.array([e["\u2581A"] + e["A"], e["\u2581B"] + e["B"], e["\u2581tie"]])
    return p / p.sum()


def _answers(cache) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(cache.glob("*.json"))]


def test_verdicts_equal_a_hand_computation_in_both_orders(llama_server, tmp_path):
    table = _table(tmp_path, ["Which caption fits?"] * 3)
    out = tmp_path / "sub" / "judged.csv"
    r = _judge(table, out, llama_server.url, "--template", TEMPLATE + "PAIR")
    assert r.exit_code == 0, r.output
    res = pd.read_csv(out, keep_default_na=False)
    assert len(res) == 3 and (res["pair_error"] == "").all()
    answers = _answers(tmp_path / "sub" / "judged.csv.cache")
    assert len(answers) == 6                        # two orders per pair
    hand = [_hand(resp) for resp in answers]
    # each row's A/B verdicts are one raw answer's, its B/A verdicts (mapped back: the
    # answer's "A" is the original B) another's; the six answers used once each
    used = []
    for _, row in res.iterrows():
        ab = row[["pair_ab_p_a", "pair_ab_p_b", "pair_ab_p_tie"]].to_numpy(float)
        ba = row[["pair_ba_p_b", "pair_ba_p_a", "pair_ba_p_tie"]].to_numpy(float)  # as shown
        for got in (ab, ba):
            diff = [np.abs(got - h).max() for h in hand]
            assert min(diff) < 1e-12, diff
            used.append(int(np.argmin(diff)))
        h_ab, h_ba = hand[used[-2]], hand[used[-1]]
        assert row["pair_p_a"] == pytest.approx((h_ab[0] + h_ba[1]) / 2, abs=1e-12)
        assert row["pair_position_bias"] == pytest.approx((h_ab[0] - h_ba[1]) / 2, abs=1e-12)
        # the model always prefers the response shown first: no preference once both
        # orders are averaged, and a position bias of (p(A) - p(B)) / 2 of one answer
        assert abs(row["pair_pref"]) < 1e-4
        assert row["pair_position_bias"] == pytest.approx((h_ab[0] - h_ab[1]) / 2, abs=1e-4)
        assert row["pair_position_bias"] == pytest.approx(
            (_theory()[0] - _theory()[1]) / 2, abs=1e-3)
        assert row["pair_ab_p_tie"] == pytest.approx(_theory()[2], abs=1e-3)
    assert sorted(used) == list(range(6)), used
    assert "mean position bias +0.336" in " ".join(r.output.split())


def test_an_answer_without_a_verdict_is_said_per_row_and_no_row_dropped(llama_server,
                                                                        tmp_path):
    # rows 1 and 3 end with JUDGE: the model answers "Score: 4"; row 2's captions are equal
    table = _table(tmp_path, ["PAIR", "JUDGE", "PAIR", "JUDGE"], same=(2,))
    out = tmp_path / "judged.csv"
    r = _judge(table, out, llama_server.url, "--template", TEMPLATE + "{instruction}")
    assert r.exit_code == 1, r.output    # more than half the pairs could not be judged
    assert r.exception is None or isinstance(r.exception, SystemExit)
    res = pd.read_csv(out, keep_default_na=False)
    src = pd.read_csv(table, keep_default_na=False)
    assert res[list(src.columns)].equals(src)       # every row, in order, as it was
    err = res["pair_error"].tolist()
    assert err[0] == "" and res.loc[0, "pair_ab_p_a"] != ""
    for i in (1, 3):
        assert "no 'Verdict:' in the answer" in err[i] and "'Score: 4'" in err[i], err[i]
        assert res.loc[i, "pair_p_a"] == "" and res.loc[i, "pair_position_bias"] == ""
    assert "identical" in err[2]
    said = " ".join(r.output.split())
    # numbered from 1, as in every report
    assert "row 2: no 'Verdict:'" in said and "row 4: no 'Verdict:'" in said
    assert "does not start with a verdict" in said
    assert "1 of 4 pairs judged" in said and "3 of 4 pairs could not be judged: exit status 1" \
        in said


def test_a_top_1_list_is_not_read_as_a_certain_verdict(llama_server, tmp_path):
    table = _table(tmp_path, ["Which caption fits?"] * 2)
    out = tmp_path / "judged.csv"
    r = _judge(table, out, llama_server.url, "--template", TEMPLATE + "PAIR",
               "--config", knobs(tmp_path / "k1.json", top_logprobs=1))
    said = " ".join(r.output.split())
    assert "`top_logprobs` 1 cannot list all the 3 labels" in said     # said up front
    res = pd.read_csv(out, keep_default_na=False)
    assert len(res) == 2
    assert (res["pair_ab_p_a"] == "").all(), res["pair_ab_p_a"].tolist()   # never p(A) = 1
    for e in res["pair_error"]:
        assert "only the labels ['A'] are in the judge's top-1 list" in e, e
        assert "at least 6" in e
    assert r.exit_code == 1 and "2 of 2 rows could not be judged" in said   # nothing judged
    # a list that holds every verdict's spellings is read
    r = _judge(table, tmp_path / "k6.csv", llama_server.url, "--template", TEMPLATE + "PAIR",
               "--config", knobs(tmp_path / "k6.json", top_logprobs=6))
    assert r.exit_code == 0, r.output
    res = pd.read_csv(tmp_path / "k6.csv", keep_default_na=False)
    assert (res["pair_error"] == "").all()
    assert res["pair_ab_p_a"].astype(float).to_numpy() == pytest.approx(_theory()[0], abs=1e-3)


def test_a_second_run_asks_nothing_and_writes_the_same_table(llama_server, tmp_path):
    table = _table(tmp_path, ["Which caption fits?"] * 3)
    out = tmp_path / "judged.csv"
    cache = tmp_path / "judged.csv.cache"
    before = llama_server.requests()
    r = _judge(table, out, llama_server.url, "--template", TEMPLATE + "PAIR")
    assert r.exit_code == 0, r.output
    first = out.read_bytes()
    # two orders of three pairs, and the one text-only request of the image check
    assert llama_server.requests() - before == 7
    assert len(list(cache.glob("*.json"))) == 6
    for journal in (True, False):        # resumed from the journal, or from the cache alone
        if not journal:
            for f in tmp_path.glob("judged.csv.partial*"):
                f.unlink()
        before = llama_server.requests()
        r = _judge(table, out, llama_server.url, "--template", TEMPLATE + "PAIR")
        assert r.exit_code == 0, r.output
        assert llama_server.requests() == before, journal
        assert len(list(cache.glob("*.json"))) == 6
        assert out.read_bytes() == first, journal


def test_concurrent_requests_and_the_breaker(llama_server, tmp_path):
    """`--concurrency 3` asks the server several pairs at once and writes the same table as
    one at a time; `--stop-after 2` stops asking after two pairs in a row fail at the
    judge, each later pair saying why, and the run exits 1 (the score judge's mechanisms)."""
    table = _table(tmp_path, ["Which caption fits?"] * 6)
    one, three = tmp_path / "one.csv", tmp_path / "three.csv"
    r = _judge(table, one, llama_server.url, "--template", TEMPLATE + "PAIR")
    assert r.exit_code == 0, r.output
    r = _judge(table, three, llama_server.url, "--template", TEMPLATE + "PAIR",
               "--concurrency", "3", "--cache", str(tmp_path / "c3"))
    assert r.exit_code == 0, r.output
    a = pd.read_csv(one, keep_default_na=False)
    b = pd.read_csv(three, keep_default_na=False)
    cols = ["pair_ab_p_a", "pair_ba_p_a", "pair_p_tie", "pair_error"]
    assert a[cols].equals(b[cols])
    prov = json.loads((tmp_path / "three.csv.provenance.json").read_text())
    assert prov["components"]["pair_judge"]["concurrency"] == 3
    bad = _table(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path,
                 ["JUDGE"] * 5)
    r = _judge(bad, tmp_path / "stopped.csv", llama_server.url, "--template",
               TEMPLATE + "{instruction}", "--config",
               knobs(tmp_path / "k2.json", stop_after=2))
    said = " ".join(r.output.split())
    assert r.exit_code == 1 and "stopped: 2 rows in a row failed at the judge" in said, said
    err = pd.read_csv(tmp_path / "stopped.csv", keep_default_na=False)["pair_error"].tolist()
    assert all("no 'Verdict:'" in e for e in err[:2])
    assert all(e.startswith("not asked: the run stopped") for e in err[2:]), err
