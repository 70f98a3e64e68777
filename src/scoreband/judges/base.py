"""The judge interface: the prompt, one row's result, the error a row can fail with, and the
``Judge`` protocol that the local and endpoint judges implement (imported by both, so that
they never import the table job in :mod:`scoreband.judge_stage`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from scoreband.errors import InputError

__all__ = ["JudgePrompt", "JudgeResult", "Judge", "JudgeError", "JudgeInputError", "JudgeStop",
           "DEFAULT_TEMPLATE", "DEFAULT_RUBRIC", "MAX_UNSEEN_SHARE"]

#: a row whose labels missing from the top-k list may hold more than this share of the label
#: distribution is not given a score (its renormalised log-probs would read as a confident
#: judge): :func:`scoreband.judges.tokens.unseen_label_share`
MAX_UNSEEN_SHARE = 0.05

DEFAULT_TEMPLATE = (
    "You are an impartial judge of how well a response fits an image.\n"
    "Instruction: {instruction}\n"
    "Response: {response}\n"
    "Rubric: {rubric}\n"
    "Explain briefly, then finish with '{delimiter} N' where N is an integer from {lo} to {hi}."
)
DEFAULT_RUBRIC = ("{lo} = the response does not fit the image at all; {hi} = it fits the image "
                  "completely and correctly.")

class JudgeError(Exception):
    """One row could not be judged; the message goes into ``judge_error``."""


class JudgeInputError(JudgeError):
    """The row's own input is unusable (no image file, an image scoreband cannot decode):
    says nothing about the judge, so it does not count towards stopping a run."""


class JudgeStop(JudgeError):
    """No row can be judged as things stand (e.g. the model does not see images): the run
    stops asking, every remaining row gets this reason."""


#: the fix a score scale's multi-token labels call for
SCORE_LABEL_FIX = ("use a scale whose labels are single tokens (e.g. 1-9 or 0-9 instead of "
                   "1-10) and map it back afterwards")


@dataclass(frozen=True)
class JudgePrompt:
    """The judge's instruction. ``template`` may use {instruction}, {response}, {rubric},
    {delimiter}, {lo}, {hi}."""

    lo: int
    hi: int
    template: str = DEFAULT_TEMPLATE
    rubric: str = DEFAULT_RUBRIC
    delimiter: str = "Score:"
    #: an endpoint answer without the delimiter is read at its first token when that token
    #: is a label ("4"); a pairwise prompt turns this off ("A careful look ..." is no verdict)
    first_token_fallback: bool = True
    #: how the labels are named in messages, and the fix for a label that is not one token
    label_kind = "score"
    label_fix = SCORE_LABEL_FIX

    def __post_init__(self) -> None:
        fields = "{instruction}, {response}, {rubric}, {delimiter}, {lo}, {hi}"
        for name, text in (("template", self.template), ("rubric", self.rubric)):
            try:
                self.render("i", "r") if name == "template" else text.format(
                    lo=self.lo, hi=self.hi, delimiter=self.delimiter)
            except KeyError as e:
                raise InputError(f"the judge {name} names an unknown field {{{e.args[0]}}}; "
                                 f"it may use {fields} (write {{{{ and }}}} for literal "
                                 "braces)") from None
            except (IndexError, ValueError) as e:
                raise InputError(f"the judge {name} is not a valid format string ({e}); it "
                                 f"may use {fields}") from None

    def render(self, instruction: str, response: str) -> str:
        fill = {"lo": self.lo, "hi": self.hi, "delimiter": self.delimiter}
        return self.template.format(instruction=instruction, response=response,
                                    rubric=self.rubric.format(**fill), **fill)

    @property
    def labels(self) -> list[str]:
        from scoreband.judges.tokens import scale_labels  # lazy: loads scipy

        return scale_labels(self.lo, self.hi)


@dataclass
class JudgeResult:
    logp: np.ndarray                  # (K,) log-probs of the labels, -inf where absent
    missing_mass: float               # probability on tokens that are no label
    position: str                     # generated | forced | first-token
    generated: str = ""               # the judge's text before the score (its reasoning)
    extra: dict = field(default_factory=dict)
    #: the largest share of the label distribution the labels missing from an endpoint's
    #: top-k list may hold (0: every label listed, or a full-vocabulary judge)
    unseen_share: float = 0.0


class Judge(Protocol):
    name: str
    prompt: JudgePrompt

    def judge(self, image_path: Path, text: str) -> JudgeResult: ...

    def describe(self) -> dict: ...
