"""The judge interface: the prompt, one row's result, the error a row can fail with, and the
``Judge`` protocol that the local and endpoint judges implement (imported by both, so that
they never import the table job in :mod:`scoreband.judges.extract`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from scoreband.errors import InputError

__all__ = ["JudgePrompt", "JudgeResult", "Judge", "JudgeError", "DEFAULT_TEMPLATE",
           "DEFAULT_RUBRIC"]

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


@dataclass(frozen=True)
class JudgePrompt:
    """The judge's instruction. ``template`` may use {instruction}, {response}, {rubric},
    {delimiter}, {lo}, {hi}."""

    lo: int
    hi: int
    template: str = DEFAULT_TEMPLATE
    rubric: str = DEFAULT_RUBRIC
    delimiter: str = "Score:"

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


class Judge(Protocol):
    name: str
    prompt: JudgePrompt

    def judge(self, image_path: Path, text: str) -> JudgeResult: ...

    def describe(self) -> dict: ...
