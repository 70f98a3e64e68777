"""JSON POST with retries and back-off, for OpenAI-compatible endpoints (judges, image
generators). The standard library's urllib is enough for one request per row."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

__all__ = ["post_json", "RETRY_STATUS"]

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
            last = f"HTTP {e.code}: {e.read().decode('utf-8', 'replace')[:300]}"
            if e.code not in RETRY_STATUS:
                raise error(f"endpoint refused the request ({last})") from None
        except TimeoutError:
            last = f"timed out after {timeout:g} s"
        except urllib.error.URLError as e:
            last = f"connection failed: {e.reason}"
        except (ConnectionError, json.JSONDecodeError) as e:
            last = f"{type(e).__name__}: {e}"
    raise error(f"endpoint failed after {retries + 1} attempts ({last})")
