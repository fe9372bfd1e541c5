"""A text reduced for comparison: what two outputs, or two arguments, are compared by.

An output's word sketch and trigrams (near-duplicates), its text with the volatile parts
masked (ids, times, positions, the call's own arguments echoed back), an argument's loosened
text (case, punctuation and spacing ignored), and the argument values that name something.
Each reads a bounded head of the text (``limits``), so the work per step is bounded.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .limits import (
    ARG_CHARS,
    ARG_DEPTH,
    ECHO_CHARS,
    ECHO_LABEL_CHARS,
    ECHO_LINE_CHARS,
    MIN_NAMING_NUMBER,
    MIN_VALUE_CHARS,
    SKETCH_CHARS,
    VALUES_PER_LIST,
)

_SPACE_BYTES = bytes.maketrans(string.punctuation.encode(), b" " * len(string.punctuation))


def _unpunctuated(text: str) -> str:
    """``text`` with its ASCII punctuation as spaces. Done on the UTF-8 bytes with a byte
    table, several times faster than ``str.translate`` with a dict (twenty times for a
    text that is not ASCII); a character beyond ASCII is bytes of 0x80 and up, which the
    table leaves alone (``surrogatepass``: a lone surrogate comes back as it was)."""
    return text.encode("utf-8", "surrogatepass").translate(_SPACE_BYTES).decode(
        "utf-8", "surrogatepass"
    )


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[t ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:z|[+-]\d\d:?\d\d)?")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The same patterns from their first "-" on, the lead checked behind: a pattern that starts
# with a literal is found by a fast scan, ten times quicker than one that starts with a digit.
_TIMESTAMP_TAIL = (re.compile(r"-(?<=\d{4}-)" + _TIMESTAMP.pattern[6:]), 4, _TIMESTAMP)
UUID_TAIL = (re.compile(r"-(?<=[0-9a-f]{8}-)" + _UUID.pattern[12:]), 8, _UUID)


def blank(text: str, tail: tuple[re.Pattern[str], int, re.Pattern[str]]) -> str:
    """``whole.sub(" ", text)``, each match found by its tail (see ``_TIMESTAMP_TAIL``)."""
    pattern, lead, whole = tail
    match = pattern.search(text)
    if match is None:  # (most texts)
        return text
    pieces: list[str] = []
    end = 0
    while match is not None:
        start = match.start() - lead
        if start < end:  # two matches overlap: leave the rare case to the whole pattern
            return whole.sub(" ", text)
        pieces += (text[end:start], " ")
        end = match.end()
        match = pattern.search(text, end)
    pieces.append(text[end:])
    return "".join(pieces)


_HEX = frozenset("0123456789abcdef")


def word_sketch(text: str) -> frozenset[str]:
    """The words of the first ``SKETCH_CHARS`` of ``text``, lower-cased, for near-duplicate
    checks. Timestamps, UUIDs and hex ids of 8 or more characters (request ids, hashes) are
    left out: two outputs that differ only in such an id or the time they were served carry
    the same information. Short ids such as ``W123`` or ``HAT041`` stay: they are often the
    information itself."""
    text = text[:SKETCH_CHARS].lower()
    if "-" in text:
        text = blank(text, _TIMESTAMP_TAIL)
        if text.count("-") >= 4:
            text = blank(text, UUID_TAIL)
    words = frozenset(_unpunctuated(text).split())
    # hex ids: runs of hex digits with at least one digit ("deadbeef" is a word)
    ids = [w for w in words if len(w) >= 8 and not w.isalpha() and _HEX.issuperset(w)]
    return words.difference(ids) if ids else words


def trigrams(text: str, *, limit: int = SKETCH_CHARS) -> frozenset[str]:
    """Character 3-grams of the first ``limit`` characters (the fuzzy match)."""
    text = text[:limit]
    return frozenset(text[i : i + 3] for i in range(max(len(text) - 2, 1)))


def similar(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    """Whether the Jaccard similarity |a ∩ b| / |a ∪ b| is at least ``threshold`` (two empty
    sets are identical), skipping the intersection when the sizes rule it out."""
    small, large = len(a), len(b)
    if small > large:
        a, b, small, large = b, a, large, small
    if not large:
        return threshold <= 1.0  # two empty sets are identical
    if small / large < threshold:
        return False
    inter = len(a & b)
    return inter / (small + large - inter) >= threshold


_VOLATILE = re.compile(
    r"(?=[\da-fA-F])(?:"  # (every form starts with a digit or a hex letter: other places are
    # passed over at once, where each alternative would be tried; the matches are the same)
    r"\d{4}-\d\d-\d\d(?:[tT ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:[zZ]|[+-]\d\d:?\d\d)?)?"  # times
    r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"  # uuid
    r"|\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b"  # hex ids
    r"|\d+(?:[.,]\d+)*"  # numbers, durations, line numbers
    r")"
)


def masked(text: str, limit: int = SKETCH_CHARS) -> str:
    """``text`` with numbers, hex ids, UUIDs, timestamps and durations masked, whitespace
    collapsed and lower-cased: two failures that differ only in a line number, a request id
    or how long they took read the same."""
    head = text[:limit]
    if _MAYBE_VOLATILE(head) is None:  # (every volatile form has a digit or a hyphen)
        return " ".join(head.lower().split())
    return " ".join(_VOLATILE.sub("#", head).lower().split())


_MAYBE_VOLATILE: Final = re.compile(r"[\d-]").search


_POSITIONS: Final = re.compile(
    r"\b([Ll]ine) \d+|(\.[A-Za-z]{1,6}):\d+(?::\d+)?|\b0x[0-9a-fA-F]{4,}"
)
"""Where in the source a failure happened: ``line 66`` (a Python traceback), ``app.js:10:5``,
``Foo.java:123``, and addresses (``0x7f3a…``)."""


def unpositioned(text: str) -> str:
    """``text`` with the places in the source it names masked (``_POSITIONS``): the same
    failure raised from code that an edit moved by a few lines reads the same; its message,
    counts and names are left as they are ("3 failed" is not "2 failed")."""
    if ":" not in text and "ine " not in text and "0x" not in text:
        return text
    return _POSITIONS.sub(_position, text)


def _position(match: re.Match[str]) -> str:
    line, suffix = match.group(1), match.group(2)
    return f"{line} #" if line else f"{suffix}:#" if suffix else "#"


def unechoed(text: str, args: Any) -> str:
    """``text`` with the call's own string arguments of 8 characters or more masked, longest
    first: a failure that quotes back what it was given ("no such file: a/b.py") reads the
    same for every argument. A line that quotes a piece of a longer argument (a database or
    a compiler showing the line of the query or the code it stopped at, ``LINE 1: SELECT
    …``, with a caret under the place) is masked whole, with its caret line."""
    if not isinstance(args, Mapping):
        return text
    values = sorted((v.strip() for v in args.values() if isinstance(v, str)),
                    key=len, reverse=True)
    for value in values:
        if len(value) >= ECHO_CHARS and value in text:
            text = text.replace(value, "\u2400")
    if "\n" in text and values and len(values[0]) >= ECHO_LINE_CHARS:
        text = "\n".join(_unquoted_lines(text.split("\n"), values))
    return text


def _unquoted_lines(lines: list[str], values: list[str]) -> Iterator[str]:
    long = [v for v in values if len(v) >= ECHO_LINE_CHARS]
    for line in lines:
        if _CARET.fullmatch(line):
            yield "\u2400"
            continue
        label, sep, rest = line.partition(": ")
        quoted = (rest if sep and len(label) <= ECHO_LABEL_CHARS else line).strip()
        yield ("\u2400" if len(quoted) >= ECHO_LINE_CHARS and any(quoted in v for v in long)
               else line)


_CARET: Final = re.compile(r"\s*[\^~]+\s*")
"""A line that only points at a place in the line above it."""


_LOOSE_BYTES = bytes.maketrans(  # lower-casing and punctuation in one pass, for ASCII text
    string.ascii_uppercase.encode() + string.punctuation.encode(),
    string.ascii_lowercase.encode() + b" " * len(string.punctuation),
)


def loose_text(text: str) -> str:
    """Canonical argument text with case, punctuation and spacing ignored: ``"foo"``,
    ``"Foo "`` and ``"foo."`` are the same request, slightly reworded."""
    if text.isascii():
        return " ".join(text.encode("ascii").translate(_LOOSE_BYTES).decode("ascii").split())
    return " ".join(_unpunctuated(text.lower()).split())


PAGE_PARAMS: Final = "page|p|pg|offset|start|skip|from"
"""Argument names of a page or an offset (in a URL's query or a loosened value): another page
of one question names nothing new, and an answer that names it echoes the call."""


def arg_values(args: Any, depth: int = 0) -> frozenset[str]:
    """The scalar values of ``args`` that can name something: strings of at least three
    characters (loosened: case, punctuation and spacing ignored) and numbers of three digits
    or more (order ids, emails, SKUs, store ids). Small numbers (offsets, limits) are not."""
    found: set[str] = set()
    if isinstance(args, Mapping):
        if depth < ARG_DEPTH:
            for value in args.values():
                found |= arg_values(value, depth + 1)
    elif isinstance(args, (list, tuple)):
        if depth < ARG_DEPTH:
            for value in args[:VALUES_PER_LIST]:
                found |= arg_values(value, depth + 1)
    elif isinstance(args, str):
        text = loose_text(args[:ARG_CHARS])
        if len(text) >= MIN_VALUE_CHARS:
            found.add(text)
    elif (isinstance(args, (int, float)) and not isinstance(args, bool)
          and abs(args) >= MIN_NAMING_NUMBER):
        found.add(str(args))
    return frozenset(found)


def path_values(args: Any) -> frozenset[str]:
    """The values of ``args`` (as ``arg_values`` walks them) that are file paths or file
    names (``src/app/main.py``, ``notes.md``), loosened as ``arg_values`` loosens them: names
    of things, however many words their loosened form has."""
    found: set[str] = set()
    stack: list[tuple[Any, int]] = [(args, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            if depth < ARG_DEPTH:
                stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple)):
            if depth < ARG_DEPTH:
                stack.extend((v, depth + 1) for v in value[:VALUES_PER_LIST])
        elif isinstance(value, str) and FILE_WORD.fullmatch(value.strip()):
            found.add(loose_text(value[:ARG_CHARS]))
    return frozenset(found)


FILE_WORD: Final = re.compile(
    r"[\w.~@:-]*(?:/[\w.~@:-]+)+/?|[\w~-]+(?:\.[A-Za-z][A-Za-z0-9]{0,4})+")
"""A path (``src/app/main.py``, ``/etc/hosts``) or a file name (``notes.md``; a version such
as ``2.4.1`` is not one), no spaces: a word that names a file."""
