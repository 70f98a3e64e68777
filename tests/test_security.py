"""Secrets never reach outputs or errors; only http(s) endpoints; local-looking model paths
fail at once; outputs follow the umask; copied tokenizer files live in a private folder."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scoreband.errors import InputError
from scoreband.files import atomic_write_text
from scoreband.http import check_base_url, post_json, redact
from scoreband.model_sources import model_source

KEY = "sk-test-SECRET-0123456789"


class _Echo(BaseHTTPRequestHandler):
    """Answers 400 with every request header echoed in the body (as some servers do)."""

    def do_POST(self):  # noqa: N802
        body = json.dumps({"error": "bad", "headers": dict(self.headers)}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture()
def echo_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_a_server_echoing_the_key_never_puts_it_in_the_error(echo_server):
    with pytest.raises(RuntimeError) as e:
        post_json(echo_server + "/v1/chat/completions", {"x": 1}, api_key=KEY, retries=0)
    assert KEY not in str(e.value) and "[redacted]" in str(e.value)


def test_judge_error_column_has_no_key(tmp_path, echo_server, monkeypatch):
    import pandas as pd
    from PIL import Image

    from scoreband.judge_stage import JudgePrompt, extract_judge_table, make_judge

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    df = pd.DataFrame({"image": [str(tmp_path / "a.png")], "instruction": ["x"],
                       "response": ["y"]})
    judge = make_judge("openai:m", JudgePrompt(1, 5), base_url=echo_server + "/v1",
                       api_key=KEY, retries=0)
    out, n_bad = extract_judge_table(df, judge)
    assert n_bad == 1 and KEY not in out.to_json()


@pytest.mark.parametrize("text", [
    f"Authorization: Bearer {KEY}", f'{{"Authorization": "Bearer {KEY}"}}',
    f"api_key={KEY}&x=1", f"https://user:{KEY}@host/v1", f"plain {KEY} text"])
def test_redact(text):
    assert KEY not in redact(text)


@pytest.mark.parametrize("url", ["file:///etc", "ftp://host/v1", "host:8000/v1", ""])
def test_only_http_base_urls(url):
    with pytest.raises(InputError, match="http"):
        check_base_url(url)


def test_provenance_command_has_no_credentials(monkeypatch):
    import sys

    from scoreband.provenance import provenance

    monkeypatch.setattr(sys, "argv", ["scoreband", "judge", "--base-url",
                                      f"https://u:{KEY}@host/v1"])
    assert KEY not in json.dumps(provenance({}))


def test_local_looking_model_path_that_does_not_exist_fails_at_once(tmp_path):
    with pytest.raises(InputError, match="no such folder"):
        model_source(str(tmp_path / "nope"))
    with pytest.raises(InputError, match="no such folder"):
        model_source("./models/clip")
    assert model_source("openai/clip-vit-base-patch32") == "openai/clip-vit-base-patch32"


def test_outputs_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        atomic_write_text(tmp_path / "b.txt", "x")
        assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
