"""Reference-based caption metrics beside the round-trip score: BLEU-4, ROUGE-L, CIDEr-D.

Computed with pycocoevalcap's scorers (the COCO caption evaluation code, so the numbers are
comparable to published ones) on captions tokenised in Python the way the COCO PTB tokenizer
does (lower case, punctuation removed): the Java tokenizer, METEOR and SPICE are not used, so
no Java is needed. Install with ``pip install 'scoreband[text]'``.
"""

from __future__ import annotations

import re

import numpy as np

from scoreband.errors import InputError
from scoreband.extras import install_hint

__all__ = ["tokenize", "text_metrics"]

_PUNCT = re.compile(r"[^\w\s]")


def tokenize(text: str) -> str:
    """Lower case, punctuation removed, whitespace collapsed.

    >>> tokenize("A red Circle, left of: a star!")
    'a red circle left of a star'
    """
    return " ".join(_PUNCT.sub(" ", str(text).lower()).split())


def text_metrics(candidates, references) -> tuple[dict, dict]:
    """Corpus-level and per-item BLEU-4, ROUGE-L and CIDEr-D.

    ``references[i]`` is a list of reference captions for ``candidates[i]`` (or one string
    with ';'-separated captions). Returns ``(corpus, per_item)``; per-item arrays are NaN
    where an item has no candidate or no reference.
    """
    try:
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.rouge.rouge import Rouge
    except ImportError:
        raise InputError(f"text metrics need pycocoevalcap: {install_hint('pycocoevalcap')}"
                         ) from None
    n = len(candidates)
    if len(references) != n:
        raise InputError(f"{n} candidates but {len(references)} reference lists")
    gts, res, keep = {}, {}, []
    for i, (c, r) in enumerate(zip(candidates, references, strict=True)):
        refs = r.split(";") if isinstance(r, str) else list(r or [])
        refs = [tokenize(x) for x in refs if isinstance(x, str) and tokenize(x)]
        if not isinstance(c, str) or not tokenize(c) or not refs:
            continue
        gts[i], res[i] = refs, [tokenize(c)]
        keep.append(i)
    if not keep:
        raise InputError("no item has both a candidate caption and a reference")
    per = {k: np.full(n, np.nan) for k in ("bleu4", "rouge_l", "cider")}
    corpus = {}
    b, bs = Bleu(4).compute_score(gts, res, verbose=0)
    corpus["bleu4"] = float(b[3])
    per["bleu4"][keep] = bs[3]
    r, rs = Rouge().compute_score(gts, res)
    corpus["rouge_l"] = float(r)
    per["rouge_l"][keep] = rs
    c, cs = Cider().compute_score(gts, res)
    corpus["cider"] = float(c)
    per["cider"][keep] = cs
    corpus["n"] = len(keep)
    return corpus, per


def add_text_metrics(table, text_col: str, references: str) -> dict:
    """Add BLEU-4, ROUGE-L and CIDEr-D per row of ``table`` (in place) against the
    ';'-separated captions of column ``references``; returns the corpus-level scores."""
    if references not in table.columns:
        raise InputError(f"`references` column {references!r} is not in the table")
    corpus, per = text_metrics(table[text_col].tolist(), table[references].tolist())
    for k, v in per.items():
        table[k] = v
    return corpus
