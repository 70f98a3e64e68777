"""Simulated VLM judges for the embedded world: score-token log-probs with controllable
discriminative strength and over-confidence. SIMULATED: no model runs here; every output of
these judges carries ``simulated=True`` and the judge name says so."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SimulatedJudge", "SIMULATED_JUDGES", "judge_logprobs"]


@dataclass(frozen=True)
class SimulatedJudge:
    """``noise``: per-task sd of the judge's latent score error on [0, 1] (discriminative
    strength); ``temperature``: sharpness of its score distribution (small = over-confident);
    ``bias``: a shift on [0, 1] (judges that score leniently); ``lenient``: per-task floor f
    of a compressed scale, latent -> f + (1 - f) * latent (the judge ranks those items as well
    as ever but scores them all high: good ranking, poor absolute scores)."""

    name: str
    noise: dict
    temperature: float
    bias: float = 0.0
    lenient: dict = field(default_factory=dict)

    def __post_init__(self):
        import math

        from scoreband.errors import InputError
        from scoreband.world.pairwise import check_judge_params

        check_judge_params(self.name, noise=self.noise, temperature=self.temperature)
        if isinstance(self.bias, bool) or not isinstance(self.bias, (int, float)) or \
                not math.isfinite(self.bias):
            raise InputError(f"simulated judge {self.name!r}: bias must be a finite number "
                             f"(a shift on [0, 1]), got {self.bias!r}")
        if not all(isinstance(v, (int, float)) and 0 <= v < 1 for v in self.lenient.values()):
            raise InputError(f"simulated judge {self.name!r}: lenient floors must lie in "
                             f"[0, 1), got {self.lenient!r}")


_BASE = {"colour": 0.08, "shape": 0.10, "counting": 0.22, "spatial": 0.28,
         "long_description": 0.16}
# every simulated judge is lenient on colour captions (the easiest task to rank): the
# ranking-scoring decoupling that real judges show (good order, poor absolute scores)
_LENIENT = {"colour": 0.65}
SIMULATED_JUDGES = (
    SimulatedJudge("sim-strong", {t: v * 0.8 for t, v in _BASE.items()}, 0.55,
                   lenient=_LENIENT),
    SimulatedJudge("sim-medium", {t: v * 1.2 for t, v in _BASE.items()}, 0.45, bias=0.05,
                   lenient=_LENIENT),
    # over-confident: max probabilities above 0.99 for most items
    SimulatedJudge("sim-overconfident", {t: v * 1.5 for t, v in _BASE.items()}, 0.12,
                   lenient=_LENIENT),
)


def judge_logprobs(judge: SimulatedJudge, true01, tasks, seed: int = 0, k: int = 5) -> np.ndarray:
    """(n, k) log-probs of the score tokens "1".."k" for items of known true alignment."""
    rng = np.random.default_rng([seed, sum(map(ord, judge.name))])
    sd = np.array([judge.noise[t] for t in tasks])
    latent = np.clip(np.asarray(true01) + judge.bias + rng.normal(0, 1, len(sd)) * sd, 0, 1)
    floor = np.array([judge.lenient.get(t, 0.0) for t in tasks])
    latent = floor + (1 - floor) * latent
    centre = 1 + (k - 1) * latent
    labels = np.arange(1, k + 1)
    logits = -((labels[None, :] - centre[:, None]) ** 2) / (2 * judge.temperature**2)
    return logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)


