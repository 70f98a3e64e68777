"""The one HTTP policy of scoreband: JSON POST to OpenAI-compatible endpoints (judges, image
generators) through httpx, whose redirect and timeout behaviour is explicit: one deadline per
request, a size cap on answers, credentials never sent to another origin, every malformed
answer an error of the row (never an exception that ends the batch).

One :class:`httpx.Client` per endpoint client, reused by every request (keep-alive: a new
client per request loads the certificate store each time, which cost ~45 % of a judge run
against a local server), safe to share between threads.

Retries only on what another attempt can fix: rate limits and gateway errors (429, 408, 502,
503, 504, with the server's ``Retry-After`` honoured) and a connection reset or closed
mid-answer (a kept-alive connection the server dropped is retried at once). Anything that
repeats for the same request fails at once with the reason: other HTTP errors (400, 404,
500 ...), a connection refused (no server there), a time-out (the request is slower than
``timeout``: raise it).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.parse

import httpx

from scoreband.errors import InputError

__all__ = ["post_json", "make_client", "RETRY_STATUS", "redact", "check_base_url",
           "public_url", "EndpointClient"]

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

#: statuses another attempt can fix: the server is busy (rate limit, request time-out) or a
#: gateway could not reach it. Other statuses (400, 404, 500 ...) repeat for the same request.
RETRY_STATUS = frozenset({408, 429, 502, 503, 504})
#: an answer larger than this is refused (a judge's answer is kilobytes, an image a few MB)
MAX_RESPONSE_BYTES = 64 << 20
#: same-origin redirects followed at most
MAX_REDIRECTS = 5
#: the longest wait between two attempts (also caps a server's Retry-After)
MAX_BACKOFF = 30.0


class _Retry(Exception):
    """A failure worth another attempt (the reason is the message); ``wait``: the seconds
    the server asked for (Retry-After), if any."""

    def __init__(self, reason: str, wait: float | None = None):
        super().__init__(reason)
        self.wait = wait


def make_client(timeout: float, connections: int = 1) -> httpx.Client:
    """The client every request of one endpoint client goes through: keep-alive, up to
    ``connections`` requests at once, no redirects followed by httpx (see :func:`_attempt`),
    proxies and certificates from the environment."""
    n = max(1, int(connections))
    return httpx.Client(follow_redirects=False, timeout=httpx.Timeout(timeout),
                        limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
                        trust_env=True)


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
            raise httpx.ReadTimeout(f"the answer was still arriving after {timeout:g} s")
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


def _retry_after(resp: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number of seconds; an HTTP date is
    not worth parsing here), or None."""
    v = resp.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(v)) if v else None
    except ValueError:
        return None


def _server_message(body: bytes, api_key: str) -> str:
    """The server's error text: the ``error.message`` of an OpenAI-style error object when
    there is one, else the body's start; redacted either way."""
    text = body.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
        err = doc.get("error") if isinstance(doc, dict) else None
        msg = err.get("message") if isinstance(err, dict) else None
        if isinstance(msg, str) and msg.strip():
            text = msg
    except (json.JSONDecodeError, RecursionError):
        pass
    return redact(" ".join(text.split()), api_key)[:300]


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
                last = f"HTTP {resp.status_code}: {_server_message(body, api_key)}"
                if resp.status_code in RETRY_STATUS:
                    raise _Retry(last, _retry_after(resp))
                raise error(f"endpoint refused the request ({last}; not retried: the same "
                            "request gets the same answer)")
            try:
                return _decode(body)
            except ValueError as e:
                raise error(f"endpoint answer unusable: {e}") from None
    raise error(f"the endpoint redirected more than {MAX_REDIRECTS} times")


