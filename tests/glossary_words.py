"""docs/glossary.md read as a test reads it: the words it defines and the words it retired.

A *word* is a run of letters (``stop_reason`` and ``would-stops`` are two words each; digits
and one-letter runs such as the ``s`` of ``35.1 s`` are not words). A text keeps to the
glossary when each of its words is a word of a term (every ``**bold**`` name in the Terms
section), an everyday word (the list under "Everyday words") or ``loopscope``, and none of
the retired phrases (the first column of "Retired words") appears in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[1] / "docs" / "glossary.md"
_WORD = re.compile(r"[A-Za-z]{2,}")


def words(text: str) -> list[str]:
    """The words of ``text``, lower case, in order."""
    return [w.lower() for w in _WORD.findall(text)]


def _section(text: str, title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert found, f"docs/glossary.md has no '## {title}' section"
    return found.group(1)


@dataclass(frozen=True, slots=True)
class Glossary:
    """The defined words and the retired phrases."""

    defined: frozenset[str]
    retired: tuple[str, ...]

    def unknown(self, text: str) -> list[str]:
        """The words of ``text`` the glossary does not define (a plural of a defined word is
        defined: ``flags``, ``kinds``)."""
        return [w for w in words(text) if w not in self.defined
                and not (w.endswith("s") and w[:-1] in self.defined)
                and not (w.endswith("es") and w[:-2] in self.defined)]

    def retired_in(self, text: str) -> list[str]:
        """The retired phrases ``text`` uses (whole words, any case)."""
        lowered = " ".join(words(text))
        return [p for p in self.retired if re.search(rf"\b{re.escape(p)}\b", lowered)]

    def problems(self, where: str, texts: Iterable[str], *,
                 retired_only: bool = False) -> list[str]:
        """One line per text with an undefined or a retired word, naming ``where``
        (``retired_only``: free text, held to the retired words alone)."""
        out = []
        for text in texts:
            bad = [] if retired_only else self.unknown(text)
            old = self.retired_in(text)
            if bad or old:
                out.append(f"{where}: {text!r}: "
                           + (f"not in the glossary: {sorted(set(bad))} " if bad else "")
                           + (f"retired: {old}" if old else ""))
        return out


@cache
def glossary() -> Glossary:
    """docs/glossary.md, parsed."""
    text = GLOSSARY.read_text("utf-8")
    terms = _section(text, "Terms")
    defined = {w for bold in re.findall(r"\*\*(.+?)\*\*", terms) for w in words(bold)}
    everyday = _section(text, "Everyday words").split(":", 1)[1]
    defined |= set(words(everyday)) | {"loopscope"}
    retired_rows = re.findall(r"^\| (.+?) \| .+? \|$", _section(text, "Retired words"),
                              re.MULTILINE)
    retired = tuple(" ".join(words(p)) for row in retired_rows[2:]
                    for p in row.split(",") if words(p))
    assert retired, "docs/glossary.md retires no word"
    return Glossary(frozenset(defined), retired)
