"""Score labels as tokens: variant folding, multi-token detection, the score position.

Tokenizers spell the label "5" several ways ("5", " 5", SentencePiece "▁5", byte-level BPE
"Ġ5"); all of them mean the same label, so their probabilities add. A label that is not a
single token (e.g. "10" in a digit-splitting tokenizer) cannot be read from one next-token
distribution: it is refused with the reason, never read as its first digit.

Pure functions only; the extractors (:mod:`scoreband.judges.local`,
:mod:`scoreband.judges.endpoint`) use them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
from scipy.special import logsumexp

from scoreband.errors import InputError

__all__ = [
    "canonical_token",
    "scale_labels",
    "ambiguous_labels",
    "label_token_ids",
    "fold_full_logprobs",
    "fold_top_logprobs",
    "unseen_label_share",
    "find_score_position",
]

# SentencePiece word marker, byte-level BPE space, and plain whitespace
_MARKERS = "\u2581\u0120 \t\n\r\u010a"


def canonical_token(token: str) -> str:
    """The label a token spells, without word markers or whitespace.

    >>> [canonical_token(t) for t in ["5", " 5", "\u25815", "\u01205", "5\\n"]]
    ['5', '5', '5', '5', '5']
    """
    return token.strip(_MARKERS)


def scale_labels(lo: int, hi: int) -> list[str]:
    """The label strings of an integer scale ``lo..hi``.

    >>> scale_labels(1, 5)
    ['1', '2', '3', '4', '5']
    """
    if int(lo) != lo or int(hi) != hi or hi <= lo:
        raise InputError(f"judge scales are integer label sets; got {lo},{hi}. Fix: pass "
                         "`scale` A,B with integers A < B (e.g. 1,5)")
    return [str(v) for v in range(int(lo), int(hi) + 1)]


def ambiguous_labels(labels: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs (a, b) where label a is a proper prefix of label b ("1" and "10"): when b is
    spelled with several tokens its first token *is* a, so one next-token distribution
    cannot tell them apart.

    >>> ambiguous_labels([str(v) for v in range(1, 11)])
    [('1', '10')]
    """
    return [(a, b) for a in labels for b in labels if a != b and b.startswith(a)]


def label_token_ids(tokens: Sequence[str], labels: Sequence[str], *,
                    split=None, kind: str = "score",
                    fix: str = "use labels that are single tokens of this vocabulary"
                    ) -> dict[str, list[int]]:
    """Map every label to the ids of all vocabulary tokens that spell it.

    ``tokens[i]`` is token id i's string, or a tuple of its spellings (e.g. from
    ``convert_ids_to_tokens`` and a per-id decode);
    ``split(label)`` (optional) returns how the tokenizer spells a label, for the error;
    ``kind`` (score, verdict) and ``fix`` word it. Raises InputError when a label has no
    single-token spelling.
    """
    want = set(labels)
    ids: dict[str, list[int]] = {lab: [] for lab in labels}
    for i, tok in enumerate(tokens):
        spellings = tok if isinstance(tok, tuple) else (tok,)
        hit = {canonical_token(t) for t in spellings if t is not None} & want
        for c in hit:
            ids[c].append(i)
    missing = [lab for lab, v in ids.items() if not v]
    if missing:
        how = ""
        if split is not None:
            how = "; the tokenizer spells " + ", ".join(
                f"{lab!r} as {list(split(lab))}" for lab in missing[:3])
        raise InputError(
            f"{kind} label(s) {missing} are not single tokens of this model's vocabulary{how}. "
            f"scoreband reads the {kind} from one next-token distribution, so every label must "
            f"be one token. Fix: {fix}")
    return ids


def fold_full_logprobs(logp_vocab: np.ndarray, label_ids: dict[str, list[int]]):
    """From a full-vocabulary log-softmax row to ``(per-label log-probs, missing mass)``.

    Variants add (log-sum-exp); the missing mass is the probability the model puts on
    tokens that are no label at all.
    """
    lp = np.asarray(logp_vocab, dtype=np.float64)
    out = np.array([logsumexp(lp[ids]) for ids in label_ids.values()])
    missing = float(max(0.0, 1.0 - np.exp(out).sum()))
    return out, missing


