"""An OpenAI-compatible chat-completions endpoint as a judge, through its ``logprobs``.

The request asks for ``logprobs: true`` and ``top_logprobs: k``. The score token is found in
the returned token list by the delimiter searched from the end (or, when the judge was asked
to answer with the number only, the first non-blank token); its top-k list is folded onto
the labels. Labels missing from the top-k get -inf, the missing mass is recorded, and so is
the largest share of the label distribution the missing labels may hold
(:func:`~scoreband.judges.tokens.unseen_label_share`): above
:data:`~scoreband.judges.base.MAX_UNSEEN_SHARE` the row gets no score (a top-1 list showing
one label of five would otherwise read as a certain judge).

Refused up front: scales whose labels are prefixes of one another ("1" and "10": the
endpoint's tokenizer is unknown, and "10" may be written "1" + "0"). Said up front: a
``top_logprobs`` too small to list every label in its two spellings.

Images: scoreband's decoder (:mod:`scoreband.images`) reads every image; plain 8-bit RGB /
greyscale PNGs and JPEGs without an EXIF turn are uploaded as they are, every other file
(WEBP, TIFF, GIF, BMP, 16-bit or transparent PNGs, CMYK or turned JPEGs) as the PNG of the
picture scoreband decodes, so the endpoint sees the same picture as every other command
(llama.cpp reads PNG and JPEG only).

Whether the model sees images at all is checked once per run: the first answer's prompt
token count is compared with that of the same prompt without the image (a text-only model
counts the same). A model that does not see the image stops the run (``allow_blind``: go on,
and say so in the provenance).

Robustness: one HTTP client per judge, reused (keep-alive) and shared by ``concurrency``
threads; retries only on what another attempt can fix (:mod:`scoreband.http`); an answer
with no token, an answer cut by ``max_tokens``, a model without log-probs are each said in
their own words. Every successful response is cached on disk under a key of endpoint,
model, prompt hash, image hash and decoding parameters, so a rerun after an interruption
asks only for what is missing. The API key is read from the environment and never written
anywhere. The model name the server reports is kept (:meth:`OpenAIJudge.run_info`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
import warnings
from pathlib import Path

from scoreband.errors import InputError
from scoreband.files import atomic_write_text
from scoreband.http import MAX_RESPONSE_BYTES, EndpointClient, public_url
from scoreband.images import decode_image, read_image_bytes
from scoreband.json_io import read_json
from scoreband.judges.answers import parse_chat_answer
from scoreband.judges.base import JudgeError, JudgeInputError, JudgePrompt, JudgeResult, JudgeStop
from scoreband.judges.tokens import (
    ambiguous_labels,
)

__all__ = ["OpenAIJudge", "image_upload", "parse_chat_answer"]

#: prompt tokens an image must add for the model to be taken as seeing it (a text-only
#: chat template may still write a placeholder or two)
MIN_IMAGE_TOKENS = 3


def image_upload(source, kind: str | None | bool = False) -> tuple[bytes, str, bool]:
    """The bytes to upload for an image (a path or a file's bytes), their media type, and
    whether they were converted: a plain 8-bit RGB / greyscale PNG or JPEG without an EXIF
    turn as it is, anything else as the PNG of the picture scoreband's decoder gives.
    ``kind``: :func:`_plain_kind` of the bytes when already known. Raises
    :class:`JudgeInputError` when scoreband cannot read the image."""
    try:
        data = source if isinstance(source, (bytes, bytearray)) else read_image_bytes(source)
        if kind is False:
            kind = _plain_kind(data)
        picture = decode_image(data)  # the one decoder: validates, turns upright, to RGB
    except ValueError as e:
        raise JudgeInputError(str(e)) from None
    if kind:
        return bytes(data), str(kind), False
    buf = io.BytesIO()
    picture.save(buf, format="PNG", compress_level=1)
    return buf.getvalue(), "image/png", True


def _plain_kind(data: bytes) -> str | None:
    """"image/png" or "image/jpeg" for a file an endpoint shows as scoreband's decoder
    does (8-bit RGB or greyscale, no transparency, no EXIF turn), else None (the header
    only; the decoder reads the pixels)."""
    from PIL import Image, UnidentifiedImageError

    try:
        im = Image.open(io.BytesIO(data))
        kind = {"PNG": "image/png", "JPEG": "image/jpeg"}.get(im.format or "")
        if kind is None or im.mode not in ("RGB", "L") or "transparency" in im.info:
            return None
        if im.getexif().get(0x0112, 1) != 1:
            return None
        return kind
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return None  # the decoder gives the reason


class OpenAIJudge(EndpointClient):
    """Judge through ``POST {base_url}/chat/completions`` (see module docstring)."""

    error = JudgeError
    #: rows may be judged from several threads at once (the engine's judge stage)
    concurrent = True

    def __init__(self, model: str, prompt: JudgePrompt, *,
                 base_url: str = "https://api.openai.com/v1", api_key: str | None = None,
                 top_logprobs: int = 20, max_tokens: int = 256, timeout: float = 60.0,
                 retries: int = 4, backoff: float = 1.0, cache_dir=None,
                 concurrency: int = 1, allow_blind: bool = False):
        labels = prompt.labels
        pairs = ambiguous_labels(labels)
        if pairs:
            a, b = pairs[0]
            raise InputError(
                f"the scale {prompt.lo}-{prompt.hi} has labels that start other labels "
                f"({', '.join(f'{x!r} / {y!r}' for x, y in pairs[:3])}): an endpoint's "
                f"tokenizer may write {b!r} as {a!r} + {b[len(a):]!r}, so the probability "
                f"read for {a!r} would include part of that of {b!r}. Fix: use a scale of single "
                "digits (0-9 or 1-9; map it back afterwards), or a local judge (hf:) whose "
                "tokenizer scoreband can check")
        self.model = model
        self.name = f"openai:{model}"
        self.prompt = prompt
        self._init_endpoint(base_url, api_key, timeout=float(timeout), retries=int(retries),
                            backoff=float(backoff), connections=int(concurrency))
        self.top_logprobs = int(top_logprobs)
        if self.top_logprobs < 2 * len(labels):
            few = ("cannot list all" if self.top_logprobs < len(labels) else
                   "may leave out some spellings of")
            warnings.warn(
                f"`top_logprobs` {self.top_logprobs} {few} the {len(labels)} labels (each "
                f"has two spellings, e.g. '{labels[-1]}' and ' {labels[-1]}'): labels "
                "outside the list get no probability, and rows where they may hold more "
                "than 5 % of it are not scored. Ask for at least "
                f"{2 * len(labels)} if the endpoint allows it", stacklevel=2)
        self.max_tokens = int(max_tokens)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.allow_blind = bool(allow_blind)
        self.served_models: set[str] = set()
        #: the image check: None until the first answer from the endpoint
        self.image_check: dict | None = None
        #: the ids the endpoint's GET /models lists (asked once, with the image check; kept
        #: when it lists few: a local server's loaded model, which some servers, e.g.
        #: llama-cpp-python's, do not put in their answers, echoing the name asked for)
        self.endpoint_models: list[str] | None = None
        self._stop: str | None = None
        self._probe_lock = threading.Lock()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._probe_lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_probe_lock"] = None
        return state

    def describe(self) -> dict:
        return {"judge": self.name, "endpoint": public_url(self.base_url), **self._decoding()}

    def run_info(self) -> dict:
        """What the run learned about the endpoint (for the provenance): the model name(s)
        the server reported, whether the model sees images, the requests sent."""
        info: dict = {"model_requested": self.model,
                      "model_served": sorted(self.served_models),
                      "requests": self.requests_made}
        if self.endpoint_models:
            info["endpoint_models"] = list(self.endpoint_models)
        if self.image_check is not None:
            info["image_check"] = dict(self.image_check)
        return info

    def _decoding(self) -> dict:
        return {"temperature": 0.0, "top_logprobs": self.top_logprobs,
                "max_tokens": self.max_tokens}

    # ------------------------------------------------------------------ judging
    def judge(self, image_path: Path, text: str) -> JudgeResult:
        if self._stop is not None:
            raise JudgeStop(self._stop)
        try:
            raw = read_image_bytes(image_path)  # bounded: the file is uploaded whole
        except ValueError as e:
            raise JudgeInputError(str(e)) from None
        kind = _plain_kind(raw)
        key = hashlib.sha256(json.dumps({
            "endpoint": public_url(self.base_url), "model": self.model,
            "prompt": hashlib.sha256(text.encode()).hexdigest(),
            "image": hashlib.sha256(raw).hexdigest(), **self._decoding(),
            # converted images get a key of their own (answers cached earlier saw the file)
            **({} if kind else {"upload": "png-decoded"})},
            sort_keys=True).encode()).hexdigest()
        cached = self.cache_dir / f"{key}.json" if self.cache_dir is not None else None
        if cached is not None and cached.exists():
            hit = self._from_cache(cached)
            if hit is not None:
                return hit
        image, mime, _ = image_upload(raw, kind)
        body = {"model": self.model, "messages": [{"role": "user", "content": [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {
                "url": f"data:{mime};base64,{base64.b64encode(image).decode()}"}}]}],
            "logprobs": True, **self._decoding()}
        resp = self._post("chat/completions", body)
        self._note_model(resp)
        self._check_image_seen(text, resp)
        result = self._parse(resp)  # only a well-formed answer is cached
        if cached is not None:
            _write_cache(cached, json.dumps(resp))
        return result

    def _note_model(self, resp) -> None:
        model = resp.get("model") if isinstance(resp, dict) else None
        if isinstance(model, str) and model and model not in self.served_models:
            with self._lock:
                self.served_models.add(model)

    def _check_image_seen(self, text: str, resp: dict) -> None:
        """Once per run: does the model see the image? The first answer's prompt tokens
        against those of the same prompt without the image (one short request). A model
        that does not see it stops the run unless ``allow_blind``."""
        if self.image_check is None:
            with self._probe_lock:
                if self.image_check is None:
                    self.endpoint_models = self._list_models()
                    self.image_check = self._probe(text, resp)
                    if self.image_check.get("image_seen") is False:
                        msg = (f"the model {self.model!r} at {public_url(self.base_url)} does "
                               "not see the images: its prompt counts "
                               f"{self.image_check['prompt_tokens_with_image']} tokens with the "
                               "image and "
                               f"{self.image_check['prompt_tokens_without_image']} without. It "
                               "is a text-only model (or the server was started without its "
                               "vision projector: llama.cpp `--mmproj`, llama-cpp-python "
                               "`--clip_model_path` with a vision chat format). Its scores "
                               "would judge the text alone; pass `allow_blind` to accept that")
                        self.image_check["message"] = msg
                        if not self.allow_blind:
                            self._stop = msg
        if self._stop is not None:
            raise JudgeStop(self._stop)

    def _list_models(self, most: int = 10) -> list[str] | None:
        """The model ids GET {base_url}/models lists, when it answers with at most ``most``
        (best effort: None on any failure, or for a service listing its whole catalogue)."""
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            r = self._client().get(f"{self.base_url}/models", headers=headers,
                                   timeout=min(self.timeout, 10.0))
            data = r.json().get("data") if r.status_code == 200 and len(r.content) < 1 << 20 \
                else None
            ids = [str(m["id"]) for m in data] if isinstance(data, list) else None
        except (httpx.HTTPError, ValueError, TypeError, KeyError, AttributeError):
            return None
        return ids if ids and len(ids) <= most else None

    def _probe(self, text: str, resp: dict) -> dict:
        with_image = _prompt_tokens(resp)
        if with_image is None:
            return {"image_seen": None, "reason": "the endpoint reports no usage.prompt_tokens"}
        body = {"model": self.model, "max_tokens": 1, "temperature": 0.0,
                "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
        try:
            without = _prompt_tokens(self._post("chat/completions", body))
        except JudgeError as e:
            return {"image_seen": None, "reason": f"the text-only request failed: {e}"}
        if without is None:
            return {"image_seen": None, "reason": "the endpoint reports no usage.prompt_tokens"}
        return {"image_seen": with_image - without >= MIN_IMAGE_TOKENS,
                "prompt_tokens_with_image": with_image,
                "prompt_tokens_without_image": without}

    def _from_cache(self, cached: Path) -> JudgeResult | None:
        """The cached answer, or None (reported) when the entry is damaged: it is then
        asked again and the entry replaced."""
        try:
            resp = read_json(cached, what="cache entry", max_bytes=MAX_RESPONSE_BYTES)
            result = self._parse(resp)
        except (InputError, JudgeError) as e:
            warnings.warn(f"damaged judge cache entry {cached.name} ({e}); asking the "
                          "endpoint again", stacklevel=2)
            return None
        self._note_model(resp)
        return result

    def _parse(self, resp) -> JudgeResult:
        """This judge's answer parsed by :func:`parse_chat_answer`."""
        return parse_chat_answer(resp, self.prompt, top_logprobs=self.top_logprobs,
                                 max_tokens=self.max_tokens, model=self.model)


def _write_cache(path: Path, text: str) -> None:
    """A cache entry, through the one atomic writer (renamed into place, listed as
    scoreband's, created with the umask, cleaned on a signal) but without the fsync of an
    output: an entry a crash leaves empty or torn is found damaged and asked again."""
    atomic_write_text(path, text, durable=False)


def _prompt_tokens(resp) -> int | None:
    usage = resp.get("usage") if isinstance(resp, dict) else None
    n = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None
