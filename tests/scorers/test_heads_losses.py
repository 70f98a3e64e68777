import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scoreband.scorers import (
    ChainedQuantileHead,
    PointHead,
    UnconstrainedQuantileHead,
    centered_interval_loss,
    interval_score,
    pinball_loss,
)
from scoreband.scorers.heads import count_crossings


@given(st.integers(0, 10_000), st.floats(0.1, 50))
@settings(max_examples=60, deadline=None)
def test_chained_head_is_monotone_and_bounded(seed, scale):
    torch.manual_seed(seed)
    head = ChainedQuantileHead(16)
    with torch.no_grad():
        for p in head.parameters():
            p.mul_(scale)
    q = head(torch.randn(64, 16) * scale)
    assert (torch.diff(q, dim=1) >= 0).all()
    assert ((q >= 0) & (q <= 1)).all()
    assert count_crossings(q) == 0


def test_init_from_point_head():
    torch.manual_seed(0)
    point = PointHead(8).eval()
    head = ChainedQuantileHead(8)
    head.init_from_point(point)
    h = torch.randn(10, 8)
    q = head(h)
    torch.testing.assert_close(q[:, 5], point(h))
    # deltas start small: sigmoid(z - 2.5) shrinks the lower quantiles toward 0 ...
    assert (q[:, 0] < 0.05 * q[:, 5] + 1e-6).all()
    # ... and the upper ones start close to the median
    s = torch.sigmoid(head.fc2(torch.nn.functional.gelu(head.fc1(h))))
    torch.testing.assert_close(s[:, 1:], torch.sigmoid(
        torch.logit(s[:, :1]).expand(-1, 10) - 2.5), rtol=1e-4, atol=1e-5)


def test_unconstrained_head_can_cross_and_is_counted():
    torch.manual_seed(1)
    head = UnconstrainedQuantileHead(8)
    assert count_crossings(head(torch.randn(200, 8))) > 0


def test_interval_score_hand_values():
    lo, hi = torch.tensor([0.2, 0.2, 0.2]), torch.tensor([0.4, 0.4, 0.4])
    y = torch.tensor([0.3, 0.1, 0.5])
    # inside: width 0.2; below: 0.2 + 20 * 0.1 = 2.2; above: 0.2 + 20 * 0.1 = 2.2
    torch.testing.assert_close(interval_score(lo, hi, y, 0.1), torch.tensor([0.2, 2.2, 2.2]))


def test_centered_interval_loss_hand_value():
    q = torch.tensor([[0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8]])
    y = torch.tensor([0.5])
    # all intervals cover y: sum of widths + |y - median| = 0.7+0.5+0.3+0.1... computed:
    widths = [0.8 - 0.1, 0.75 - 0.15, 0.7 - 0.2, 0.65 - 0.25, 0.6 - 0.3]
    assert float(centered_interval_loss(q, y)) == pytest.approx(sum(widths))
    y2 = torch.tensor([0.05])  # below every lower end
    expected = 0.45  # |y - median|
    for j, a in enumerate([0.10, 0.15, 0.20, 0.25, 0.30]):
        lo, hi = float(q[0, j]), float(q[0, 10 - j])
        expected += (hi - lo) + 2 / a * (lo - 0.05)
    assert float(centered_interval_loss(q, y2)) == pytest.approx(expected, rel=1e-6)


def test_pinball_hand_value():
    q = torch.full((1, 11), 0.5)
    y = torch.tensor([0.7])
    levels = np.array([0.05, 0.075, 0.10, 0.125, 0.15, 0.50, 0.85, 0.875, 0.90, 0.925, 0.95])
    assert float(pinball_loss(q, y)) == pytest.approx(float((levels * 0.2).sum()), rel=1e-6)
