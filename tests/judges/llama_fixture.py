"""The real llama.cpp server of the ``server`` tests: llama-cpp-python's OpenAI-compatible
server on the tiny GGUF model of :mod:`judges.tiny_gguf`, one per test module.

Use it from a test module with ``from judges.llama_fixture import llama_server`` after
skipping the module where ``llama_cpp`` is missing (:data:`HOW` says how to install it)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

__all__ = ["HOW", "LlamaServer", "llama_server", "serve"]

HOW = ("needs llama-cpp-python[server] and gguf: CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install "
       "'llama-cpp-python[server]' gguf, then pytest -m server")


class LlamaServer(NamedTuple):
    url: str      # the OpenAI-compatible base URL (…/v1)
    model: Path   # the GGUF file it serves
    log: Path     # its log: one uvicorn access line per request

    def requests(self, path: str = "/v1/chat/completions") -> int:
        """How many requests to ``path`` the server has logged so far."""
        return len(re.findall(rf'"POST {re.escape(path)} HTTP', self.log.read_text()))


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@contextlib.contextmanager
def serve(folder: Path, *options: str):
    """A llama-cpp-python server serving the tiny GGUF model written into ``folder``
    (``options``: more server options), its log in ``folder/server.log``; stopped on exit.
    The one starter of the server tests and benchmarks/judge_endpoint.py."""
    import httpx
    from judges.tiny_gguf import write_tiny_llama

    model = write_tiny_llama(folder / "tiny.gguf")
    port = _free_port()
    log_path = folder / "server.log"
    log = open(log_path, "wb")
    # unbuffered: each access line is in the log when its answer has arrived
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
                             *options], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the llama.cpp server did not start: "
                                   + log_path.read_text()[-2000:])
            time.sleep(0.3)
        yield LlamaServer(url, model, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("llama"), "--n_threads", "1") as server:
        yield server
