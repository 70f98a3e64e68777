"""The endpoint judge against an in-process OpenAI-compatible server (HTTP/1.1, keep-alive):
one client per run, concurrency in row order, what is retried and what is not, the stop
after consecutive failures, image conversion, ambiguous scales, top-k lists too short to
show the labels, empty / cut answers, blind models, the served model in the provenance and
the command's exit status."""

from __future__ import annotations

import base64
import io
import json
import socket
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from judges.fake_openai import FakeOpenAI, answer, image_url, top_list, user_text
from PIL import Image

from scoreband.errors import InputError
from scoreband.http import make_client, post_json
from scoreband.images import decode_image
from scoreband.judge_stage import JudgePrompt, extract_judge_table, make_judge
from tests.conftest import runner
from tests.knobs import knobs

LABELS = [str(v) for v in range(1, 6)]


def _table(tmp_path, responses, *, size=(24, 20)):
    rng = np.random.default_rng(0)
    names = []
    for i in range(len(responses)):
        p = tmp_path / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(p)
        names.append(p.name)
    return pd.DataFrame({"image": names, "instruction": ["Rate it."] * len(responses),
                         "response": list(responses)})


def _row_score(body):
    """An answer whose score depends on the row ("row 7" -> label 3): order matters."""
    i = int(user_text(body).split("row ")[1].split()[0])
    lab = str(1 + i % 5)
    probs = {f" {lab}": 0.7, lab: 0.1, f" {1 + (i + 1) % 5}": 0.15}
    probs.update({f" w{j}": 0.001 for j in range(30)})
    return 200, answer(["Ok", ".", " Score", ":", f" {lab}"],
                       top_list(probs, body["top_logprobs"]))


def _judge(url, **kw):
    return make_judge("openai:m", JudgePrompt(1, 5), base_url=url, **kw)


# ------------------------------------------------------------------ speed: client, concurrency
def test_one_client_keeps_alive_and_concurrency_keeps_row_order(tmp_path):
    df = _table(tmp_path, [f"row {i} text" for i in range(24)])
    with FakeOpenAI(_row_score, delay=0.02) as srv:
        one, bad1 = extract_judge_table(df, _judge(srv.url), base_dir=tmp_path)
        assert bad1 == 0
        assert len(srv.connections) == 1            # 24 requests over one kept-alive socket
        assert srv.max_inflight == 1
        srv.connections.clear()
        j4 = _judge(srv.url, concurrency=4)
        four, bad4 = extract_judge_table(df, j4, base_dir=tmp_path, concurrency=4)
        assert bad4 == 0
        assert srv.max_inflight == 4                # four in flight, never more
        assert len(srv.connections) <= 4
    expected = np.array([1 + i % 5 for i in range(24)], dtype=float)
    np.testing.assert_array_equal(four["judge_argmax"].to_numpy(), expected)  # row order
    pd.testing.assert_frame_equal(one, four)


def test_concurrent_rows_are_journaled_and_resumed(tmp_path):
    df = _table(tmp_path, [f"row {i} text" for i in range(20)])
    journal = tmp_path / "out.partial.jsonl"
    with FakeOpenAI(_row_score) as srv:
        extract_judge_table(df.iloc[:10], _judge(srv.url, concurrency=3), base_dir=tmp_path,
                            journal=journal, concurrency=3)     # as if killed after 10 rows
        calls = srv.calls
        res, bad = extract_judge_table(df, _judge(srv.url, concurrency=3), base_dir=tmp_path,
                                       journal=journal, concurrency=3)
        assert srv.calls == calls + 10                # only the 10 others are asked
    assert bad == 0 and res.attrs["reused_rows"] == 10
    np.testing.assert_array_equal(res["judge_argmax"], [1 + i % 5 for i in range(20)])


def test_concurrency_refused_for_a_local_style_judge():
    from scoreband.judge_stage import JudgeStage

    class Serial:
        name, prompt = "hf:x", JudgePrompt(1, 5)

        def describe(self):
            return {}

    with pytest.raises(InputError, match="one row at a time"):
        JudgeStage(Serial(), concurrency=2)


