"""A real Inspect evaluation on its mock model (``mockllm/model``), offline: a dataset the
test writes, a mock answer per sample that carries ``logprobs`` / ``top_logprobs`` shaped as
an OpenAI-compatible server returns them (the answer is ``Score: N`` for the sample's
rating N), two scorers, the logs written as ``.eval`` and ``.json`` by Inspect itself."""

from __future__ import annotations

import math
from pathlib import Path

#: the score token's distribution: the rating gets 0.7 as " N" and 0.1 as "N", its
#: neighbour 0.15, the rest a long tail of non-labels
MAIN, BARE, NEXT = 0.7, 0.1, 0.15


def top_list(n: int) -> list[tuple[str, float]]:
    nb = 1 + n % 5
    probs = [(f" {n}", MAIN), (str(n), BARE), (f" {nb}", NEXT)]
    probs += [(f" w{j}", 0.001) for j in range(10)]
    return probs


def expected_logp(n: int, labels) -> dict[str, float]:
    """logp_<label> as the judge computes it from :func:`top_list`: spellings added,
    log-softmax over the labels, an unlisted label floored at -1e4."""
    mass = {lab: 0.0 for lab in labels}
    for tok, p in top_list(n):
        if tok.strip() in mass:
            mass[tok.strip()] += p
    total = sum(mass.values())
    return {f"logp_{lab}": (math.log(m / total) if m else -1e4) for lab, m in mass.items()}


def run(log_dir: Path, ratings: list[int], *, epochs: int = 1, formats=("eval", "json")):
    """Run the eval; returns ``{format: log path}``."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        Logprob,
        Logprobs,
        ModelOutput,
        ModelUsage,
        TopLogprob,
        get_model,
    )
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate

    def respond(messages, tools, tool_choice, config):
        n = int(messages[-1].text.split()[-1])
        toks = ["Looks", " fine", ".", " Score", ":", f" {n}"]
        top = [TopLogprob(token=t, logprob=math.log(p)) for t, p in top_list(n)]
        content = [Logprob(token=t, logprob=-0.01,
                           top_logprobs=top if i == len(toks) - 1 else
                           [TopLogprob(token=t, logprob=-0.01)]) for i, t in enumerate(toks)]
        return ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(
            message=ChatMessageAssistant(content="".join(toks), model="mockllm/model"),
            stop_reason="stop", logprobs=Logprobs(content=content))],
            usage=ModelUsage(input_tokens=5, output_tokens=len(toks),
                             total_tokens=5 + len(toks)))

    samples = [Sample(id=f"item{i}", input=f"Rate caption {i}: {n}", target=f"Score: {n}",
                      metadata={"human": float(n) - 0.25 * (i % 3), "group": "ab"[i % 2]})
               for i, n in enumerate(ratings)]
    model = get_model("mockllm/model", custom_outputs=respond)
    out = {}
    for fmt in formats:
        task = Task(dataset=samples, solver=generate(), scorer=[match(), includes()],
                    epochs=epochs, name="captions")
        logs = inspect_eval(task, model=model, log_dir=str(log_dir / fmt), log_format=fmt,
                            display="none")
        assert logs[0].status == "success", logs[0].error
        out[fmt] = Path(logs[0].location)
    return out
