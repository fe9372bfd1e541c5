"""What the task text says about time and repetition: poll deadlines and intended repeats.

A user who writes "it usually takes 10–15 minutes" or "give up after 20 minutes" has told the
guard how long a poll may legitimately wait; one who writes "create three identical tickets"
or "send it again" has declared that identical writes are intended. This module reads such
English phrases from plain text. It is pure: text in, numbers out.

Example:
    >>> task_deadline("The export usually takes 10-15 minutes.")
    TaskDeadline(seconds=1350.0, explicit=False, phrase='10-15 minutes')
    >>> task_deadline("For the next 2 hours, check the queue every 15 minutes.")
    TaskDeadline(seconds=7260.0, explicit=True, phrase='For the next 2 hours')
    >>> intended_repeats("Please create three identical placeholder tickets")
    3
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from .limits import COUNTED_VALUE_CHARS, MARGIN, MIN_MARGIN_S, UNTIL_GRACE_S, UNTIL_UNKNOWN_S

_UNITS: Final = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_WORD_NUMBERS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15,
    "twenty": 20, "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60,
    "ninety": 90, "a couple of": 2, "a few": 3, "several": 5, "half an": 0.5, "half a": 0.5,
}
_NUMBER = r"(?:\d+(?:\.\d+)?|(?:" + "|".join(
    sorted((re.escape(w) for w in _WORD_NUMBERS), key=len, reverse=True)
) + r")(?=\s))"
_UNIT = r"(?:" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")\b"
_DURATION = re.compile(
    rf"\b(?P<lo>{_NUMBER})(?:\s*(?:-|–|—|to|or)\s*(?P<hi>{_NUMBER}))?\s*(?P<unit>{_UNIT})",
    re.IGNORECASE,
)
_EXPLICIT = re.compile(
    r"(?:give up|stop|abort|cancel|bail out|time ?out)\s+(?:polling\s+|waiting\s+|trying\s+)?"
    r"(?:after|if it takes (?:more|longer) than|beyond|at)\s*$"
    r"|(?:no (?:more|longer) than|not (?:more|longer) than|at most|max(?:imum)?(?: of)?|"
    r"don'?t wait (?:more|longer) than|do not wait (?:more|longer) than|wait (?:at most|up to)|"
    r"limit(?: of)?|deadline(?: of| is)?|timeout(?: of| is)?)\s*$",
    re.IGNORECASE,
)
_INTERVAL = re.compile(
    r"(?:every|each|once an?|interval of|intervals of|sleep|pause|wait|waiting|poll(?:ing)? "
    r"at|check(?:ing)? (?:back )?in|retry in|back off|backoff of)\s*$",
    re.IGNORECASE,
)
"""A duration after these words is a pace ("poll every 30 s"), not how long to go on."""
_CLOCK = (
    r"(?:noon|midday|midnight|(?P<{0}h>\d{{1,2}})(?:(?::(?P<{0}m>\d\d))\s*(?P<{0}p>[ap]\.?m\.?)?"
    r"|\s*(?P<{0}q>[ap]\.?m\.?)))\b"
)
"""A clock time: "noon", "17:00", "5 pm", "9:30am" (a bare number is not one)."""
_UNTIL = re.compile(
    r"\b(?:until|till|through)\s+(?:the\s+)?" + _CLOCK.format("e"), re.IGNORECASE
)
_NOW = re.compile(
    r"\b(?:it'?s|it is|now(?: is)?|the time is|starting(?: at)?)\s+" + _CLOCK.format("s"),
    re.IGNORECASE,
)
_NEXT = re.compile(
    rf"\b(?:for|over|during|throughout)\s+the\s+next\s+(?:(?P<n>{_NUMBER})\s*)?"
    rf"(?P<unit>{_UNIT})",
    re.IGNORECASE,
)
"""A stated span of work from now: "for the next hour", "over the next 30 minutes"."""


@dataclass(frozen=True, slots=True)
class TaskDeadline:
    """How long polling may go on, read from the task: ``explicit`` limits ("give up after
    20 minutes") are used as they are; estimates get a margin."""

    seconds: float
    explicit: bool
    phrase: str


def _until(text: str) -> tuple[float, str] | None:
    """A schedule's end ("every 15 minutes until noon"): the time from the clock the task
    states ("It's 09:00") to the end, else ``UNTIL_UNKNOWN_S``."""
    end = _UNTIL.search(text)
    if end is None or not (end.group("eh") or end.group(0).split()[-1].lower() in _NAMED):
        return None
    now = _NOW.search(text)
    if now is None or not (now.group("sh") or now.group(0).split()[-1].lower() in _NAMED):
        return UNTIL_UNKNOWN_S, end.group(0)
    seconds = (_clock(end, "e") - _clock(now, "s")) % 86400
    return (seconds + UNTIL_GRACE_S if seconds else UNTIL_UNKNOWN_S), end.group(0)


_NAMED: Final = {"noon": 12 * 3600.0, "midday": 12 * 3600.0, "midnight": 0.0}


def _clock(match: re.Match[str], prefix: str) -> float:
    """Seconds since midnight of a clock time matched by ``_CLOCK``."""
    hour = match.group(f"{prefix}h")
    if hour is None:
        return _NAMED[match.group(0).split()[-1].lower()]
    h, m = int(hour), int(match.group(f"{prefix}m") or 0)
    half = (match.group(f"{prefix}p") or match.group(f"{prefix}q") or "").lower()
    half = half.replace(".", "")
    if half == "pm" and h < 12:
        h += 12
    elif half == "am" and h == 12:
        h = 0
    return h * 3600.0 + m * 60.0


def _number(text: str) -> float:
    text = text.lower()
    return float(_WORD_NUMBERS[text]) if text in _WORD_NUMBERS else float(text)


def task_deadline(text: str | None) -> TaskDeadline | None:
    """The polling deadline a task's text states, or ``None`` when it states none.

    An explicit limit wins (the smallest, if several); otherwise the largest estimate's upper
    bound plus ``MARGIN`` (at least ``MIN_MARGIN_S``). "within an hour" and "under 60
    seconds" are estimates; "give up after 20 minutes" and "no more than 5 min" are limits,
    and so is a span of work the task states from now, with ``UNTIL_GRACE_S`` for the check
    at its end ("for the next hour, check every 10 minutes": 3660 s).
    """
    if not text:
        return None
    limits: list[tuple[float, str]] = []
    estimates: list[tuple[float, str]] = []
    for match in _DURATION.finditer(text):
        unit = _UNITS[match.group("unit").lower()]
        high = match.group("hi") or match.group("lo")
        seconds = _number(high) * unit
        if seconds <= 0:
            continue
        prefix = text[max(0, match.start() - 60) : match.start()]
        if _INTERVAL.search(prefix):
            continue
        (limits if _EXPLICIT.search(prefix) else estimates).append((seconds, match.group(0)))
    if (until := _until(text)) is not None:
        limits.append(until)
    for match in _NEXT.finditer(text):  # ("for the next hour, check every 10 minutes")
        seconds = _number(match.group("n") or "1") * _UNITS[match.group("unit").lower()]
        if seconds > 0:
            limits.append((seconds + UNTIL_GRACE_S, match.group(0)))
    if limits:
        seconds, phrase = min(limits)
        return TaskDeadline(seconds, True, phrase)
    if estimates:
        seconds, phrase = max(estimates)
        return TaskDeadline(seconds + max(seconds * MARGIN, MIN_MARGIN_S), False, phrase)
    return None


_ONES: Final = (
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)
_TENS: Final = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
                "seventy": 70, "eighty": 80, "ninety": 90}
