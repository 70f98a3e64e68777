"""Score-token log-probs -> score distribution: see :mod:`scoreband.logprobs` (a leaf module,
so that the conformal core can use it without importing the judges package)."""

from scoreband.logprobs import (  # noqa: F401
    __all__,
    argmax_score,
    distribution_std_from_logprobs,
    entropy,
    expected_score,
    max_prob,
    normalize_logprobs,
)