# ------------------------------------------------------------------ retries
@pytest.mark.parametrize("failure,retried", [
    ((503, {"error": {"message": "busy"}}), True),
    ((502, {"error": {"message": "bad gateway"}}), True),
    ((429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}), True),
    ("close", True),                                  # connection dropped mid-request
    ((500, {"error": {"message": "failed to load image"}}), False),
    ((400, {"error": {"message": "bad request"}}), False),
])
def test_retries_only_what_a_retry_can_fix(failure, retried):
    state = {"n": 0}

    def respond(body):
        state["n"] += 1
        return failure if state["n"] <= 2 else (200, {"ok": True})

    with FakeOpenAI(respond) as srv, make_client(5.0) as client:
        if retried:
            assert post_json(srv.url + "/x", {}, retries=3, backoff=0.01, client=client) == \
                {"ok": True}
            assert srv.calls == 3
        else:
            with pytest.raises(RuntimeError, match="not retried") as e:
                post_json(srv.url + "/x", {}, retries=3, backoff=0.01, client=client)
            assert srv.calls == 1 and failure[1]["error"]["message"] in str(e.value)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_a_dead_server_fails_at_once():
    t = time.monotonic()
    with pytest.raises(RuntimeError, match="cannot connect to http://127.0.0.1:.*is the server "
                                           "running"):
        post_json(f"http://127.0.0.1:{_closed_port()}/v1/chat/completions", {}, retries=4,
                  backoff=1.0)
    assert time.monotonic() - t < 2.0                 # no back-off: nothing to wait for


def test_a_timeout_is_not_retried():
    with FakeOpenAI(delay=1.0) as srv:
        with pytest.raises(RuntimeError, match="no answer within 0.3 s"):
            post_json(srv.url + "/chat/completions", {"top_logprobs": 1}, timeout=0.3,
                      retries=3, backoff=0.01)
        assert srv.calls == 1


# ------------------------------------------------------------------ stop after K failures
def test_stop_after_consecutive_failures_names_the_cause(tmp_path):
    df = _table(tmp_path, [f"row {i}" for i in range(30)])
    df.loc[2, "image"] = "missing.png"             # the row's own input: does not count
    with FakeOpenAI(lambda b: (500, {"error": {"message": "image format not supported"}})
                    ) as srv:
        res, bad = extract_judge_table(df, _judge(srv.url, retries=4, backoff=1.0),
                                       base_dir=tmp_path, stop_after=5)
        assert srv.calls == 5                         # then nothing more is asked
    assert bad == 30
    assert "image file not found" in res.loc[2, "judge_error"]
    cause = res.attrs["summary"]["stopped"]
    assert cause.startswith("5 rows in a row failed at the judge; the last: endpoint refused "
                            "the request (HTTP 500: image format not supported")
    assert (res.loc[6:, "judge_error"] ==
            "not asked: the run stopped (5 rows in a row failed at the judge)").all()


def test_a_success_resets_the_count(tmp_path):
    df = _table(tmp_path, [f"row {i} {'OK' if i % 3 == 2 else 'BAD'}" for i in range(12)])

    def respond(body):
        if "BAD" in user_text(body):
            return 400, {"error": {"message": "nope"}}
        return _row_score(body)

    with FakeOpenAI(respond) as srv:
        res, bad = extract_judge_table(df, _judge(srv.url), base_dir=tmp_path, stop_after=3)
    assert bad == 8 and "stopped" not in res.attrs["summary"]


# ------------------------------------------------------------------ images
def _save(im, path, **kw):
    im.save(path, **kw)
    return path.name


def test_images_other_than_plain_png_jpeg_are_converted(tmp_path):
    rng = np.random.default_rng(1)
    rgb = Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8))
    exif = Image.Exif()
    exif[0x0112] = 6                                  # turned: upright is 20 wide, 30 high
    rgba = rgb.convert("RGBA")
    rgba.putalpha(128)
    files = {
        "webp": _save(rgb, tmp_path / "a.webp", lossless=True),
        "tiff": _save(rgb, tmp_path / "a.tiff"),
        "gif": _save(rgb.convert("P"), tmp_path / "a.gif"),
        "bmp": _save(rgb, tmp_path / "a.bmp"),
        "rgba_png": _save(rgba, tmp_path / "rgba.png"),
        "png16": _save(Image.fromarray(rng.integers(0, 65535, (20, 30), dtype=np.uint16)),
                       tmp_path / "g16.png"),
        "turned_jpeg": _save(rgb, tmp_path / "t.jpg", exif=exif),
        "png": _save(rgb, tmp_path / "a.png"),
        "jpeg": _save(rgb, tmp_path / "a.jpg", quality=90),
    }
    df = pd.DataFrame({"image": list(files.values()), "instruction": ["Rate it."] * len(files),
                       "response": list(files)})
    with FakeOpenAI() as srv:
        res, bad = extract_judge_table(df, _judge(srv.url), base_dir=tmp_path)
        sent = {user_text(b).split("Response: ")[1].split("\n")[0]: image_url(b)
                for b in srv.bodies if image_url(b)}
    assert bad == 0, res["judge_error"].tolist()
    for kind, name in files.items():
        mime, b64 = sent[kind].removeprefix("data:").split(";base64,")
        data = base64.b64decode(b64)
        original = (tmp_path / name).read_bytes()
        if kind in ("png", "jpeg"):                   # plain: uploaded as they are
            assert mime == f"image/{kind}" and data == original
            continue
        assert mime == "image/png" and data[:8] == b"\x89PNG\r\n\x1a\n", kind
        # the endpoint sees the picture scoreband's one decoder gives
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data))),
                                      np.asarray(decode_image(tmp_path / name)), err_msg=kind)
    assert Image.open(io.BytesIO(base64.b64decode(sent["turned_jpeg"].split(",")[1]))
                      ).size == (20, 30)


