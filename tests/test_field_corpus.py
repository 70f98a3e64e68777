"""The field corpus: inputs of a hostile or careless user that the bad-input corpus
(tests/test_bad_input.py) did not hold, one class per mechanism (the output policy, the HTTP
policy, the image decoder, declared schemas, option bounds, tables, benchmark folders).

Every case checks the same invariants: a clean exit (0, 1 or 2, never a traceback or an
"unexpected" error), the message naming the option, file or field, and **every input file
byte-identical afterwards** (the workspace is hashed before and after each case)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from scoreband.cli import app
from tests.conftest import EXAMPLE_FLAGS, copy_world, runner
from tests.golden.cases import judge_table

EX = EXAMPLE_FLAGS
KEY = "sk-field-SECRET-0123456789"


def _hashes(root: Path) -> dict[str, str]:
    """A fingerprint of every file under ``root``: the bytes' sha256; for a file above
    64 MiB (the 1.5 GB sparse image, which reading twice per case made each case take
    3 s), its size, modification time and first and last MiB."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            if st.st_size > 64 << 20:
                with open(p, "rb") as f:
                    head = f.read(1 << 20)
                    f.seek(-(1 << 20), 2)
                    tail = f.read()
                h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode() + head + tail)
            else:
                h = hashlib.sha256(p.read_bytes())
            out[str(p.relative_to(root))] = h.hexdigest()
    return out


