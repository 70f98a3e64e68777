"""Point and quantile heads.

The chained head has 11 outputs: a median node, 5 lower-delta and 5 upper-delta nodes.
Quantiles are built outward from the median, so they cannot cross and stay in [0, 1].
"""

from __future__ import annotations

import torch
from torch import nn

from scoreband.datatypes import QUANTILE_LEVELS

__all__ = ["PointHead", "ChainedQuantileHead", "UnconstrainedQuantileHead", "count_crossings",
           "LEVELS", "MEDIAN_INDEX", "HEAD_KINDS", "HeadSet"]

LEVELS = torch.tensor(QUANTILE_LEVELS)
MEDIAN_INDEX = 5
HIDDEN = 256


class PointHead(nn.Module):
    """Linear(d, 256) -> GELU -> Dropout -> Linear(256, 1) -> sigmoid."""

    def __init__(self, dim: int, dropout: float = 0.1):
        super().__init__()
        self.fc1 = nn.Linear(dim, HIDDEN)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(HIDDEN, 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc2(self.drop(nn.functional.gelu(self.fc1(h)))))[:, 0]


class _QuantileBase(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, 11)

    def raw(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc2(nn.functional.gelu(self.fc1(h))))

    @torch.no_grad()
    def init_from_point(self, point: PointHead, delta_bias_shift: float = 0.0) -> None:
        """Copy the point head: hidden layer, and its output node into all 11 outputs."""
        self.fc1.load_state_dict(point.fc1.state_dict())
        self.fc2.weight.copy_(point.fc2.weight.expand(11, -1))
        self.fc2.bias.copy_(point.fc2.bias.expand(11))
        if delta_bias_shift:
            self.fc2.bias[1:] -= delta_bias_shift


class ChainedQuantileHead(_QuantileBase):
    """Monotone 11-quantile head. Raw node order: [mid, low x5 (innermost first),
    high x5 (innermost first)]; output order: the levels 0.05 ... 0.95 ascending."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        s = self.raw(h)
        mid = s[:, 0]
        lows, highs = [], []
        q = mid
        for j in range(5):            # 15th, 12.5th, 10th, 7.5th, 5th
            q = s[:, 1 + j] * q       # shrink toward 0
            lows.append(q)
        q = mid
        for j in range(5):            # 85th, 87.5th, 90th, 92.5th, 95th
            q = q + s[:, 6 + j] * (1 - q)  # move toward 1
            highs.append(q)
        return torch.stack([*reversed(lows), mid, *highs], dim=1)

    def init_from_point(self, point: PointHead, delta_bias_shift: float = 2.5) -> None:
        """Start from the point head; deltas start small (bias - 2.5)."""
        super().init_from_point(point, delta_bias_shift)


class UnconstrainedQuantileHead(_QuantileBase):
    """Ablation: 11 independent sigmoid outputs, one per level (crossing possible)."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.raw(h)


def count_crossings(q: torch.Tensor) -> int:
    """Number of items whose quantiles are not non-decreasing across levels."""
    return int((torch.diff(q, dim=1) < 0).any(dim=1).sum())


#: quantile head name -> (class, loss)
HEAD_KINDS = {
    "chained_ci": (ChainedQuantileHead, "ci"),
    "chained_pinball": (ChainedQuantileHead, "pinball"),
    "unconstrained_pinball": (UnconstrainedQuantileHead, "pinball"),
}


class HeadSet(nn.Module):
    """The point head and the named quantile heads on a representation of width ``dim``
    (every scorer's heads: ``point.*`` and ``heads.*`` in its weights file)."""

    def __init__(self, dim: int, dropout: float = 0.1, kinds=tuple(HEAD_KINDS)):
        super().__init__()
        self.point = PointHead(dim, dropout)
        self.heads = nn.ModuleDict({k: HEAD_KINDS[k][0](dim) for k in kinds})