def post_json(url: str, body: dict, *, api_key: str = "", timeout: float = 60.0,
              retries: int = 4, backoff: float = 1.0, error=RuntimeError,
              on_request=None, max_bytes: int = MAX_RESPONSE_BYTES,
              client: httpx.Client | None = None) -> dict:
    """POST ``body`` as JSON and return the decoded answer (a JSON object).

    Through httpx, with what a request to a third party needs: ``timeout`` is one deadline
    for the whole request (connect, headers and the whole body), an answer above
    ``max_bytes`` is refused, a redirect is followed only within the same origin (the API
    key never goes to another host), and any answer that is not a JSON object (not UTF-8,
    cut short, not JSON) raises ``error`` with the reason.

    Retries (``backoff * 2**k`` seconds, at most 30, or the server's ``Retry-After``) only
    on what another attempt can fix: the statuses in RETRY_STATUS and a connection reset or
    closed mid-answer (the first such reset is retried at once and not counted: a
    kept-alive connection the server had dropped). A connection refused, a time-out and
    every other HTTP error raise ``error`` at once with the reason. After ``retries``
    retries, raises ``error`` with the last reason. ``on_request`` is called before each
    attempt (for counting). ``client``: the :func:`make_client` to send through (one per
    call when None).
    """
    if client is None:
        with make_client(timeout) as own:
            return post_json(url, body, api_key=api_key, timeout=timeout, retries=retries,
                             backoff=backoff, error=error, on_request=on_request,
                             max_bytes=max_bytes, client=own)
    data = json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    last, wait, attempt, free = "", None, 0, True
    where = public_url(str(httpx.URL(url).copy_with(path="/", query=None))).rstrip("/")
    while True:
        if on_request is not None:
            on_request()
        try:
            return _attempt(client, url, data, headers, timeout, max_bytes, api_key, error)
        except _Retry as e:
            last, wait = str(e), e.wait
        except httpx.TimeoutException:
            raise error(f"no answer within {timeout:g} s from {where} (not retried: raise "
                        "`timeout` for a slow model, or check the server)") from None
        except httpx.ConnectError as e:
            raise error(redact(f"cannot connect to {where} ({e}): is the server running "
                               "and the address right?", api_key)) from None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
            last = redact(f"the connection was reset or closed mid-answer ({e})", api_key)
            if free:  # a kept-alive connection the server had closed: once, at once
                free = False
                continue
            wait = None
        except httpx.TransportError as e:
            raise error(redact(f"connection failed: {type(e).__name__}: {e}", api_key)) from None
        if attempt >= retries:
            break
        attempt += 1
        time.sleep(min(MAX_BACKOFF, wait if wait is not None else backoff * 2 ** (attempt - 1)))
    raise error(f"endpoint failed after {attempt + 1} attempts ({last})")


class EndpointClient:
    """What an OpenAI-compatible client keeps: the endpoint, the key (from $OPENAI_API_KEY
    unless given), retry settings, a request counter and one HTTP client reused by every
    request (created at the first, safe to share between threads; ``connections``
    requests at once); ``_post(path, body)`` sends one JSON request through
    :func:`post_json` and raises ``error`` on failure."""

    error: type[Exception] = RuntimeError

    def _init_endpoint(self, base_url: str, api_key: str | None, *, timeout: float,
                       retries: int, backoff: float, connections: int = 1) -> None:
        self.base_url = check_base_url(base_url)
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.connections = max(1, int(connections))
        self.requests_made = 0
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.requests_made += 1

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                self._http = make_client(self.timeout, self.connections)
            return self._http

    def close(self) -> None:
        """Close the kept-alive connections (a later request opens new ones)."""
        with self._lock:
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def __getstate__(self) -> dict:  # a client and a lock do not travel (Ray, pickle)
        state = dict(self.__dict__)
        state["_http"], state["_lock"] = None, None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _post(self, path: str, body: dict) -> dict:
        return post_json(f"{self.base_url}/{path}", body, api_key=self._api_key,
                         timeout=self.timeout, retries=self.retries, backoff=self.backoff,
                         error=self.error, on_request=self._count, client=self._client())
