"""The judges a table can be scored by: one entry per kind of judge (the classes load
their heavy dependencies when built)."""

from __future__ import annotations

import inspect

from scoreband.registry import Registry

__all__ = ["JUDGES"]

#: the judges a table can be scored by; ``JUDGES.create(spec, prompt, **options)``
JUDGES = Registry("judge")


@JUDGES.register("hf:", argument="DIR_OR_HUB_ID",
                 help="a local transformers vision-language model "
                      "(AutoProcessor + AutoModelForImageTextToText)")
def _hf_judge(model, prompt, *, max_new_tokens=0, device="cpu", dtype="float32"):
    from scoreband.judges.local import LocalVLMJudge  # lazy: loads httpx, rich, scipy

    return LocalVLMJudge(model, prompt, max_new_tokens=max_new_tokens, device=device,
                         dtype=dtype)


@JUDGES.register("openai:", argument="MODEL",
                 help="an OpenAI-compatible chat-completions endpoint with logprobs "
                      "(--base-url, key from $OPENAI_API_KEY)")
def _openai_judge(model, prompt, **kw):
    from scoreband.judges.endpoint import (
        OpenAIJudge,  # lazy: loads PIL, httpx, pandas, pyarrow, rich, scipy
    )

    keep = inspect.signature(OpenAIJudge).parameters
    return OpenAIJudge(model, prompt, **{k: v for k, v in kw.items() if k in keep})
