"""Simulated pairwise judges for the embedded world: verdict-token log-probs ("A", "B",
"tie") for two responses of known quality, with a controllable position bias. SIMULATED: no
model runs here; the judge names say so.

The judge's honest verdict distribution for a pair shown as (first, second) is a
multinomial logistic map of its noisy reading of the quality difference; a position bias
``b`` mixes it with "always say the first": ``p = (1 - 2b) * honest + 2b * [first]``, so
``(p_AB(A) - p_BA(A)) / 2`` has expectation ``b`` exactly (the reading noise is drawn
afresh for each order, so a single pair's measured bias scatters around ``b``).

:func:`world_pairs` builds a pair table of several simulated systems captioning the same
world items, with simulated human preferences (the embedded annotators, averaged), so the
demo and the tests need no download.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["SimulatedPairJudge", "SIMULATED_PAIR_JUDGES", "pair_logprobs", "world_pairs",
           "simulated_pair_judge"]


@dataclass(frozen=True)
class SimulatedPairJudge:
    """``noise``: sd of the judge's reading of the quality difference (on [0, 1]);
    ``temperature``: sharpness of its verdicts; ``position_bias``: the share b of verdicts
    pulled to the first response shown (``(p_AB(A) - p_BA(A)) / 2`` expects b);
    ``tie``: the weight of the tie verdict near equal quality (0: no tie token)."""

    name: str
    noise: float = 0.08
    temperature: float = 0.06
    position_bias: float = 0.0
    tie: float = 0.5

    def __post_init__(self):
        check_judge_params(self.name, noise=self.noise, temperature=self.temperature,
                           bias=self.position_bias, tie=self.tie)


def check_judge_params(name: str, *, noise, temperature, bias=None, tie=None) -> None:
    """Refuse a simulated judge's parameters before any row is judged: ``noise`` (a number
    or a dict of them) finite and >= 0, ``temperature`` finite and >= 1e-6, ``bias`` (the
    position bias) in [0, 0.5), ``tie`` finite and >= 0. Temperature 0 is refused, not read
    as the argmax: its verdict probabilities would be exactly 0 and 1, log-probs -inf,
    which every reader of judge log-probs rejects as a missing score token (and a 0 / 0 at
    a tie) - give a small temperature (0.01) for a nearly deterministic judge."""
    import math

    from scoreband.errors import InputError

    def num(v):
        return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)

    noises = noise.values() if isinstance(noise, dict) else [noise]
    if not all(num(v) and v >= 0 for v in noises):
        raise InputError(f"simulated judge {name!r}: noise must be a finite number >= 0 (the "
                         f"sd of its reading error), got {noise!r}")
    if not (num(temperature) and temperature >= 1e-6):
        raise InputError(f"simulated judge {name!r}: temperature must be a finite number "
                         f">= 1e-06, got {temperature!r} (0 would give probabilities of exactly 0 "
                         "and 1, log-probs -inf; use e.g. 0.01 for a nearly deterministic "
                         "judge)")
    if bias is not None and not (num(bias) and 0 <= bias < 0.5):
        raise InputError(f"simulated judge {name!r}: position bias must lie in [0, 0.5), got "
                         f"{bias!r}")
    if tie is not None and not (num(tie) and tie >= 0):
        raise InputError(f"simulated judge {name!r}: tie must be a finite number >= 0 (0: no "
                         f"tie verdict), got {tie!r}")


SIMULATED_PAIR_JUDGES = {
    "sim-pair-strong": SimulatedPairJudge("sim-pair-strong", 0.06, 0.05, 0.03),
    "sim-pair-biased": SimulatedPairJudge("sim-pair-biased", 0.10, 0.06, 0.12),
    "sim-pair-fair": SimulatedPairJudge("sim-pair-fair", 0.10, 0.06, 0.0),
}


def simulated_pair_judge(spec: str) -> SimulatedPairJudge:
    """``sim-pair-biased`` or ``sim-pair-biased:bias=0.2,noise=0.1,tie=0`` (a named judge
    with its parameters overridden)."""
    from scoreband.errors import InputError

    name, _, opts = spec.partition(":")
    if name not in SIMULATED_PAIR_JUDGES:
        raise InputError(f"simulated pairwise judge {name!r}: choose one of "
                         f"{', '.join(SIMULATED_PAIR_JUDGES)}")
    base = SIMULATED_PAIR_JUDGES[name]
    kw = {}
    alias = {"bias": "position_bias", "position_bias": "position_bias", "noise": "noise",
             "temperature": "temperature", "tie": "tie"}
    for part in filter(None, opts.split(",")):
        k, _, v = part.partition("=")
        if k.strip() not in alias:
            raise InputError(f"simulated judge option {k!r}: use bias, noise, temperature "
                             "or tie (e.g. sim-pair-biased:bias=0.2)")
        try:
            kw[alias[k.strip()]] = float(v)
        except ValueError:
            raise InputError(f"simulated judge option {k}={v!r} is not a number") from None
    return SimulatedPairJudge(**{**base.__dict__, **kw, "name": spec})


def pair_logprobs(judge: SimulatedPairJudge, first01, second01, *, seed: int = 0,
                  stream: int = 0, row_keys=None) -> np.ndarray:
    """(n, 3) log-probs of the verdict tokens "A" (the first shown), "B" (the second
    shown) and "tie" for responses of true quality ``first01`` / ``second01`` on [0, 1].
    ``stream`` separates the presentation orders' reading noise; ``row_keys`` (hex
    strings, one a row): each row's noise drawn from its own key, so a row's verdict does
    not depend on the rows judged with it."""
    a, b = np.asarray(first01, float), np.asarray(second01, float)
    base = [seed, stream, sum(map(ord, judge.name))]
    if row_keys is None:
        noise = np.random.default_rng(base).normal(0, judge.noise, len(a))
    else:
        noise = np.array([np.random.default_rng([*base, int(str(k)[:15], 16)]).normal(
            0, judge.noise) for k in row_keys])
    d = (a - b) + noise
    t = judge.temperature
    L = np.column_stack([d / t, -d / t,
                         (np.log(judge.tie) if judge.tie > 0 else -np.inf)
                         - np.abs(d) / t])
    L -= L.max(axis=1, keepdims=True)
    P = np.exp(L)
    P /= P.sum(axis=1, keepdims=True)
    w = 2 * judge.position_bias
    P = (1 - w) * P
    P[:, 0] += w
    with np.errstate(divide="ignore"):
        return np.log(P)


def world_pairs(n_items: int = 300, strengths=None, *, seed: int = 0,
                n_annotators: int = 3, label_share: float = 1.0) -> pd.DataFrame:
    """A pair table of simulated systems on the same world items: ``true_a``/``true_b``
    (each response's true quality on [0, 1]), ``task``, and the human preference
    ``human`` (the simulated annotators' mean ratings compared; ties where equal), left
    empty outside a ``label_share`` of the pairs. ``strengths``: each system's mean quality
    shift (default 4 systems)."""
    from scoreband.world.dataset import simulate_ratings
    from scoreband.world.scenes import TASKS

    strengths = dict(strengths or {"sys-a": 0.0, "sys-b": 0.05, "sys-c": 0.1,
                                   "sys-d": 0.2})
    rng = np.random.default_rng(seed)
    tasks = rng.choice(list(TASKS), n_items)
    base = rng.uniform(0.2, 0.7, n_items)
    names = sorted(strengths)
    q = np.clip(base[:, None] + np.array([strengths[s] for s in names])[None, :]
                + rng.normal(0, 0.12, (n_items, len(names))), 0, 1)
    ratings = {j: simulate_ratings(q[:, j], tasks, n_annotators, rng).mean(axis=1)
               for j in range(len(names))}
    rows = []
    for i in range(n_items):
        for x in range(len(names)):
            for y in range(x + 1, len(names)):
                ha, hb = ratings[x][i], ratings[y][i]
                rows.append({"item": f"w{i:05d}", "task": tasks[i], "system_a": names[x],
                             "system_b": names[y], "true_a": q[i, x], "true_b": q[i, y],
                             "response_a": f"{names[x]} caption of item {i}",
                             "response_b": f"{names[y]} caption of item {i}",
                             "human": "A" if ha > hb else "B" if hb > ha else "tie"})
    df = pd.DataFrame(rows)
    if label_share < 1:
        keep = rng.uniform(size=len(df)) < label_share
        df.loc[~keep, "human"] = ""
    return df
