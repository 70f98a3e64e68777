"""Simulated VLM judges for the embedded world: score-token log-probs with controllable
discriminative strength and over-confidence. SIMULATED: no model runs here; every output of
these judges carries ``simulated=True`` and the judge name says so."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SimulatedJudge", "SIMULATED_JUDGES", "judge_logprobs"]


@dataclass(frozen=True)
class SimulatedJudge:
    """``noise``: per-task sd of the judge's latent score error on [0, 1] (discriminative
    strength); ``temperature``: sharpness of its score distribution (small = over-confident);
    ``bias``: a shift on [0, 1] (judges that score leniently)."""

    name: str
    noise: dict
    temperature: float
    bias: float = 0.0


_BASE = {"colour": 0.08, "shape": 0.10, "counting": 0.22, "spatial": 0.28,
         "long_description": 0.16}
SIMULATED_JUDGES = (
    SimulatedJudge("sim-strong", {t: v * 0.8 for t, v in _BASE.items()}, 0.55),
    SimulatedJudge("sim-medium", {t: v * 1.2 for t, v in _BASE.items()}, 0.45, bias=0.05),
    # over-confident: max probabilities above 0.99 for most items
    SimulatedJudge("sim-overconfident", {t: v * 1.5 for t, v in _BASE.items()}, 0.12),
)


def judge_logprobs(judge: SimulatedJudge, true01, tasks, seed: int = 0, k: int = 5) -> np.ndarray:
    """(n, k) log-probs of the score tokens "1".."k" for items of known true alignment."""
    rng = np.random.default_rng([seed, sum(map(ord, judge.name))])
    sd = np.array([judge.noise[t] for t in tasks])
    latent = np.clip(np.asarray(true01) + judge.bias + rng.normal(0, 1, len(sd)) * sd, 0, 1)
    centre = 1 + (k - 1) * latent
    labels = np.arange(1, k + 1)
    logits = -((labels[None, :] - centre[:, None]) ** 2) / (2 * judge.temperature**2)
    return logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)


