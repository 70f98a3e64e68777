"""Losses: the centered interval loss (interval score + L1 median) and the pinball loss."""

from __future__ import annotations

import torch

from scoreband.datatypes import INTERVAL_ALPHAS, QUANTILE_LEVELS

__all__ = ["interval_score", "centered_interval_loss", "pinball_loss"]


def interval_score(lo, hi, y, alpha: float):
    """``(u - l) + 2/alpha (l - y)[y < l] + 2/alpha (y - u)[y > u]`` per item (lower is
    better). Works on tensors and arrays.

    >>> round(float(interval_score(torch.tensor(0.2), torch.tensor(0.4), torch.tensor(0.5), 0.1)), 4)
    2.2
    """
    under = torch.clamp(lo - y, min=0) if torch.is_tensor(lo) else (lo - y).clip(min=0)
    over = torch.clamp(y - hi, min=0) if torch.is_tensor(hi) else (y - hi).clip(min=0)
    return (hi - lo) + (2.0 / alpha) * under + (2.0 / alpha) * over


def centered_interval_loss(q: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean over items of ``sum_alpha IS_alpha(q_{alpha/2}, q_{1-alpha/2}; y) + |y - q50|``.

    ``q`` is (n, 11) at the levels 0.05 ... 0.95; the alphas are 0.10 ... 0.30.
    """
    loss = torch.abs(y - q[:, 5])
    for j, a in enumerate(INTERVAL_ALPHAS):  # (0, 10), (1, 9), ... (4, 6)
        loss = loss + interval_score(q[:, j], q[:, 10 - j], y, a)
    return loss.mean()


def pinball_loss(q: torch.Tensor, y: torch.Tensor, levels=QUANTILE_LEVELS) -> torch.Tensor:
    """Mean over items of ``sum_tau max(tau (y - q), (tau - 1)(y - q))``."""
    tau = torch.as_tensor(levels, dtype=q.dtype)
    d = y[:, None] - q
    return torch.maximum(tau * d, (tau - 1) * d).sum(dim=1).mean()
