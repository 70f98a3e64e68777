"""A local transformers VLM as a judge: full-vocabulary logits at the score position.

Loaded with ``AutoProcessor`` + ``AutoModelForImageTextToText`` from a local directory or a
hub id (LLaVA-style and other image-text-to-text models). With ``max_new_tokens > 0`` the
judge first writes its reasoning (greedy); the score position is found in that output by
the delimiter searched from the end (:func:`~scoreband.judges.tokens.find_score_position`),
and one forward pass over prompt + reasoning-up-to-the-score reads the logits there. When
the output has no delimiter (or no reasoning is asked for), the delimiter is appended and
the next-token distribution is read: ``judge_position = forced``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scoreband.errors import InputError
from scoreband.judges.base import JudgeError, JudgeInputError, JudgePrompt, JudgeResult
from scoreband.judges.tokens import (
    ambiguous_labels,
    canonical_token,
    find_score_position,
    fold_full_logprobs,
    label_token_ids,
)
from scoreband.model_sources import model_source
from scoreband.provenance import weights_fingerprint

__all__ = ["LocalVLMJudge"]

_DTYPES = ("float32", "bfloat16", "float16")


class LocalVLMJudge:
    """Judge with a local image-text-to-text model (see module docstring)."""

    def __init__(self, model: str, prompt: JudgePrompt, *, max_new_tokens: int = 0,
                 device: str = "cpu", dtype: str = "float32"):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if dtype not in _DTYPES:
            raise InputError(f"`dtype` {dtype!r}: choose one of {', '.join(_DTYPES)}")
        self.name = f"hf:{model}"
        self.prompt = prompt
        self.max_new_tokens = int(max_new_tokens)
        self.device, self.dtype = device, dtype
        try:
            model = model_source(model)
            self.processor = AutoProcessor.from_pretrained(model)
            self.model = AutoModelForImageTextToText.from_pretrained(
                model, dtype=getattr(torch, dtype)).to(device).eval()
        except OSError as e:
            raise InputError(f"could not load the judge model {model!r}: {e}. Fix: pass a "
                             "directory with config.json, the weights and the processor files "
                             "(or a hub id on a machine with internet)") from None
        tok = self.processor.tokenizer
        self.tokenizer = tok
        vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
        # byte-level tokens ("Ġ5") and SentencePiece ones ("▁5") are folded by
        # canonical_token; a per-id decode catches tokenizers with other markers
        # one batched (Rust-side, for fast tokenizers) decode of the whole vocabulary
        decoded = tok.batch_decode([[i] for i in range(len(tok))])
        self.label_ids = label_token_ids(list(zip(vocab, decoded, strict=True)), prompt.labels,
                                         split=lambda lab: tok.tokenize(lab),
                                         kind=prompt.label_kind, fix=prompt.label_fix)
        _check_prefix_labels(tok, prompt.labels)
        self._fingerprint = weights_fingerprint(model)

    def describe(self) -> dict:
        return {"judge": self.name, "fingerprint": self._fingerprint,
                "max_new_tokens": self.max_new_tokens, "dtype": self.dtype}

    def _prompt_text(self, text: str) -> str:
        proc = self.processor
        if getattr(proc, "chat_template", None):
            messages = [{"role": "user", "content": [{"type": "image"},
                                                     {"type": "text", "text": text}]}]
            return proc.apply_chat_template(messages, add_generation_prompt=True,
                                            tokenize=False)
        image_token = getattr(proc, "image_token", None) or "<image>"
        return f"USER: {image_token}\n{text} ASSISTANT:"

    def judge(self, image_path: Path, text: str) -> JudgeResult:
        import torch

        from scoreband.images import decode_image  # lazy: loads PIL, pandas, pyarrow

        try:
            image = decode_image(image_path)
        except ValueError as e:
            raise JudgeInputError(str(e)) from None
        inputs = self.processor(images=image, text=self._prompt_text(text),
                                return_tensors="pt").to(self.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(getattr(torch, self.dtype))
        prompt_ids = inputs["input_ids"]
        tok = self.tokenizer
        generated = torch.zeros((1, 0), dtype=prompt_ids.dtype, device=prompt_ids.device)
        position, reasoning = "forced", ""
        with torch.inference_mode():
            if self.max_new_tokens > 0:
                out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens,
                                          do_sample=False)
                gen = out[:, prompt_ids.shape[1]:]
                texts = [tok.decode([int(t)]) for t in gen[0]]
                pos = find_score_position(texts, self.prompt.delimiter)
                if pos is not None:
                    generated, position = gen[:, :pos], "generated"
                else:
                    keep = [i for i, t in enumerate(gen[0].tolist())
                            if t not in set(tok.all_special_ids)]
                    generated = gen[:, keep]
                reasoning = tok.decode(generated[0], skip_special_tokens=True)
            if position == "forced":
                delim = tok(" " + self.prompt.delimiter, add_special_tokens=False,
                            return_tensors="pt")["input_ids"].to(prompt_ids.device)
                generated = torch.cat([generated, delim], dim=1)
            ids = torch.cat([prompt_ids, generated], dim=1)
            fwd = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
            logits = self.model(input_ids=ids, attention_mask=torch.ones_like(ids),
                                **fwd).logits[0, -1].float()
        logp = torch.log_softmax(logits, dim=-1).cpu().numpy().astype(np.float64)
        if not np.isfinite(logp).all():
            raise JudgeError("the model's logits at the score position are not finite "
                             "(overflow in a low-precision dtype? try `dtype` float32)")
        lp, missing = fold_full_logprobs(logp, self.label_ids)
        return JudgeResult(lp, missing, position, reasoning)


def _check_prefix_labels(tok, labels) -> None:
    """Labels that start other labels ("1" and "10") can be read from one next-token
    distribution only when the tokenizer writes the longer one as one token, bare and after
    a space; otherwise "1" would hold part of "10"'s probability. Raises InputError."""
    def single(text: str) -> bool:
        return len([p for p in tok.tokenize(text) if canonical_token(p)]) == 1

    bad = [(a, b) for a, b in ambiguous_labels(labels) if not (single(b) and single(" " + b))]
    if bad:
        a, b = bad[0]
        raise InputError(
            f"score label {b!r} starts with label {a!r} and this tokenizer writes it with "
            f"several tokens ({tok.tokenize(b)} / {tok.tokenize(' ' + b)}): the probability "
            f"read for {a!r} would hold part of {b!r}'s. Fix: use a scale of single digits "
            "(0-9 or 1-9) and map it back afterwards")