# ------------------------------------------------------------------ labels
def test_labels_that_start_other_labels_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"'1' / '10'.*single digits"):
        make_judge("openai:m", JudgePrompt(1, 10), base_url="http://127.0.0.1:1/v1")
    make_judge("openai:m", JudgePrompt(0, 9), base_url="http://127.0.0.1:1/v1")


def test_a_top_list_too_short_for_the_labels_is_flagged_not_certain(tmp_path):
    df = _table(tmp_path, ["a", "b"])
    probs = {" 3": 0.28, " The": 0.2, " It": 0.15, " 4": 0.12, "4": 0.05, " 2": 0.1}
    probs.update({f" w{i}": 0.004 for i in range(25)})

    def respond(body):
        return 200, answer(["Ok", ".", " Score", ":", " 3"], top_list(probs, body["top_logprobs"]))

    with FakeOpenAI(respond) as srv:
        with pytest.warns(UserWarning, match="`top_logprobs` 1 cannot list all the 5 labels"):
            j1 = _judge(srv.url, top_logprobs=1)
        res, bad = extract_judge_table(df, j1, base_dir=tmp_path)
        assert bad == 2
        row = res.iloc[0]
        assert "only the labels ['3'] are in the judge's top-1 list; the others may hold up " \
               "to 72% of the score probability" in row["judge_error"]
        assert np.isnan(row["judge_expected"]) and np.isnan(row["logp_3"])   # not p = 1
        np.testing.assert_allclose(row["judge_missing_mass"], 0.72)
        np.testing.assert_allclose(row["judge_unseen_mass"], 0.72)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            j20 = _judge(srv.url, top_logprobs=20)
        res, bad = extract_judge_table(df, j20, base_dir=tmp_path)
    assert bad == 0
    row = res.iloc[0]
    # "1" and "5" are unlisted, each spelling below the 20th entry (0.004)
    assert 0 < row["judge_unseen_mass"] < 0.05
    p = np.exp(row[[f"logp_{v}" for v in LABELS]].to_numpy(float))
    np.testing.assert_allclose(p[1:4], np.array([0.1, 0.28, 0.17]) / 0.55)


# ------------------------------------------------------------------ answers said in their words
@pytest.mark.parametrize("doc,said,not_said", [
    (answer([], None, finish="stop", content=""), "the model's answer is empty: no token "
     "(finish_reason 'stop': the model ended its answer at once)", "does not support"),
    (answer([], None, finish="stop", content="", logprobs=False), "answer is empty",
     "does not support"),
    (answer(["The", " image", " shows"], None, finish="length"),
     "finish_reason 'length': the answer was cut at `max_tokens` 256; raise it", None),
    (answer(["Score", ":"], None, finish="length"), "ends at the score delimiter, with no "
     "score after it (finish_reason 'length'", None),
    (answer(["Score: 4"], None, logprobs=False), "returned no log-probs; it (or the endpoint) "
     "does not support `logprobs`", None),
])
def test_answers_without_a_score_are_said_in_their_words(tmp_path, doc, said, not_said):
    df = _table(tmp_path, ["x"])
    with FakeOpenAI(lambda b: (200, doc)) as srv:
        res, bad = extract_judge_table(df, _judge(srv.url), base_dir=tmp_path)
    assert bad == 1 and said in res.loc[0, "judge_error"]
    if not_said:
        assert not_said not in res.loc[0, "judge_error"]


# ------------------------------------------------------------------ blind models
def _counting(sees: bool):
    def respond(body):
        n = len(user_text(body)) // 4 + (256 if sees and image_url(body) else 0)
        code, doc = _row_score(body) if "top_logprobs" in body else (200, answer(["x"], None))
        doc["usage"] = {"prompt_tokens": n, "completion_tokens": 1, "total_tokens": n + 1}
        return code, doc
    return respond


