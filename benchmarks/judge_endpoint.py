"""``scoreband judge`` against an OpenAI-compatible server: the server's own rate beside the
command's, in one run.

* server alone: a plain httpx loop (one kept-alive client, ``--concurrency`` threads)
  sending the very request scoreband sends for a row (text, image, logprobs);
* ``scoreband judge --concurrency N``: the whole command on a table of as many rows (each
  row a different response, so nothing comes from the cache), in process (no interpreter
  start-up), reading the table, writing the output, its journal, cache and provenance;
* for context, the same command with one request at a time, and with one HTTP client per
  request (how it was before: the certificate store loaded for every row).

The server is a real llama.cpp server (llama-cpp-python's) on the tiny GGUF model of
tests/judges/tiny_gguf.py when ``llama_cpp`` is importable, else the in-process fake server
of tests/judges/fake_openai.py (said in the output). Target: judge >= 0.8x the server alone.

    python benchmarks/judge_endpoint.py [--rows 200] [--concurrency 4] [--repeat 2]
                                        [--fake [--fake-ms 30]]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

TEMPLATE = ("Instruction: {instruction}\nResponse: {response}\nRubric: {rubric}\n"
            "End with '{delimiter} N', N from {lo} to {hi}. JUDGE")


@contextlib.contextmanager
def llama_server(folder: Path):
    from judges.llama_fixture import serve  # the tests' one starter of the real server

    with serve(folder, "--verbose", "False") as server:
        yield server.url, "llama.cpp server (llama-cpp-python), tiny GGUF model"


@contextlib.contextmanager
def fake_server(model_ms: float):
    """The fake server in a process of its own (as a real server is: it must not share
    this process's interpreter lock), each answer holding its one model slot
    ``model_ms`` milliseconds."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "judges" / "fake_openai.py"),
                             str(model_ms)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=str(ROOT / "tests"), env={**os.environ, "PYTHONPATH": str(
                                ROOT / "tests")})
    try:
        url = proc.stdout.readline().strip()
        yield url, (f"FAKE OpenAI-compatible server (tests/judges/fake_openai.py, no model: "
                    f"{model_ms:g} ms per answer, one at a time)")
    finally:
        proc.stdin.close()
        proc.wait(10)


def make_table(folder: Path, n: int) -> Path:
    rng = np.random.default_rng(0)
    img = folder / "img.png"
    Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(img)
    pd.DataFrame({"image": [img.name] * n, "instruction": ["Rate the fit."] * n,
                  "response": [f"A picture, take {i}." for i in range(n)]}
                 ).to_csv(folder / "t.csv", index=False)
    return folder / "t.csv"


def server_alone(url: str, folder: Path, n: int, concurrency: int) -> float:
    """Requests/s of a plain keep-alive httpx loop sending scoreband's request."""
    import httpx

    from scoreband.judges.base import JudgePrompt

    prompt = JudgePrompt(1, 5, template=TEMPLATE)
    image = base64.b64encode((folder / "img.png").read_bytes()).decode()
    bodies = [{"model": "tiny", "logprobs": True, "top_logprobs": 20, "max_tokens": 256,
               "temperature": 0.0, "messages": [{"role": "user", "content": [
                   {"type": "text", "text": prompt.render("Rate the fit.", f"Other {i}.")},
                   {"type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{image}"}}]}]}
              for i in range(n)]
    todo = iter(bodies)
    lock = threading.Lock()
    with httpx.Client(limits=httpx.Limits(max_connections=concurrency)) as client:
        client.post(url + "/chat/completions", json=bodies[0]).raise_for_status()  # warm

        def work():
            while True:
                with lock:
                    body = next(todo, None)
                if body is None:
                    return
                client.post(url + "/chat/completions", json=body).raise_for_status()

        t = time.perf_counter()
        threads = [threading.Thread(target=work) for _ in range(concurrency)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return n / (time.perf_counter() - t)


def judge_rate(url: str, table: Path, out: Path, concurrency: int, *,
               client_per_request: bool = False) -> float:
    """Rows/s of the whole ``scoreband judge`` command, in process."""
    from typer.testing import CliRunner

    from scoreband import http
    from scoreband.cli import app

    n = len(pd.read_csv(table))
    saved = http.EndpointClient._client
    if client_per_request:  # before: a new client (and certificate store) per request
        http.EndpointClient._client = lambda self: http.make_client(self.timeout)
    try:
        t = time.perf_counter()
        r = CliRunner().invoke(app, ["judge", str(table), "--judge", "openai:tiny",
                                     "--base-url", url, "--out", str(out), "--template",
                                     TEMPLATE, "--allow-blind", "--concurrency",
                                     str(concurrency)])
        dt = time.perf_counter() - t
    finally:
        http.EndpointClient._client = saved
    if r.exit_code != 0:
        raise RuntimeError(r.output[-2000:])
    bad = (pd.read_csv(out, keep_default_na=False)["judge_error"] != "").sum()
    if bad:
        raise RuntimeError(f"{bad} rows failed: {r.output[-1000:]}")
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2, help="measurements of each, "
                                                          "interleaved; the best is shown")
    ap.add_argument("--fake", action="store_true", help="use the fake server even if "
                                                        "llama_cpp is installed")
    ap.add_argument("--fake-ms", type=float, default=30.0,
                    help="the fake server's time per answer, one at a time (a local model's; "
                         "0: as fast as it can answer)")
    a = ap.parse_args()
    real = importlib.util.find_spec("llama_cpp") is not None and not a.fake
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        with (llama_server(folder) if real else fake_server(a.fake_ms)) as (url, what):
            table = make_table(folder, a.rows)
            # warm: the command's imports and first provenance are paid once per process
            (folder / "warm").mkdir()
            judge_rate(url, make_table(folder / "warm", 2), folder / "warm" / "o.csv", 1)
            (folder / "small").mkdir()
            small = make_table(folder / "small", min(a.rows, 50))
            runs = {
                f"server alone (httpx keep-alive, concurrency {a.concurrency})":
                    lambda k: server_alone(url, folder, a.rows, a.concurrency),
                f"scoreband judge --concurrency {a.concurrency}":
                    lambda k: judge_rate(url, table, folder / f"a{k}.csv", a.concurrency),
                "scoreband judge --concurrency 1":
                    lambda k: judge_rate(url, table, folder / f"b{k}.csv", 1),
                "  ... one HTTP client per request (before; 50 rows)":
                    lambda k: judge_rate(url, small, folder / f"c{k}.csv", 1,
                                         client_per_request=True)}
            # a shared, loaded machine: each measured --repeat times, interleaved; the best
            rates: dict[str, float] = {}
            for k in range(a.repeat):
                for name, fn in runs.items():
                    rates[name] = max(rates.get(name, 0.0), fn(k))
    alone_name = next(iter(rates))
    alone = rates.pop(alone_name)
    print(f"server: {what}; {a.rows} rows, 64x64 PNG, top_logprobs 20; best of {a.repeat}")
    print(f"{alone_name:<52}{alone:8.1f} requests/s")
    for name, r in rates.items():
        print(f"{name:<52}{r:8.1f} rows/s   {r / alone:5.2f}x")


if __name__ == "__main__":
    main()
