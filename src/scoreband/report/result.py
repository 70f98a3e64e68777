"""The result every study returns and writes the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scoreband.files import atomic_write_text
from scoreband.json_io import write_json

__all__ = ["StudyResult"]


@dataclass
class StudyResult:
    """A study's numbers and how to present them.

    kind : which study (``demo``, ``judge-study``, ``roundtrip-study``, ``stress``,
        ``systems`` ...: a kind of :mod:`scoreband.report.sections`); saved in
        ``doc["study"]`` so a results file says what made it and the report how to show it
    doc : every number, JSON-ready
    markdown : the same numbers as a short markdown report (fits 80 columns)
    figures : ``(file name, draw(path))`` pairs
    errors : the input rows the study reported and skipped
    warnings : what it said about its inputs (also in ``doc`` where the kind keeps them)
    """

    kind: str
    doc: dict
    markdown: str = ""
    figures: list[tuple[str, Callable[[Path], object]]] = field(default_factory=list)
    errors: list = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.doc = {"study": self.kind, **self.doc}
        if "provenance" not in self.doc and "provenance" not in self.doc.get("_meta", {}):
            from scoreband.provenance import provenance  # lazy: loads httpx, rich

            self.doc["provenance"] = provenance({})

    def to_dict(self) -> dict:
        """The results document (what ``results.json`` holds)."""
        return self.doc

    def save(self, out, html=None, images=()) -> list[Path]:
        """Write the JSON document to the file ``out`` and, with ``html`` (a path), the HTML
        report with the PNG ``images`` inlined."""
        write_json(out, self.doc)
        paths = [Path(out)]
        if html is not None:
            from scoreband.report.html import write_report  # lazy: loads pydantic, scipy

            paths.append(write_report([self.doc], html, images=images))
        return paths

    def write(self, out_dir, *, on_step: Callable[[str], None] | None = None,
              html: str | Path | None = "report.html") -> list[Path]:
        """Write ``results.json``, ``results.md``, the figures and the HTML report (``html``:
        a path, relative to ``out_dir``, or None for none) into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "results.json", self.doc)
        atomic_write_text(out / "results.md", self.markdown)
        paths = [out / "results.json", out / "results.md"]
        if self.figures and on_step:
            on_step("drawing figures")
        for name, draw in self.figures:
            draw(out / name)
            paths.append(out / name)
        if html is not None:
            from scoreband.report.html import write_report  # lazy: loads pydantic, scipy

            if on_step:
                on_step("writing the HTML report")
            figures = [out / name for name, _ in self.figures]
            paths.append(write_report([self.doc], out / html, images=figures))
        return paths
