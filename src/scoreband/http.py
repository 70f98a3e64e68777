"""JSON POST with retries and back-off, for OpenAI-compatible endpoints (judges, image
generators). The standard library's urllib is enough for one request per row."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request

from scoreband.errors import InputError

__all__ = ["post_json", "RETRY_STATUS", "redact", "check_base_url", "public_url"]

_SECRET_PATTERNS = [
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?\s*(?:bearer|basic)?\s*)"
               r"[^\s\"',;]+"),
    re.compile(r"(?i)((?:api[_-]?key|access[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)"
               r"[^\s\"',;&]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in a URL
]


def redact(text: str, *secrets: str) -> str:
    """``text`` with API keys, Authorization values and URL credentials replaced by
    ``[redacted]`` (for anything copied from a server's answer or a URL into an error, a log
    or an output).

    >>> redact('{"echo": {"Authorization": "Bearer sk-abcdefghijk"}} https://u:pw@host/v1')
    '{"echo": {"Authorization": "Bearer [redacted]"}} https://[redacted]@host/v1'
    """
    out = str(text)
    for s in secrets:
        if s:
            out = out.replace(s, "[redacted]")
    out = _SECRET_PATTERNS[0].sub(lambda m: m.group(1) + "[redacted]", out)
    out = _SECRET_PATTERNS[1].sub(lambda m: m.group(1) + "[redacted]", out)
    out = _SECRET_PATTERNS[2].sub("[redacted]", out)
    return _SECRET_PATTERNS[3].sub("[redacted]", out)


def check_base_url(url: str) -> str:
    """An endpoint root must be http(s) with a host; returns it without a trailing slash."""
    u = urllib.parse.urlsplit(str(url))
    if u.scheme not in ("http", "https") or not u.netloc:
        raise InputError(f"`base_url` {redact(url)!r}: give an http(s) URL such as "
                         "https://api.openai.com/v1")
    return str(url).rstrip("/")


def public_url(url: str) -> str:
    """The URL without credentials (for provenance, logs and cache keys)."""
    return redact(url)

#: statuses worth another try: timeouts, conflicts, rate limits, server errors
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def post_json(url: str, body: dict, *, api_key: str = "", timeout: float = 60.0,
              retries: int = 4, backoff: float = 1.0, error=RuntimeError,
              on_request=None) -> dict:
    """POST ``body`` as JSON and return the decoded answer.

    Retries (``backoff * 2**k`` seconds, at most 30) on the statuses in RETRY_STATUS,
    time-outs and connection errors; any other HTTP error raises ``error`` at once with the
    server's message. After ``retries`` retries, raises ``error`` with the last reason.
    ``on_request`` is called before each attempt (for counting).
    """
    data = json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(min(30.0, backoff * 2 ** (attempt - 1)))
        if on_request is not None:
            on_request()
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            body = redact(e.read().decode("utf-8", "replace"), api_key)
            last = f"HTTP {e.code}: {body[:300]}"
            if e.code not in RETRY_STATUS:
                raise error(f"endpoint refused the request ({last})") from None
        except TimeoutError:
            last = f"timed out after {timeout:g} s"
        except urllib.error.URLError as e:
            last = redact(f"connection failed: {e.reason}", api_key)
        except (ConnectionError, json.JSONDecodeError) as e:
            last = redact(f"{type(e).__name__}: {e}", api_key)
    raise error(f"endpoint failed after {retries + 1} attempts ({last})")


class EndpointClient:
    """What an OpenAI-compatible client keeps: the endpoint, the key (from $OPENAI_API_KEY
    unless given), retry settings and a request counter; ``_post(path, body)`` sends one
    JSON request through :func:`post_json` and raises ``error`` on failure."""

    error: type[Exception] = RuntimeError

    def _init_endpoint(self, base_url: str, api_key: str | None, *, timeout: float,
                       retries: int, backoff: float) -> None:
        import os

        self.base_url = check_base_url(base_url)
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.requests_made = 0

    def _count(self) -> None:
        self.requests_made += 1

    def _post(self, path: str, body: dict) -> dict:
        return post_json(f"{self.base_url}/{path}", body, api_key=self._api_key,
                         timeout=self.timeout, retries=self.retries, backoff=self.backoff,
                         error=self.error, on_request=self._count)
