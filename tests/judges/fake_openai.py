"""An in-process OpenAI-compatible chat-completions server for the judge tests and
``benchmarks/judge_endpoint.py``: HTTP/1.1 with keep-alive (as real servers), counting
requests, TCP connections and requests in flight; what it answers is a function of the
request body (``FakeOpenAI.respond``), set per test."""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FakeOpenAI", "answer", "top_list", "user_text", "image_url"]


def user_text(body: dict) -> str:
    parts = body["messages"][0]["content"]
    return "".join(p.get("text", "") for p in parts if p.get("type") == "text")


def image_url(body: dict) -> str | None:
    parts = body["messages"][0]["content"]
    return next((p["image_url"]["url"] for p in parts if p.get("type") == "image_url"), None)


def top_list(probs: dict[str, float], k: int) -> list[dict]:
    """The ``k`` most likely of ``probs`` as an OpenAI top_logprobs list."""
    best = sorted(probs.items(), key=lambda kv: -kv[1])[:k]
    return [{"token": t, "logprob": math.log(p), "bytes": None} for t, p in best]


def answer(tokens: list[str], score_top: list[dict] | None, *, model: str = "served-model",
           finish: str = "stop", prompt_tokens: int | None = None, logprobs: bool = True,
           content: str | None = None) -> dict:
    """A chat.completion whose ``tokens`` each carry a one-entry top list, the last one
    ``score_top``."""
    lp = []
    for t in tokens:
        lp.append({"token": t, "logprob": -0.01, "bytes": None,
                   "top_logprobs": [{"token": t, "logprob": -0.01, "bytes": None}]})
    if lp and score_top is not None:
        lp[-1]["top_logprobs"] = score_top
    doc = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
           "choices": [{"index": 0, "finish_reason": finish,
                        "message": {"role": "assistant",
                                    "content": "".join(tokens) if content is None else content},
                        "logprobs": {"content": lp} if logprobs else None}]}
    if prompt_tokens is not None:
        doc["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                        "total_tokens": prompt_tokens + len(tokens)}
    return doc


def _default(body: dict):
    probs = {" 4": 0.6, "4": 0.1, " 3": 0.2, " The": 0.05}
    probs.update({f" w{i}": 0.001 for i in range(30)})
    return 200, answer(["Fine", ".", " Score", ":", " 4"],
                       top_list(probs, body.get("top_logprobs") or 1))


class FakeOpenAI:
    """``with FakeOpenAI(respond) as srv: srv.url`` ("http://127.0.0.1:PORT/v1").
    ``respond(body) -> (status, doc[, headers])``, or the string "close" to drop the
    connection without an answer. ``delay``: seconds each answer takes; ``serial``: seconds
    each answer holds the one model slot (answers one at a time, as llama-cpp-python's
    server does)."""

    def __init__(self, respond=_default, delay: float = 0.0, serial: float = 0.0):
        self.respond = respond
        self.delay = delay
        self.serial = serial
        self._slot = threading.Lock()
        self.calls = 0
        self.bodies: list[dict] = []
        self.connections: set = set()
        self.inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body leave in separate writes: without TCP_NODELAY, Nagle's
            # algorithm and the client's delayed ACK hold every answer ~40 ms
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def do_GET(self):  # noqa: N802 - GET /models: the one model it "runs"
                data = json.dumps({"object": "list", "data": [
                    {"id": "fake-model.gguf", "object": "model"}]}).encode()
                self.send_response(200 if self.path.endswith("/models") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.calls += 1
                    fake.bodies.append(body)
                    fake.connections.add(self.client_address)
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                try:
                    if fake.delay:
                        time.sleep(fake.delay)
                    if fake.serial:
                        with fake._slot:
                            time.sleep(fake.serial)
                    out = fake.respond(body)
                finally:
                    with fake._lock:
                        fake.inflight -= 1
                if out == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                code, doc, *headers = out
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers[0] if headers else {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":  # a server of its own (benchmarks): [SERIAL_MS]; prints its URL,
    # serves until its stdin closes
    import sys

    with FakeOpenAI(serial=float(sys.argv[1]) / 1000 if len(sys.argv) > 1 else 0.0) as _srv:
        print(_srv.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