_COUNT_WORDS: Final = {
    **{word: n for n, word in enumerate(_ONES, start=1) if n > 1},
    **_TENS,
    **{f"{tens}{sep}{unit}": value + n
       for tens, value in _TENS.items() for n, unit in enumerate(_ONES[:9], start=1)
       for sep in ("-", " ")},
    "twice": 2, "thrice": 3, "both": 2, "a pair of": 2, "a couple of": 2,
}
"""Numbers in words, up to ninety-nine ("twenty-six cartons")."""
_COUNT = (
    r"(?P<n>\d+|a pair of|a couple of|twice|thrice|both|(?:"
    + "|".join(sorted({*_ONES[1:], *_TENS}, key=len, reverse=True))
    + r")(?:[- ](?:" + "|".join(_ONES[:9]) + r"))?)"
)
"""Digits or a number in words ("thirty", "twenty-six")."""
_REPEAT_COUNT = re.compile(
    r"\b" + _COUNT + r"\s+"
    r"(?:identical|same|similar|matching|equal|duplicate|more|copies|copy|times)\b",
    re.IGNORECASE,
)
_ITEM_COUNT = re.compile(
    r"\b" + _COUNT + r"\s+(?:[a-z-]+\s+)?(?P<noun>[a-z]{3,}?)(?:e?s)\b", re.IGNORECASE
)
"""A number of things ("thirty cartons", "4 accounts"): that many identical writes are asked
for when the write's own arguments count that thing ("cartons": 1)."""
_TIMES = re.compile(r"\b(?P<n>twice|thrice|\d+\s+times|(?:two|three|four|five)\s+times)\b",
                    re.IGNORECASE)
