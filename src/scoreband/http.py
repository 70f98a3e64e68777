"""The one HTTP policy of scoreband: JSON POST to OpenAI-compatible endpoints (judges, image
generators) through httpx, whose redirect and timeout behaviour is explicit: one deadline per
request, a size cap on answers, credentials never sent to another origin, every malformed
answer an error of the row (never an exception that ends the batch), retries with back-off."""

from __future__ import annotations

import json
import re
import time
import urllib.parse

import httpx

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
#: an answer larger than this is refused (a judge's answer is kilobytes, an image a few MB)
MAX_RESPONSE_BYTES = 64 << 20
#: same-origin redirects followed at most
MAX_REDIRECTS = 5


class _Retry(Exception):
    """A failure worth another attempt (the reason is the message)."""


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or {"http": 80, "https": 443}.get(url.scheme)


def _read_body(resp: httpx.Response, deadline: float, max_bytes: int, timeout: float) -> bytes:
    """The whole body within the request's deadline and the size cap (a server trickling
    bytes, or sending an endless body, is cut off)."""
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ValueError(f"the answer is {int(declared):,} bytes, above the "
                         f"{max_bytes:,} scoreband accepts")
    chunks, size = [], 0
    for chunk in resp.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise ValueError(f"the answer is above the {max_bytes:,} bytes scoreband accepts")
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise _Retry(f"timed out after {timeout:g} s (the answer was still arriving)")
    return b"".join(chunks)


def _decode(data: bytes) -> dict:
    """The answer as a JSON object, or ValueError saying what it was instead."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the answer is not UTF-8 text") from None
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"the answer is not JSON: {text[:120]!r}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"the answer is JSON but not an object: {text[:120]!r}")
    return doc


def _attempt(client: httpx.Client, url: str, data: bytes, headers: dict, timeout: float,
             max_bytes: int, api_key: str, error) -> dict:
    """One request (same-origin redirects followed, with the key; other origins refused)."""
    deadline = time.monotonic() + timeout
    target = httpx.URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        with client.stream("POST", target, content=data, headers=headers) as resp:
            if resp.is_redirect:
                nxt = target.join(resp.headers.get("location", ""))
                if _origin(nxt) != _origin(target):
                    raise error(f"the endpoint redirected to another origin "
                                f"({redact(str(nxt.copy_with(query=None)))}); scoreband never "
                                "sends the API key to another host: give that address as "
                                "`base_url` if you trust it")
                if resp.status_code not in (307, 308):
                    raise error(f"the endpoint answered HTTP {resp.status_code} (a redirect "
                                "that turns the POST into a GET); give the final address as "
                                "`base_url`")
                target = nxt
                continue
            try:
                body = _read_body(resp, deadline, max_bytes, timeout)
            except ValueError as e:
                raise error(f"endpoint answer refused: {e}") from None
            if resp.status_code >= 400:
                last = f"HTTP {resp.status_code}: " + redact(
                    body.decode("utf-8", "replace"), api_key)[:300]
                if resp.status_code in RETRY_STATUS:
                    raise _Retry(last)
                raise error(f"endpoint refused the request ({last})")
            try:
                return _decode(body)
            except ValueError as e:
                raise error(f"endpoint answer unusable: {e}") from None
    raise error(f"the endpoint redirected more than {MAX_REDIRECTS} times")


def post_json(url: str, body: dict, *, api_key: str = "", timeout: float = 60.0,
              retries: int = 4, backoff: float = 1.0, error=RuntimeError,
              on_request=None, max_bytes: int = MAX_RESPONSE_BYTES) -> dict:
    """POST ``body`` as JSON and return the decoded answer (a JSON object).

    Through httpx, with what a request to a third party needs: ``timeout`` is one deadline
    for the whole request (connect, headers and the whole body), an answer above
    ``max_bytes`` is refused, a redirect is followed only within the same origin (the API
    key never goes to another host), and any answer that is not a JSON object (not UTF-8,
    cut short, not JSON) raises ``error`` with the reason.

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
    with httpx.Client(follow_redirects=False, timeout=httpx.Timeout(timeout),
                      trust_env=True) as client:  # proxies from the environment
        for attempt in range(retries + 1):
            if attempt:
                time.sleep(min(30.0, backoff * 2 ** (attempt - 1)))
            if on_request is not None:
                on_request()
            try:
                return _attempt(client, url, data, headers, timeout, max_bytes, api_key, error)
            except _Retry as e:
                last = str(e)
            except httpx.TimeoutException:
                last = f"timed out after {timeout:g} s"
            except httpx.RemoteProtocolError as e:  # cut short, or not an HTTP server
                last = redact(f"the connection broke mid-answer or the server does not speak "
                              f"HTTP ({e})", api_key)
            except httpx.TransportError as e:
                last = redact(f"connection failed: {type(e).__name__}: {e}", api_key)
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