def test_a_model_that_does_not_see_the_image_stops_the_run(tmp_path):
    df = _table(tmp_path, [f"row {i}" for i in range(6)])
    with FakeOpenAI(_counting(sees=False)) as srv:
        res, bad = extract_judge_table(df, _judge(srv.url), base_dir=tmp_path)
        assert srv.calls == 2                          # the first row and the check
    assert bad == 6
    assert "does not see the images: its prompt counts" in res.attrs["summary"]["stopped"]
    assert "text-only model" in res.loc[0, "judge_error"]
    assert (res.loc[1:, "judge_error"] == "not asked: the run stopped (the model 'm' at "
            f"{srv.url} does not see the images)").all()
    with FakeOpenAI(_counting(sees=False)) as srv:
        j = _judge(srv.url, allow_blind=True)
        res, bad = extract_judge_table(df, j, base_dir=tmp_path)
    assert bad == 0 and j.run_info()["image_check"]["image_seen"] is False
    assert "does not see" in res.attrs["summary"]["blind"]
    with FakeOpenAI(_counting(sees=True)) as srv:
        j = _judge(srv.url)
        res, bad = extract_judge_table(df, j, base_dir=tmp_path)
        assert srv.calls == 7
    assert bad == 0 and j.run_info()["image_check"]["image_seen"] is True
    assert res.attrs["summary"] == {}


# ------------------------------------------------------------------ the command
def _cli(args):
    from scoreband.cli import app

    return runner.invoke(app, ["judge", *args], env={"COLUMNS": "200"})


def test_command_out_folder_provenance_served_model_and_exit_status(tmp_path):
    df = _table(tmp_path, [f"row {i} {'BAD' if i in (1, 2, 3) else 'OK'}" for i in range(4)])
    df.to_csv(tmp_path / "t.csv", index=False)

    def respond(body):
        if "BAD" in user_text(body):
            return 400, {"error": {"message": "nope"}}
        code, doc = _row_score(body)
        doc["model"] = "/models/tiny-q4.gguf"
        return code, doc

    with FakeOpenAI(respond) as srv:
        out = tmp_path / "new" / "folder" / "judged.csv"
        r = _cli([str(tmp_path / "t.csv"), "--judge", "openai:tiny", "--base-url", srv.url,
                  "--out", str(out), "--concurrency", "2"])
        assert r.exit_code == 1, r.output               # 3 of 4 rows failed: most
        assert "3 of 4 rows could not be judged: exit status 1" in r.output
        assert out.exists()                             # the folder was made; rows kept
        prov = json.loads(out.with_name("judged.csv.provenance.json").read_text())
        judge = prov["components"]["judge"]
        assert judge["model_requested"] == "tiny"
        assert judge["model_served"] == ["/models/tiny-q4.gguf"]
        assert judge["endpoint_models"] == ["fake-model.gguf"]     # its GET /models
        assert judge["concurrency"] == 2
        df.loc[1:2, "response"] = ["row 1 OK", "row 2 OK"]
        df.to_csv(tmp_path / "t2.csv", index=False)
        r = _cli([str(tmp_path / "t2.csv"), "--judge", "openai:tiny", "--base-url", srv.url,
                  "--out", str(tmp_path / "j2.csv")])
        assert r.exit_code == 0, r.output               # 3 of 4: fine
        assert "the server reports /models/tiny-q4.gguf" in r.output


def test_command_dead_server_stops_early_and_scale_past_nine_is_refused(tmp_path):
    df = _table(tmp_path, [f"row {i}" for i in range(40)])
    df.to_csv(tmp_path / "t.csv", index=False)
    t = time.monotonic()
    r = _cli([str(tmp_path / "t.csv"), "--judge", "openai:m", "--base-url",
              f"http://127.0.0.1:{_closed_port()}/v1", "--out", str(tmp_path / "o.csv"),
              "--config", knobs(tmp_path / "k.json", stop_after=3)])
    assert r.exit_code == 1
    assert "stopped: 3 rows in a row failed at the judge; the last: cannot connect" in \
        " ".join(r.output.split())
    assert time.monotonic() - t < 20
    r = _cli([str(tmp_path / "t.csv"), "--judge", "openai:m", "--scale", "1,10",
              "--out", str(tmp_path / "o2.csv")])
    assert r.exit_code == 2 and "'1' / '10'" in r.output