_TRIGGER = re.compile(
    r"again|identical|same|similar|matching|equal|duplicate|more|cop(?:y|ies)|times|twice|"
    r"thrice|another|resend|re-send|redo|re-?run|repeat|\d|"
    + "|".join(sorted(set(_ONES[1:]) | set(_TENS), key=len, reverse=True)),
    re.IGNORECASE,
)
"""Words without which no repeat is asked for: most messages are ruled out in one scan."""
_AGAIN = re.compile(
    r"\b(?:again|one more|another(?: one)?|once more|a second (?:one|time|copy)|resend|re-send|"
    r"redo|re-run|rerun|repeat (?:it|that|the))\b",
    re.IGNORECASE,
)


def intended_repeats(text: str | None, counted: frozenset[str] = frozenset()) -> int:
    """How many identical writes ``text`` asks for: 1 when it asks for none in particular.

    "create three identical placeholder tickets" → 3; "send it twice" → 2; "send it again"
    or "book one more" → 2 (the earlier one and one more). ``counted`` are the words of the
    write's arguments: "receive thirty cartons" asks for 30 writes that each record
    ``{"cartons": 1}``, where "one pack (500 sheets)" asks for one order, not 500.
    """
    if not text or not _TRIGGER.search(text):
        return 1
    counts = [1]
    for pattern in (_REPEAT_COUNT, _TIMES, _ITEM_COUNT):
        for match in pattern.finditer(text):
            if pattern is _ITEM_COUNT and match.group("noun").lower() not in counted:
                continue
            value = _count(match.group("n"))
            if value is not None:
                counts.append(value)
    if _AGAIN.search(text):
        counts.append(2)
    return max(min(c, 100) for c in counts)


def _count(said: str) -> int | None:
    """The number ``said`` names ("30", "thirty", "twenty-six", "a pair of"), else ``None``."""
    said = said.lower()
    return int(said) if said.isdigit() else _COUNT_WORDS.get(said)


def counted_words(args: Any, tool: str = "") -> frozenset[str]:
    """The words of a write's tool name, argument names and short values, singular
    ("cartons" and "carton" → "carton"): what a stated number of things may count
    ("6 placeholder reservations" made by ``create_seat_reservation``)."""
    if not isinstance(args, dict):
        args = {}
    words: set[str] = set()
    for key, value in ((tool, ""), *args.items()):
        for text in (str(key), value if isinstance(value, str) and len(value) < COUNTED_VALUE_CHARS else ""):
            for word in re.findall(r"[a-z]{3,}", text.lower()):
                words.add(word[:-1] if word.endswith("s") else word)
    return frozenset(words)
