"""An OpenAI-compatible chat-completions endpoint as a judge, through its ``logprobs``.

The request asks for ``logprobs: true`` and ``top_logprobs: k``. The score token is found in
the returned token list by the delimiter searched from the end (or, when the judge was asked
to answer with the number only, the first non-blank token); its top-k list is folded onto
the labels. Labels missing from the top-k get -inf, and the missing mass is recorded.

Robustness: retries with exponential back-off on 429 / 5xx / time-outs / connection errors;
other HTTP errors fail the row at once with the server's message. A response without
log-probs fails the row ("the model returned no log-probs"), never falls back to the text.
Every successful response is cached on disk under a key of endpoint, model, prompt hash,
image hash and decoding parameters, so a rerun after an interruption asks only for what is
missing. The API key is read from the environment and never written anywhere.

HTTP goes through :func:`scoreband.http.post_json` (httpx, with scoreband's HTTP policy). A
damaged cache entry is reported and asked again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import warnings
from pathlib import Path

from scoreband.errors import InputError
from scoreband.files import atomic_write_text, read_json
from scoreband.http import MAX_RESPONSE_BYTES, EndpointClient, public_url
from scoreband.images import read_image_bytes
from scoreband.judges.base import JudgeError, JudgePrompt, JudgeResult
from scoreband.judges.tokens import canonical_token, find_score_position, fold_top_logprobs

__all__ = ["OpenAIJudge"]

class OpenAIJudge(EndpointClient):
    """Judge through ``POST {base_url}/chat/completions`` (see module docstring)."""

    error = JudgeError

    def __init__(self, model: str, prompt: JudgePrompt, *,
                 base_url: str = "https://api.openai.com/v1", api_key: str | None = None,
                 top_logprobs: int = 20, max_tokens: int = 256, timeout: float = 60.0,
                 retries: int = 4, backoff: float = 1.0, cache_dir=None):
        self.model = model
        self.name = f"openai:{model}"
        self.prompt = prompt
        self._init_endpoint(base_url, api_key, timeout=float(timeout), retries=int(retries),
                            backoff=float(backoff))
        self.top_logprobs = int(top_logprobs)
        self.max_tokens = int(max_tokens)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None

    def describe(self) -> dict:
        return {"judge": self.name, "endpoint": public_url(self.base_url), **self._decoding()}

    def _decoding(self) -> dict:
        return {"temperature": 0.0, "top_logprobs": self.top_logprobs,
                "max_tokens": self.max_tokens}

    # ------------------------------------------------------------------ judging
    def judge(self, image_path: Path, text: str) -> JudgeResult:
        try:
            image = read_image_bytes(image_path)  # bounded: the file is uploaded whole
        except ValueError as e:
            raise JudgeError(str(e)) from None
        image_hash = hashlib.sha256(image).hexdigest()
        key = hashlib.sha256(json.dumps({
            "endpoint": public_url(self.base_url), "model": self.model,
            "prompt": hashlib.sha256(text.encode()).hexdigest(), "image": image_hash,
            **self._decoding()}, sort_keys=True).encode()).hexdigest()
        cached = self.cache_dir / f"{key}.json" if self.cache_dir is not None else None
        if cached is not None and cached.exists():
            hit = self._from_cache(cached)
            if hit is not None:
                return hit
        mime = _mime(image)
        body = {"model": self.model, "messages": [{"role": "user", "content": [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {
                "url": f"data:{mime};base64,{base64.b64encode(image).decode()}"}}]}],
            "logprobs": True, **self._decoding()}
        resp = self._post("chat/completions", body)
        result = self._parse(resp)  # only a well-formed answer is cached
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(cached, json.dumps(resp))
        return result

    def _from_cache(self, cached: Path) -> JudgeResult | None:
        """The cached answer, or None (reported) when the entry is damaged: it is then
        asked again and the entry replaced."""
        try:
            return self._parse(read_json(cached, what="cache entry", max_bytes=MAX_RESPONSE_BYTES))
        except (InputError, JudgeError) as e:
            warnings.warn(f"damaged judge cache entry {cached.name} ({e}); asking the "
                          "endpoint again", stacklevel=2)
            return None

    def _parse(self, resp) -> JudgeResult:
        """The score distribution from one chat-completions answer; anything malformed is a
        :class:`JudgeError` saying what (never another exception)."""
        try:
            return self._parse_answer(resp)
        except JudgeError:
            raise
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise JudgeError(f"malformed answer ({type(e).__name__}: {e}): "
                             f"{str(resp)[:160]}") from None

    def _parse_answer(self, resp) -> JudgeResult:
        labels = self.prompt.labels
        choices = resp.get("choices") if isinstance(resp, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise JudgeError(f"malformed response (no choices): {str(resp)[:200]}")
        choice = choices[0]
        logprobs = choice.get("logprobs")
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if not content:
            raise JudgeError(f"the model {self.model!r} returned no log-probs; it (or the "
                             "endpoint) does not support `logprobs`. Choose a model that "
                             "does: a score without its distribution cannot be calibrated")
        if not isinstance(content, list) or not all(isinstance(c, dict) for c in content):
            raise JudgeError(f"malformed logprobs.content (expected a list of token objects, "
                             f"got {type(content).__name__}): {str(content)[:120]}")
        texts = [str(c.get("token", "")) for c in content]
        pos = find_score_position(texts, self.prompt.delimiter)
        where = "generated"
        if pos is None:
            first = next((i for i, t in enumerate(texts) if canonical_token(t)), None)
            if first is None or canonical_token(texts[first]) not in labels:
                raise JudgeError(f"no {self.prompt.delimiter!r} in the answer and it does not "
                                 f"start with a score: {''.join(texts)[-120:]!r}")
            pos, where = first, "first-token"
        if pos >= len(content):
            raise JudgeError("the answer ends at the score delimiter (cut by max_tokens?); "
                             "raise `max_tokens`")
        nxt = texts[pos + 1] if pos + 1 < len(texts) else ""
        if nxt[:1].isdigit() and canonical_token(texts[pos])[-1:].isdigit():
            raise JudgeError(f"the score was spelled with several tokens ({texts[pos]!r} + "
                             f"{nxt!r}); one next-token distribution cannot hold it. Use a "
                             "scale whose labels are single tokens (e.g. 1-9)")
        top = content[pos].get("top_logprobs")
        if not isinstance(top, list) or not top or not all(isinstance(t, dict) for t in top):
            # the chosen token's own log-prob alone would read as a certain judge
            raise JudgeError(f"the endpoint returned no top_logprobs list at the score "
                             f"position (asked for {self.top_logprobs}); one token's "
                             "log-prob is not a distribution over the labels")
        try:
            lp, missing = fold_top_logprobs(((t.get("token"), t.get("logprob")) for t in top),
                                            labels)
        except (ValueError, TypeError, AttributeError) as e:
            raise JudgeError(f"bad top_logprobs at the score position: {e}") from None
        return JudgeResult(lp, missing, where, "".join(texts[:pos]))


def _mime(data: bytes) -> str:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"