# ------------------------------------------------------------------ a fake endpoint
class _Field(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that misbehaves as the prompt asks (a marker in the
    response column); a second one, on another port, records what reaches it."""

    other = ""  # base URL of the other origin
    seen: list = []

    def log_message(self, *a):
        pass

    def _body(self):
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def do_POST(self):  # noqa: N802, C901
        _Field.seen.append((self.server.server_address[1], dict(self.headers)))
        body = self._body()
        text = body["messages"][0]["content"][0]["text"] if "messages" in body else ""
        kind = next((k for k in ("REDIRECT_OTHER", "REDIRECT_SAME", "TRICKLE", "CUT",
                                 "NONUTF8", "NULLCHOICE", "STRCONTENT", "EMPTYTOP", "HUGE",
                                 "LIST", "POSITIVE", "DUPTOP") if k in text), "OK")
        if self.path.endswith("/final/chat/completions"):
            kind = "OK"
        if kind == "REDIRECT_OTHER":
            return self._redirect(f"{_Field.other}/v1/chat/completions")
        if kind == "REDIRECT_SAME":
            return self._redirect("/v1/final/chat/completions")
        if kind == "TRICKLE":  # headers at once, then a byte every 0.3 s
            self.send_response(200)
            self.send_header("Content-Length", "200")
            self.end_headers()
            for _ in range(40):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.3)
            return
        if kind == "CUT":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"choices": [')
            return
        if kind == "NONUTF8":
            return self._raw(200, b'{"choices": "\xff\xfe\xfa"}')
        if kind == "HUGE":
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 40))
            self.end_headers()
            return
        if kind == "LIST":
            return self._raw(200, b"[1, 2, 3]")
        tokens = ["Score", ":", " 4"]
        top = [{"token": " 4", "logprob": -0.2}, {"token": " 3", "logprob": -1.8}]
        content = [{"token": t, "logprob": -0.01, "top_logprobs": [
            {"token": t, "logprob": -0.01}]} for t in tokens]
        content[-1]["top_logprobs"] = [] if kind == "EMPTYTOP" else top
        if kind == "POSITIVE":
            content[-1]["top_logprobs"] = [{"token": " 4", "logprob": 0.7}]
        if kind == "DUPTOP":  # one token listed twice would count its mass twice
            content[-1]["top_logprobs"] = [{"token": " 4", "logprob": -0.1},
                                           {"token": " 4", "logprob": -0.1},
                                           {"token": " 3", "logprob": -0.2}]
        choice = {"index": 0, "message": {"role": "assistant", "content": "Score: 4"},
                  "logprobs": {"content": "Score: 4" if kind == "STRCONTENT" else content}}
        doc = {"choices": [None] if kind == "NULLCHOICE" else [choice]}
        return self._raw(200, json.dumps(doc).encode())

    def _redirect(self, where):
        self.send_response(307)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _raw(self, code, data):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _serve(handler):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.fixture(scope="module")
def endpoints():
    a, url_a = _serve(_Field)
    b, url_b = _serve(_Field)
    _Field.other = url_b
    # a port that does not speak HTTP: it answers every connection with a banner
    raw = socket.socket()
    raw.bind(("127.0.0.1", 0))
    raw.listen(8)
    stop = threading.Event()

    def banner():
        raw.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = raw.accept()
            except OSError:
                continue
            c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            c.close()

    threading.Thread(target=banner, daemon=True).start()
    yield {"a": url_a + "/v1", "b_port": b.server_address[1],
           "raw": f"http://127.0.0.1:{raw.getsockname()[1]}/v1"}
    stop.set()
    a.shutdown()
    b.shutdown()
    raw.close()


# ------------------------------------------------------------------ the workspace
@pytest.fixture(scope="module")
def w(tmp_path_factory, world_dir):
    w = tmp_path_factory.mktemp("field")
    assert runner.invoke(app, ["example", "--out", str(w / "ex.csv")]).exit_code == 0
    ex = pd.read_csv(w / "ex.csv").head(300)
    ex.to_csv(w / "small.csv", index=False)
    r = runner.invoke(app, ["calibrate", str(w / "small.csv"), *EX, "--out",
                            str(w / "cal.json")])
    assert r.exit_code == 0, r.output
    doc = json.loads((w / "cal.json").read_text())
    doc.pop("checksum")
    for name, edit in {
        "inputs_unknown": lambda d: d["inputs"].update(bogus=1),
        "inputs_list": lambda d: d.update(inputs=[1, 2]),
        "inputs_nratings": lambda d: d["inputs"].update(n_ratings="three"),
        "inputs_nocolumns": lambda d: d["inputs"].pop("columns"),
        "top_unknown": lambda d: d.update(comment="hand-edited"),
        "scale_text": lambda d: d["scale"].update(lo="one"),
    }.items():
        d = json.loads(json.dumps(doc))
        edit(d)
        (w / f"{name}.json").write_text(json.dumps(d))
    (w / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    # judge's rarely used knobs (--config): bad values, and the field runs' own
    for name, knobs in {"timeout_neg": {"timeout": -1}, "retries_neg": {"retries": -1},
                        "toplp_neg": {"top_logprobs": -1},
                        "field": {"timeout": 2, "retries": 0, "stop_after": 0},
                        "raw": {"timeout": 2, "retries": 0}, "noretry": {"retries": 0},
                        "lr_neg": {"lr": -1}}.items():
        (w / f"knobs_{name}.json").write_text(json.dumps(knobs))
    os.mkfifo(w / "fifo.json")
    os.mkfifo(w / "fifo.csv")
    lines = ex.head(120).to_json(orient="records", lines=True).splitlines()
    lines[7] = lines[7][:25]  # torn by a crash
    (w / "torn.jsonl").write_text("\n".join(lines) + "\n")
    (w / "latin1.csv").write_bytes("id,median\n1,0.5\ncaf\xe9,0.6\n".encode("latin-1"))
    (w / "link.csv").symlink_to(w / "small.csv")
    os.link(w / "small.csv", w / "hard.csv")
    # a results file for report
    r = runner.invoke(app, ["evaluate", str(w / "small.csv"), *EX, "--seeds", "1", "--out",
                            str(w / "metrics.json")])
    assert r.exit_code == 0, r.output
    # images and tables for score
    copy_world(world_dir, w / "world", 6)
    wt = pd.read_csv(w / "world" / "world.csv")
    with open(w / "world" / "huge.png", "wb") as f:  # 1.5 GB, sparse: costs no disk
        f.truncate(1_500_000_000)
    wt["image"] = wt["image"].astype(object)
    wt.loc[0, "image"] = "huge.png"
    wt.loc[1, "image"] = "x" * 300 + ".png"
    wt["note"] = [None, None, None, "a", "b", "c"]
    wt["bigid"] = [str(2**70 + i) for i in range(len(wt))]
    wt.to_csv(w / "world" / "odd.csv", index=False)
    # a 16-bit greyscale copy of an 8-bit image, and its 8-bit twin
    g8 = np.asarray(Image.open(w / "world" / wt.loc[2, "image"]).convert("L"))
    Image.fromarray(g8, "L").save(w / "world" / "grey8.png")
    im16 = Image.fromarray(g8.astype(np.uint16) * 257)
    assert im16.mode.startswith("I;16")
    im16.save(w / "world" / "grey16.png")
    pd.DataFrame({"image": ["grey8.png", "grey16.png"],
                  "caption": [wt.loc[2, "caption"]] * 2}).to_csv(w / "world" / "bits.csv",
                                                               index=False)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table([pa.array([0.5, 0.6]), pa.array([0.1, 0.2])],
                            names=["median", "median"]), w / "dup.parquet")
    bools = ex.head(50).copy()
    bools["good"] = [True, False] * 25
    bools.to_csv(w / "bools.csv", index=False)
    jt = judge_table(120)
    jt.loc[3, "logp_1"] = 0.5
    jt.to_csv(w / "judged_pos.csv", index=False)
    (w / "model").mkdir()
    (w / "model" / "config.json").write_text('{"mine": true}\n')
    (w / "wdir").mkdir()
    (w / "wdir" / "world.csv").write_text("my own table\n")
    # a table with a column apply / score adds; a Hugging Face DatasetDict of two splits
    clash = ex.head(20).copy()
    clash["band_lo"] = "my own"
    clash.to_csv(w / "clash.csv", index=False)
    wclash = pd.read_csv(w / "world" / "world.csv").head(3)
    wclash["band_error"] = "mine"
    wclash.to_csv(w / "world" / "clash.csv", index=False)
    import pyarrow as pa

    for split in ("train", "test"):
        (w / "dsdict" / split).mkdir(parents=True)
        t = pa.Table.from_pandas(ex.head(30), preserve_index=False)
        with pa.OSFile(str(w / "dsdict" / split / "data-00000-of-00001.arrow"), "wb") as f, \
                pa.ipc.new_stream(f, t.schema) as wr:
            wr.write_table(t)
        (w / "dsdict" / split / "dataset_info.json").write_text("{}")
    (w / "dsdict" / "dataset_dict.json").write_text('{"splits": ["train", "test"]}')
    # judge rows: each response names how the endpoint misbehaves
    Image.new("RGB", (16, 16), "white").save(w / "px.png")
    kinds = ["OK", "REDIRECT_OTHER", "REDIRECT_SAME", "TRICKLE", "CUT", "NONUTF8",
             "NULLCHOICE", "STRCONTENT", "EMPTYTOP", "HUGE", "LIST", "POSITIVE", "DUPTOP"]
    pd.DataFrame({"image": ["px.png"] * len(kinds), "instruction": ["Rate it."] * len(kinds),
                  "response": kinds}).to_csv(w / "judge_rows.csv", index=False)
    return w


def _run(w, args, env=None):
    argv = [a.replace("{w}", str(w)) for a in args]
    before = _hashes(w)
    r = runner.invoke(app, argv, env=env)
    after = _hashes(w)
    changed = [k for k in before if k in after and before[k] != after[k]]
    text = " ".join(r.output.split())
    assert "Traceback" not in r.output and "unexpected" not in text, text
    assert r.exception is None or isinstance(r.exception, SystemExit), (text, r.exception)
    return r, text, changed


def _case(args, code, msg, id_=None):
    return pytest.param(args, code, msg, id=id_ or " ".join(a for a in args if a not in EX))


OUT = "--out"
CASES = [
    # ------------------------------------------------------------ data loss
    _case(["calibrate", "{w}/small.csv", *EX, OUT, "{w}/small.csv"], 2, "same file as TABLE"),
    _case(["evaluate", "{w}/small.csv", *EX, OUT, "{w}/small.csv"], 2, "same file as TABLE"),
    _case(["evaluate", "{w}/small.csv", *EX, "--html", "{w}/small.csv"], 2, "--html"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/cal.json", OUT, "{w}/cal.json"], 2,
          "same file as --calibrator"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/cal.json", OUT, "{w}/hard.csv"], 2,
          "same file as TABLE"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/cal.json", OUT, "{w}/link.csv"], 2,
          "same file as TABLE"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/cal.json", OUT, "/dev/null"], 2,
          "is a device"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/cal.json", OUT, "{w}/fifo.json"], 2,
          "is a FIFO"),
    _case(["report", "{w}/metrics.json", OUT, "{w}/metrics.json"], 2, "same file as RESULTS"),
    _case(["example", OUT, "/dev/null"], 2, "is a device"),
    _case(["score", "{w}/world/odd.csv", OUT, "{w}/world/odd.csv"], 2, "same file as TABLE"),
    _case(["judge", "{w}/judge_rows.csv", "--judge", "openai:m", OUT, "{w}/judge_rows.csv"], 2,
          "same file as TABLE"),
    _case(["roundtrip", "{w}/world/world.csv", OUT, "{w}/world/world.csv"], 2,
          "same file as TABLE"),
    _case(["train", OUT, "{w}/model", "--n-train", "20", "--n-val", "20", "--epochs", "1"], 2,
          "was not written by scoreband"),
    _case(["world", OUT, "{w}/wdir", "--n", "3"], 2, "was not written by scoreband"),
    _case(["datasets", "prepare", "composite", "{w}", OUT, "{w}/small.csv"], 2,
          "was not written by scoreband"),
    # a column of the user's with a name the command adds: refused, named, with the fix
    _case(["apply", "{w}/clash.csv", "--calibrator", "{w}/cal.json", OUT, "{w}/o.csv"], 2,
          "already has the column 'band_lo', which this command adds"),
    _case(["score", "{w}/world/clash.csv", OUT, "{w}/o.csv"], 2,
          "already has the column 'band_error', which this command adds"),
    _case(["roundtrip", "{w}/world/clash.csv", OUT, "{w}/rt_clash.csv", "--n-gen", "1"], 0,
          "3 of 3 rows scored"),  # band_error is apply's and score's, not roundtrip's
    # a DatasetDict folder is one split at a time, never pooled
    _case(["apply", "{w}/dsdict", "--calibrator", "{w}/cal.json", OUT, "{w}/o.csv"], 2,
          "DatasetDict with the splits train, test"),
    _case(["evaluate", "{w}/dsdict", *EX], 2, "dsdict/train"),
    _case(["apply", "{w}/dsdict/test", "--calibrator", "{w}/cal.json", OUT,
           "{w}/dsd_test.csv"], 0, "banded 30 of 30 rows"),
    # ------------------------------------------------------------ unbounded resources
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/fifo.json", OUT, "{w}/o.csv"], 2,
          "not a regular file"),
    _case(["apply", "{w}/small.csv", "--calibrator", "/dev/zero", OUT, "{w}/o.csv"], 2,
          "not a regular file"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/deep.json", OUT, "{w}/o.csv"], 2,
          "nested 200000 levels"),
    _case(["report", "{w}/deep.json", OUT, "{w}/r.html"], 2, "nested"),
    _case(["score", "{w}/world/odd.csv", OUT, "{w}/scored.parquet"], 0, "scored 4 of 6"),
    # ------------------------------------------------------------ malformed calibrators
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/inputs_unknown.json", OUT,
           "{w}/o.csv"], 2, "unknown key 'inputs.bogus'"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/inputs_list.json", OUT,
           "{w}/o.csv"], 2, "field 'inputs'"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/inputs_nratings.json", OUT,
           "{w}/o.csv"], 2, "field 'inputs.n_ratings'"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/inputs_nocolumns.json", OUT,
           "{w}/o.csv"], 2, "records no input columns"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/top_unknown.json", OUT,
           "{w}/o.csv"], 2, "unknown key 'comment'"),
    _case(["apply", "{w}/small.csv", "--calibrator", "{w}/scale_text.json", OUT,
           "{w}/o.csv"], 2, "scale"),
    # ------------------------------------------------------------ silent misreads
    _case(["evaluate", "{w}/bools.csv", "--target", "good", "--scale", "0,1", "--median",
           "median"], 2, "True/False"),
    _case(["judge-study", "{w}/judged_pos.csv", "--judge", "j=logp_*", "--target", "human",
           "--scale", "1,5", "--n-ratings", "3", "--seeds", "2", OUT, "{w}/js"], 0,
          "log-prob 0.5 is above 0"),
    _case(["world", "--annotators", "0", OUT, "{w}/w0"], 2, "--annotators"),
    # ------------------------------------------------------------ tables
    _case(["evaluate", "{w}/fifo.csv", *EX], 2, "not a regular file"),
    _case(["evaluate", "{w}/torn.jsonl", *EX, "--seeds", "1"], 0,
          "line(s) 8 are not JSON objects; skipped"),
    _case(["evaluate", "{w}/latin1.csv", *EX], 2, "not UTF-8 text; save the table as UTF-8"),
    _case(["evaluate", "{w}/small.csv", *EX, OUT, "{w}/same.json", "--html", "{w}/same.json"],
          2, "name the same path"),
    _case(["judge", "{w}/judge_rows.csv", "--judge", "openai:m", OUT, "{w}/j.csv",
           "--rubric", "@/dev/zero"], 2, "not a regular file"),
    _case(["apply", "{w}/dup.parquet", "--calibrator", "{w}/cal.json", OUT, "{w}/o.csv"], 2,
          "duplicated column names: 'median'"),
    # ------------------------------------------------------------ options, before any work
    _case(["judge", "{w}/judge_rows.csv", "--judge", "openai:m", OUT, "{w}/j.csv",
           "--config", "{w}/knobs_timeout_neg.json"], 2,
          "timeout is -1; expected a number of seconds > 0"),
    _case(["judge", "{w}/judge_rows.csv", "--judge", "openai:m", OUT, "{w}/j.csv",
           "--config", "{w}/knobs_retries_neg.json"], 2,
          "retries is -1; expected an integer in [0, 100]"),
    _case(["judge", "{w}/judge_rows.csv", "--judge", "openai:m", OUT, "{w}/j.csv",
           "--config", "{w}/knobs_toplp_neg.json"], 2,
          "top_logprobs is -1; expected an integer in [1, 100]"),
    _case(["train", "--epochs", "0", OUT, "{w}/t"], 2, "--epochs"),
    _case(["train", "--config", "{w}/knobs_lr_neg.json", OUT, "{w}/t"], 2,
          "lr is -1; expected a learning rate > 0"),
    _case(["world", "--n", "-1", OUT, "{w}/w1"], 2, "--n"),
    _case(["demo", "--n-test", "0", OUT, "{w}/d"], 2, "--n-test"),
    _case(["demo", "--alpha", "1.5", OUT, "{w}/d"], 2, "--alpha"),
    _case(["evaluate", "{w}/small.csv", *EX, "--method", "crc-cluster", "--lo", "q05",
           "--hi", "q95", "--embedding", "emb_*", "--clusters", "5000", "--seeds", "1"], 2,
          "--clusters"),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40, len(CASES)


@pytest.mark.parametrize("args,code,msg", CASES)
def test_field_case(w, args, code, msg):
    t0 = time.monotonic()
    r, text, changed = _run(w, args)
    assert r.exit_code == code, f"exit {r.exit_code}: {text}"
    assert msg in text, text
    assert not changed, f"inputs changed: {changed}"
    if code == 2 and args[0] in ("demo", "train"):
        assert time.monotonic() - t0 < 20, "an option error must come before any work"


# ------------------------------------------------------------ the judge against the field
def test_judge_endpoint_field(w, endpoints, monkeypatch):
    """One run over every misbehaviour: each row ends with its own reason, the good rows are
    scored, the key never reaches the other origin, a trickling server is cut off at the
    deadline."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    _Field.seen = []
    t0 = time.monotonic()
    r, text, changed = _run(w, ["judge", "{w}/judge_rows.csv", "--judge", "openai:m",
                                "--base-url", endpoints["a"], "--config",
                                "{w}/knobs_field.json", OUT, "{w}/judged_field.csv",
                                "--cache", "{w}/jcache"])
    elapsed = time.monotonic() - t0
    # most rows fail by design here: judge says so with exit 1, every row with its reason
    assert r.exit_code == 1, text
    assert "could not be judged" in text
    assert not changed
    res = pd.read_csv(w / "judged_field.csv", keep_default_na=False).set_index("response")
    err = res["judge_error"]
    assert err["OK"] == "" and err["REDIRECT_SAME"] == ""
    assert "another origin" in err["REDIRECT_OTHER"]
    assert "no answer within 2 s" in err["TRICKLE"]
    assert "mid-answer" in err["CUT"]
    assert "not UTF-8" in err["NONUTF8"]
    assert "no choices" in err["NULLCHOICE"]
    assert "malformed logprobs.content" in err["STRCONTENT"]
    assert "no top_logprobs" in err["EMPTYTOP"]
    assert "above the" in err["HUGE"]
    assert "not an object" in err["LIST"]
    assert "invalid log-prob" in err["POSITIVE"]
    assert "add up to" in err["DUPTOP"]
    for k in err.index:
        if err[k]:
            assert res.loc[k, "judge_expected"] == "", k  # a failure is never a score
    assert all(port != endpoints["b_port"] for port, _ in _Field.seen), \
        "a request reached the other origin"
    assert KEY not in (w / "judged_field.csv").read_text()
    assert elapsed < 30, elapsed  # the trickle is cut at 2 s, not held for 12


def test_judge_non_http_port(w, endpoints, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    r, text, _ = _run(w, ["judge", "{w}/judge_rows.csv", "--judge", "openai:m", "--base-url",
                          endpoints["raw"], "--config", "{w}/knobs_raw.json", OUT,
                          "{w}/judged_raw.csv"])
    assert r.exit_code == 1, text  # no row could be judged: a failure, with every reason
    res = pd.read_csv(w / "judged_raw.csv", keep_default_na=False)
    # each row asked says why; after stop_after (10) failures in a row the rest are not
    # asked, and say so
    err = res["judge_error"]
    asked = ~err.str.startswith("not asked")
    assert err[asked].str.contains("does not speak HTTP|connection").all()
    assert asked.sum() == 10 and err[~asked].str.contains("10 rows in a row").all()


def test_damaged_cache_entry_is_reported_and_asked_again(w, endpoints, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    rows = w / "one_row.csv"
    pd.DataFrame({"image": ["px.png"], "instruction": ["Rate it."],
                  "response": ["OK"]}).to_csv(rows, index=False)
    args = ["judge", str(rows), "--judge", "openai:m", "--base-url", endpoints["a"],
            "--config", str(w / "knobs_noretry.json"), OUT, str(w / "j1.csv"), "--cache",
            str(w / "c1")]
    assert runner.invoke(app, args).exit_code == 0
    (entry,) = (w / "c1").glob("*.json")
    entry.write_text('{"choices": [')  # torn by a crash
    _Field.seen = []
    r = runner.invoke(app, [*args[:-4], OUT, str(w / "j2.csv"), "--cache", str(w / "c1")])
    assert r.exit_code == 0, r.output
    assert "damaged judge cache entry" in " ".join(r.output.split())
    assert len(_Field.seen) == 1  # asked again
    assert pd.read_csv(w / "j2.csv")["judge_error"].isna().all()
    json.loads(entry.read_text())  # and the entry repaired


# ------------------------------------------------------------ score against odd files
def test_score_odd_table(w):
    """A 1.5 GB image, a 300-character path, a text column empty in the first chunk and
    integers beyond int64: rows flagged, the rest scored, every value kept exactly."""
    from scoreband.engine.rows import run_file
    from scoreband.scorers.stages import score_stage

    out = w / "odd_streamed.parquet"
    stage = score_stage(base_dir=w / "world")
    run = run_file(w / "world" / "odd.csv", stage, out, chunk_rows=3)
    assert sorted(run.failures) == [0, 1]
    assert "above the 256 MiB" in run.failures[0]
    assert "File name too long" in run.failures[1] or "not found" in run.failures[1]
    df = pd.read_parquet(out)
    assert df["bigid"].tolist() == [str(2**70 + i) for i in range(6)]
    assert df["note"].tolist()[3:] == ["a", "b", "c"]
    assert df["band_median"].notna().sum() == 4


def test_sixteen_bit_png_scores_as_its_eight_bit_twin(w):
    r = runner.invoke(app, ["score", str(w / "world" / "bits.csv"), OUT,
                            str(w / "bits_scored.csv")])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(w / "bits_scored.csv")
    assert df["band_error"].isna().all()
    np.testing.assert_allclose(df["band_median"][0], df["band_median"][1], atol=1e-6)


_HWM = ("def hwm():\n"
        "    return int([x for x in open('/proc/self/status')\n"
        "                if x.startswith('VmHWM')][0].split()[1])\n")


def _python(code: str, timeout: int = 300) -> str:
    """Run ``code`` in a fresh interpreter with ``hwm()`` (this process's VmHWM in kB; not
    ru_maxrss: Linux carries the parent's peak into a child's ru_maxrss); its output."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", _HWM + code], capture_output=True, text=True,
                         timeout=timeout)
    return res.stdout + res.stderr


def _value(text: str, key: str) -> int:
    return int(text.split(key)[-1].split()[0])


def test_score_huge_image_memory(w):
    """The 1.5 GB file is flagged without being read. The command's absolute peak stays far
    below the file's size (it is the process's baseline: torch, the model, the shift alarm's
    reference items, 440-660 MB on the development machine and bimodal from run to run by
    ~90 MB, so two runs' peaks are not compared); the decoder itself, given the file after
    a warm-up, raises the per-row error while its peak grows by less than 16 MB."""
    text = _python("import sys\n"
                   "from scoreband.cli import main\n"
                   f"sys.argv = ['scoreband', 'score', {str(w / 'world' / 'odd.csv')!r}, "
                   f"'--out', {str(w / 'huge_scored.csv')!r}]\n"
                   "try:\n    main()\nexcept SystemExit:\n    pass\n"
                   "print('PEAK_KB', hwm())\n")
    assert "above the 256 MiB" in text
    assert _value(text, "PEAK_KB") < 1_000_000, text
    text = _python("from scoreband.images import decode_image\n"
                   f"decode_image({str(w / 'world' / 'grey8.png')!r})\n"
                   "before = hwm()\n"
                   "try:\n"
                   f"    decode_image({str(w / 'world' / 'huge.png')!r})\n"
                   "except ValueError as e:\n"
                   "    print('REFUSED', e)\n"
                   "print('GROWTH_KB', hwm() - before)\n", timeout=120)
    assert "REFUSED" in text and "256 MiB" in text, text
    assert _value(text, "GROWTH_KB") < 16_000, text


@pytest.mark.slow  # a training run
def test_train_alpha_reaches_the_calibrator(tmp_path):
    r = runner.invoke(app, ["train", OUT, str(tmp_path / "m"), "--n-train", "40", "--n-val",
                            "20", "--epochs", "1", "--head-epochs", "1", "--alpha", "0.3"])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "m" / "calibrator.json").read_text())
    assert doc["calibrator"]["alpha"] == 0.3


def test_benchmark_paths_stay_inside_and_images_are_keyed_by_content(tmp_path):
    from scoreband.datasets import load_benchmark
    from scoreband.datasets.common import save_images
    from scoreband.errors import InputError

    root = tmp_path / "composite"
    (root / "images").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(root / "images" / "a.png")
    (tmp_path / "secret.png").write_bytes(b"private")
    for bad in ("../../secret.png", "/etc/passwd"):
        pd.DataFrame({"image": ["a.png", bad], "caption": ["x", "y"],
                      "ratings": ["3;4", "2;2"]}).to_csv(root / "composite.csv", index=False)
        with pytest.raises(InputError, match="leaves the benchmark folder"):
            load_benchmark("composite", root)
    (root / "images" / "out.png").symlink_to(tmp_path / "secret.png")
    pd.DataFrame({"image": ["out.png"], "caption": ["x"], "ratings": ["3"]}).to_csv(
        root / "composite.csv", index=False)
    with pytest.raises(InputError, match="leaves the benchmark folder"):
        load_benchmark("composite", root)
    import io

    def png(colour):
        b = io.BytesIO()
        Image.new("RGB", (4, 4), colour).save(b, format="PNG")
        return b.getvalue()

    first = save_images([png("red")], tmp_path / "cache", "p")
    second = save_images([png("blue")], tmp_path / "cache", "p")  # same row, new source
    assert first != second
    assert np.asarray(Image.open(second[0]))[0, 0].tolist() == [0, 0, 255]


def test_image_endpoint_decompression_bomb_is_a_row_error(tmp_path):
    import base64
    import io

    from scoreband.roundtrip.generators import GenerationError, OpenAIImageGenerator

    bomb = io.BytesIO()
    Image.new("1", (12_000, 12_000)).save(bomb, format="PNG")  # 144 Mpx, a few KB

    class _Img(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            data = json.dumps({"data": [{"b64_json": base64.b64encode(
                bomb.getvalue()).decode()}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv, url = _serve(_Img)
    try:
        g = OpenAIImageGenerator("m", base_url=url + "/v1", retries=0, api_key="k")
        with pytest.raises(GenerationError, match="image too large|not a readable"):
            g.generate("a red circle", 0)
    finally:
        srv.shutdown()


def test_chunked_parquet_keeps_one_schema(tmp_path):
    from scoreband.engine.stream import ChunkWriter

    out = tmp_path / "o.parquet"
    with ChunkWriter(out) as cw:
        cw.write(pd.DataFrame({"a": [1, 2], "t": [None, None]}))
        cw.write(pd.DataFrame({"a": [3.5, 4.0], "t": ["x", "y"]}))
        cw.write(pd.DataFrame({"a": [5, 6], "t": [7, "z"]}))
    df = pd.read_parquet(out)
    assert df["a"].tolist() == [1, 2, 3.5, 4.0, 5, 6]
    assert df["t"].tolist()[2:] == ["x", "y", "7", "z"]


def test_output_policy_in_the_api(tmp_path):
    """The policy is the library's: a folder output never loses a file it did not write,
    and an existing file that scoreband wrote there may be replaced."""
    from scoreband.errors import InputError
    from scoreband.files import atomic_write_text, output_policy

    d = tmp_path / "out"
    d.mkdir()
    (d / "user.txt").write_text("mine")
    with output_policy(folders=[d]):
        atomic_write_text(d / "made.txt", "1")
        atomic_write_text(d / "made.txt", "2")  # written by us: may be replaced
        with pytest.raises(InputError, match="not written by scoreband"):
            atomic_write_text(d / "user.txt", "x")
    assert (d / "user.txt").read_text() == "mine" and (d / "made.txt").read_text() == "2"
    with output_policy(inputs=[("`table`", d / "user.txt")]), \
            pytest.raises(InputError, match="same file as `table`"):
        atomic_write_text(d / "user.txt", "x")


# ------------------------------------------------------------ data loss, found from outside
def _cli(*args, umask: int | None = None, **kw):
    """The installed CLI in a process of its own (a real exit, real signals)."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "scoreband.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=(lambda: os.umask(umask)) if umask is not None
                            else None, **kw)


def test_apply_never_deletes_its_input_or_another_commands_journal(w, tmp_path):
    """``apply T.json.partial.jsonl --out T.json`` (a write that is not streamed) once
    removed its own input; and an interrupted ``score``'s journal beside that ``--out``
    must survive an ``apply`` into the same name."""
    src = tmp_path / "T.json.partial.jsonl"
    pd.read_csv(w / "small.csv").head(40).to_json(src, orient="records", lines=True)
    before = src.read_bytes()
    r = runner.invoke(app, ["apply", str(src), "--calibrator", str(w / "cal.json"), OUT,
                            str(tmp_path / "T.json")])
    assert r.exit_code == 0, r.output
    assert src.read_bytes() == before
    journal = tmp_path / "S.json.partial.jsonl"
    journal.write_text('{"key": "abc", "band_median": 3.0, "error": ""}\n')
    r = runner.invoke(app, ["apply", str(w / "small.csv"), "--calibrator", str(w / "cal.json"),
                            OUT, str(tmp_path / "S.json")])
    assert r.exit_code == 0, r.output
    assert journal.exists(), "apply removed score's journal"


def test_a_file_that_is_not_a_journal_is_never_used_or_removed(w, tmp_path):
    from scoreband.engine.journal import RowJournal, discard_journal
    from scoreband.errors import InputError

    mine = tmp_path / "scored.csv.partial.jsonl"
    mine.write_text('{"my": "notes"}\n{"more": 1}\n')
    with pytest.raises(InputError, match="not a scoreband journal"):
        RowJournal(mine)
    assert not discard_journal(mine) and mine.exists()


def test_deletion_goes_through_the_output_policy(tmp_path):
    from scoreband.files import atomic_write_text, output_policy, remove_output

    d = tmp_path / "out"
    d.mkdir()
    (d / "user.txt").write_text("mine")
    inp = tmp_path / "in.csv"
    inp.write_text("a\n1\n")
    with output_policy(inputs=[("TABLE", inp)], folders=[d]):
        atomic_write_text(d / "made.txt", "1")
        assert not remove_output(d / "user.txt", mine=True)  # not in the folder's list
        assert not remove_output(inp, mine=True)  # an input
        assert remove_output(d / "made.txt")
    assert (d / "user.txt").exists() and inp.exists() and not (d / "made.txt").exists()
    assert "made.txt" not in (d / ".scoreband-files").read_text()  # forgotten too
    assert not remove_output(tmp_path / "in.csv")  # outside a folder: only when vouched for


@pytest.mark.slow  # processes signalled mid-write
def test_sigterm_while_apply_writes_json_leaves_no_temporary_file(w, tmp_path):
    """A SIGTERM (or SIGINT) mid-write removes the hidden temporary file; a writer killed
    with SIGKILL leaves one, which the next run writing that output removes."""
    import signal

    big = pd.concat([pd.read_csv(w / "ex.csv")] * 100, ignore_index=True)  # 200,000 rows
    big.to_csv(tmp_path / "big.csv", index=False)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        out = tmp_path / f"banded-{sig.name}.json"
        p = _cli("apply", tmp_path / "big.csv", "--calibrator", w / "cal.json", "--out", out)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and not list(
                tmp_path.glob(f".{out.name}.*.tmp")):
            time.sleep(0.02)
        assert p.poll() is None, "the write ended before the signal: make the table larger"
        time.sleep(0.3)  # into the write
        p.send_signal(sig)
        p.communicate(timeout=60)
        left = list(tmp_path.glob(f".{out.name}.*.tmp"))
        assert not out.exists()
        if sig == signal.SIGKILL:
            assert left and p.returncode == -signal.SIGKILL
            p = _cli("apply", w / "small.csv", "--calibrator", w / "cal.json", "--out", out)
            assert p.wait(timeout=120) == 0
            assert not list(tmp_path.glob(f".{out.name}.*.tmp")), "stale file kept"
        else:
            assert not left, f"{sig.name} left {left}"
            assert p.returncode in (-sig, 1, 2, 130), p.returncode


@pytest.mark.slow  # four command processes
def test_every_file_a_command_writes_follows_the_umask(w, tmp_path):
    outs = [tmp_path / "a.csv", tmp_path / "a.json", tmp_path / "a.parquet"]
    for o in outs:
        p = _cli("apply", w / "small.csv", "--calibrator", w / "cal.json", "--out", o,
                 umask=0o027)
        assert p.wait(timeout=120) == 0
    p = _cli("world", "--out", tmp_path / "wd", "--n", "3", umask=0o077)
    assert p.wait(timeout=120) == 0
    for f in outs + [tmp_path / "a.csv.provenance.json"]:
        assert f.stat().st_mode & 0o777 == 0o640, f
    for f in (tmp_path / "wd").rglob("*"):
        if f.is_file():
            assert f.stat().st_mode & 0o777 == 0o600, f


@pytest.mark.slow  # two training runs
def test_train_removes_only_its_own_checkpoint_files(tmp_path):
    out = tmp_path / "m"
    (out / "checkpoint").mkdir(parents=True)
    (out / "checkpoint" / "notes.txt").write_text("mine")
    (out / "checkpoint" / "optimizer-7.pt").write_text("mine too, whatever its name")
    args = ["train", OUT, str(out), "--n-train", "40", "--n-val", "20", "--epochs", "2",
            "--head-epochs", "1"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    ck = sorted(f.name for f in (out / "checkpoint").iterdir())
    assert "notes.txt" in ck and "optimizer-7.pt" in ck
    assert "optimizer-1.pt" not in ck  # the epoch before: scoreband's, removed
    r = runner.invoke(app, [*args, "--overwrite"])
    assert r.exit_code == 0, r.output
    assert (out / "checkpoint" / "notes.txt").read_text() == "mine"
    assert (out / "checkpoint" / "optimizer-7.pt").exists()


@pytest.mark.slow  # six world processes
def test_concurrent_world_runs_into_one_folder(tmp_path):
    """Two ``world --out kw`` at once: neither may call the other's files foreign (before
    the fix, one of two such runs failed in 2 of 3 rounds)."""
    for k in range(3):
        procs = [_cli("world", "--out", tmp_path / f"kw{k}", "--n", "40") for _ in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=180)
            assert p.returncode == 0, err
            assert "not written by scoreband" not in err


def test_bom_and_json_values_come_back_as_they_went_in(w, tmp_path):
    """A UTF-8 byte order mark costs no row (JSON Lines) and no column name (CSV); JSON
    values keep their type and literal (an integer column with nulls stays integers)."""
    rows = pd.read_csv(w / "small.csv").head(5)
    lines = rows.to_json(orient="records", lines=True).splitlines()
    recs = [json.loads(x) for x in lines]
    for k, rec in enumerate(recs):
        rec["count"] = None if k == 1 else k
        rec["price"] = 1.5
    text = "\n".join(json.dumps(r).replace('"price": 1.5', '"price": 1.50') for r in recs)
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode() + b"\n")
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (w / "small.csv").read_bytes())
    for src, out in (("bom.jsonl", "o.jsonl"), ("bom.csv", "o.csv")):
        r = runner.invoke(app, ["apply", str(tmp_path / src), "--calibrator",
                                str(w / "cal.json"), OUT, str(tmp_path / out)])
        assert r.exit_code == 0, r.output
    got = (tmp_path / "o.jsonl").read_text().splitlines()
    assert len(got) == 5 and json.loads(got[0])["id"] == recs[0]["id"]
    assert [json.loads(x)["count"] for x in got] == [0, None, 2, 3, 4]
    assert all('"price": 1.50,' in x for x in got)
    assert pd.read_csv(tmp_path / "o.csv").columns[0] == "id"
    assert len(pd.read_csv(tmp_path / "o.csv")) == 300


def test_the_field_table_comes_back_cell_for_cell(w, tmp_path):
    """The user's report: 00017, 01234, NA, nan, FALSE came back as 17, 1234, '', '',
    False."""
    src = tmp_path / "t.csv"
    cells = ["00017", "01234", "NA", "nan", "FALSE", "null"]
    body = "".join(f"r{i},0.{i + 1},{c},{c}\n" for i, c in enumerate(cells))
    src.write_text("id,median,zip,code\n" + body)
    for fmt in ("csv", "tsv", "jsonl", "json", "parquet"):
        out = tmp_path / f"o.{fmt}"
        r = runner.invoke(app, ["apply", str(src), "--calibrator", str(w / "cal.json"), OUT,
                                str(out)])
        assert r.exit_code == 0, r.output
        if fmt == "csv":
            lines = out.read_text().splitlines()
            assert [ln.split(",")[2:4] for ln in lines[1:]] == [[c, c] for c in cells]
        if fmt in ("jsonl", "json"):
            df = pd.read_json(out, lines=fmt == "jsonl", dtype=False)
            assert df["zip"].tolist() == cells