def fold_top_logprobs(top: Iterable[tuple[str, float]], labels: Sequence[str]):
    """From a top-k list of ``(token, logprob)`` to ``(per-label log-probs, missing mass)``.

    A label absent from the list gets -inf (its mass is unknown but below the k-th entry);
    the missing mass is ``1 - sum(p)`` of the label tokens that were listed.
    """
    index = {lab: j for j, lab in enumerate(labels)}
    acc: list[list[float]] = [[] for _ in labels]
    seen: set[str] = set()
    total = 0.0
    for tok, lp in top:
        if lp is None or math.isnan(float(lp)) or float(lp) > 1e-6:
            raise ValueError(f"invalid log-prob {lp!r} for token {tok!r}")
        if str(tok) in seen:  # the same token listed twice: one next-token outcome
            continue
        seen.add(str(tok))
        total += math.exp(float(lp))
        j = index.get(canonical_token(str(tok)))
        if j is not None:
            acc[j].append(float(lp))
    if total > 1.0 + 1e-3:
        raise ValueError(f"the listed tokens' probabilities add up to {total:.3f} > 1; this "
                         "is not one next-token distribution")
    out = np.array([logsumexp(a) if a else -np.inf for a in acc])
    missing = float(max(0.0, 1.0 - np.exp(out).sum()))
    return out, missing


def unseen_label_share(top: Iterable[tuple[str, float]], labels: Sequence[str], k: int, *,
                       spellings: int = 2) -> tuple[float, list[str]]:
    """How much of the label distribution the labels absent from a top-k list may hold.

    Returns ``(share, unseen labels)``. A label absent from the list has each of its
    spellings below the k-th listed probability ``p_k``, and all of them together below the
    mass the list leaves out ``m``; with ``spellings`` spellings per label ("4" and " 4"),
    the unseen labels hold at most ``b = min(m, n_unseen * spellings * p_k)``, so at most
    ``b / (s + b)`` of the distribution renormalised over the labels (``s``: the listed
    labels' mass). 0 when every label is listed. A renormalised row with a large share reads
    as a confident judge it is not (one label listed out of five becomes p = 1).

    >>> share, unseen = unseen_label_share([(" 3", math.log(0.28))], list("12345"), k=1)
    >>> round(share, 2), unseen
    (0.72, ['1', '2', '4', '5'])
    >>> unseen_label_share([(" 3", math.log(0.9)), ("4", math.log(0.05)),
    ...                     ("1", math.log(0.01)), ("2", math.log(0.01)),
    ...                     ("5", math.log(0.01))], list("12345"), k=5)
    (0.0, [])
    """
    listed: dict[str, float] = {}
    for tok, lp in top:
        listed.setdefault(str(tok), math.exp(float(lp)))
    seen = {canonical_token(t) for t in listed}
    unseen = [lab for lab in labels if lab not in seen]
    if not unseen:
        return 0.0, []
    probs = sorted(listed.values(), reverse=True)
    if not probs:
        return 1.0, unseen
    cut = probs[min(int(k), len(probs)) - 1]
    missing = max(0.0, 1.0 - sum(probs))
    bound = min(missing, len(unseen) * spellings * cut)
    held = sum(p for t, p in listed.items() if canonical_token(t) in set(labels))
    return (bound / (held + bound) if held + bound > 0 else 1.0), unseen


def find_score_position(token_texts: Sequence[str], delimiter: str = "Score:") -> int | None:
    """Index of the score token in a generated sequence, or None if there is no delimiter.

    The delimiter (e.g. ``Score:`` or a JSON field ``"score":``) is searched **from the
    end**, so a number inside the reasoning ("the 3 dogs ...") is never taken; the score is
    the first token after the delimiter that is not whitespace. Returns ``len(token_texts)``
    when the delimiter ends the sequence (the score token is the next one to be generated).

    >>> toks = ["I", " see", " 3", " dogs", ".", " Score", ":", " 4", "<eos>"]
    >>> find_score_position(toks)
    7
    >>> find_score_position(["{\\"", "score", "\\":", " ", "2", "}"], '"score":')
    4
    >>> find_score_position(["no", " score", " here"]) is None
    True
    """
    text = "".join(token_texts)
    at = text.rfind(delimiter)
    if at < 0:
        return None
    end = at + len(delimiter)
    pos = 0
    for i, t in enumerate(token_texts):
        pos += len(t)
        if pos >= end:
            j = i + 1
            # a token that straddles the delimiter's end and carries the label is the score
            if pos > end and canonical_token(text[end:pos]):
                return i
            while j < len(token_texts) and not token_texts[j].strip(_MARKERS):
                j += 1
            return j
    return len(token_texts)
