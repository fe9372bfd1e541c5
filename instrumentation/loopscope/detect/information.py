"""What an output tells: its facts, compared as normalised structures, not bytes.

Progress is new information (docs/detection.md), so the core needs to know when two outputs say
the same thing although their bytes differ. ``facts`` reduces an output to a set of hashed
facts:

- a JSON result is walked as a structure: every record of a list is one fact (a multiset of
  records, so a shuffled result set is the same set), every scalar field of an object is one
  fact; fields that change on every call without saying anything new are left out (request
  and search ids, timings such as ``took_ms``, server timestamps, memory and load figures,
  scores, page tokens: ``VOLATILE_KEYS``);
- any other text is a set of lines, each with its volatile parts masked: timestamps and
  clock times, UUIDs and long hex ids, durations and ages (``14m``, ``3d2h``, ``0.53s``,
  ``(2m ago)``), memory sizes (``512Mi``, ``1.2 GB``);
- in both, an echo of the call's own arguments is masked: "nothing found for page 7" and
  "nothing found for page 8" are the same answer.

A step whose facts are all among the facts the episode has already seen adds nothing.
Facts are hashes (Python's ``hash`` of the normalised text: stable within a process, which
is all one episode needs); the content is not kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from .limits import (
    ARG_CHARS,
    ARG_DEPTH,
    COMMAND_WORDS,
    ECHO_TOKEN_CHARS,
    FACT_CHARS,
    MAX_ECHOES,
    MAX_FACTS,
    MIN_VALUE_CHARS,
    READINGS_KEPT,
    URL_CHARS,
    VALUES_PER_LIST,
)
from .texts import PAGE_PARAMS

VOLATILE_KEYS: Final = re.compile(
    r"(?:^|_)(?:request|search|trace|span|correlation|session|query|run|response|event|"
    r"message)_?id$"
    r"|^(?:x_)?request_id$|^etag$|^nonce$|^_?score$|^relevance$|^similarity$|^distance$"
    r"|^took(?:_ms|_s)?$|^(?:elapsed|duration|latency|timing|timings|response_time|"
    r"query_time|execution_time|exec_time|time_ms|time_taken|processing_time)(?:_ms|_s|_sec)?$"
    r"|^(?:timestamp|ts|server_time|current_time|now|as_of|generated_at|fetched_at|"
    r"retrieved_at|served_at|requested_at|checked_at|last_checked|last_seen|updated)$"
    r"|^(?:memory|mem|rss|heap|cpu|load|uptime|age)(?:_[a-z]+)*$|^load_?average$"
    r"|^(?:process_group_|process_)?(?:pid|pgid|ppid)$|^background_pids$"
    r"|(?:^|_)(?:page_)?(?:token|cursor)$|^next(?:_page)?(?:_url|_link)?$",
)
"""Keys (lower-cased, ``-`` and camelCase as ``_``) whose values change from call to call
without saying anything new. Record ids, dates and statuses are information and stay."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_UNITS = r"(?:ns|us|µs|ms|s|m|h|d|y)"
_MASK_SOURCE: Final = (
    # every masked part starts with a digit that does not continue a word or a number: the
    # pattern opens with that digit, so the regex engine skips to the next digit at C speed
    r"\d(?<![\w.]\d)(?:"
    r"\d{3}-\d\d-\d\d(?:[tT ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:[zZ]|[+-]\d\d:?\d\d)?)?"  # times
    r"|\d?:\d\d:\d\d(?:[.,]\d+)?\b"  # clock times
    r"|(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}\b|x[0-9a-fA-F]+\b"  # hex ids, 0x...
    # a number, then its unit: the digits are taken once (``*+``: no unit starts with a
    # digit, so giving one back never helps) and each unit tried after them
    r"|\d*+(?:\.\d++)?+(?:"
    rf"{_UNITS}(?:\d++(?:\.\d++)?+{_UNITS}){{0,3}}\b"  # 0.53s, 14m, 3d2h, 1h30m
    r"|\s?(?:[KMGTP]i?B|[KMGTP]i|bytes)\b"  # memory sizes
    r"|\s?(?:seconds?|secs?|minutes?|mins?|milliseconds?|hours?)\b"  # 3 secs
    r"|\s*[a-z]+\s+ago\b"  # 2m ago
    r"))"
)
_MASK: Final = re.compile(_MASK_SOURCE)
"""The volatile parts of a line of text, masked before it becomes a fact. Hex ids that start
with a letter stay (a commit's short hash is often the news itself)."""
_MASK_ASCII: Final = re.compile(_MASK_SOURCE.replace(r"\s", r"[\s\x1c-\x1f]"), re.ASCII)
"""``_MASK`` for an ASCII text, where it finds the same parts a quarter faster (ASCII digits
and word characters are looked up in a table). Unicode's whitespace class also holds the
separators U+001C to U+001F, which ASCII's lacks: they are named."""


def facts(
    text: str | None, args: Any = None, args_key: str = "", echoes: Echoes | None = None,
    names: Names | None = None,
) -> frozenset[int] | None:
    """The hashed facts of an output (``None`` when the output was not captured; an empty
    set when it says nothing). ``args`` are the call's arguments, whose echoes are masked;
    ``args_key``, when given with an ``echoes`` memo (``readings.Readings`` holds one), names
    them (their canonical text): what they echo is then worked out once for every output of
    the same arguments. ``names``, a memo of the keys met (``Names``), is shared the same
    way. Never raises: an output it
    cannot read (nested past Python's recursion limit, a number of 5,000 digits) is one
    fact, its text."""
    if text is None:
        return None
    try:
        return _facts(
            text,
            _echoes_named(args, args_key, echoes)
            if args_key and echoes is not None else _echoes(args),
            {} if names is None else names,
        )
    except (RecursionError, ValueError, TypeError, MemoryError):
        return frozenset((hash(text[:FACT_CHARS]),))


def _facts(text: str, echoes: _Echoes, names: Names) -> frozenset[int]:
    text = _mask(text[:FACT_CHARS])
    if text.lstrip()[:1] in ("{", "[") and len(text) < FACT_CHARS:
        try:
            value = json.loads(_echoed(_nulled(text, names), echoes[0], ECHO))
        except ValueError:
            pass
        else:
            found: set[int] = set()
            _walk(value, "", echoes[1], found)
            return frozenset(found)
    lines = _echoed(_unfielded(text, names).lower(), tuple(echo.lower() for echo in echoes[0]), "\x00")
    if echoes[1] is not None:
        lines = echoes[1].sub("\x00", lines)
    found = set(map(hash, map(" ".join, map(str.split, lines.splitlines()[:MAX_FACTS]))))
    found.discard(_BLANK)  # (a blank line says nothing)
    return frozenset(found)


_BLANK: Final = hash("")


ECHO: Final = "\u2400"
"""What an echo of the call's arguments becomes in a JSON text (a character JSON strings
may hold)."""


_FIELD = re.compile(r"\n[ \t]*([A-Za-z][\w .-]{0,30}?)[ \t]*[:=]")
"""The key of a ``key: value`` line, found after the line's newline (a pattern that opens
with a literal is found by a fast scan; one that opens with ``^`` is tried at every
character)."""


def _unfielded(text: str, names: Names) -> str:
    """Text whose ``key: value`` lines with a volatile key (``VOLATILE_KEYS``: a process id,
    a request id, a duration) have their value masked, as a JSON answer's are."""
    pattern = _volatile_pattern(
        _FIELD.findall("\n" + text), r"^([ \t]*(?:{})[ \t]*[:=]).*$", names)
    return pattern.sub(r"\1 #", text) if pattern is not None else text


def _volatile_pattern(keys: list[str], template: str, names: Names) -> re.Pattern[str] | None:
    """A pattern for the fields of ``keys`` whose name is volatile (each distinct key judged
    once), made from ``template`` (``{}`` stands for the names), or ``None`` when none is:
    masking them is then one substitution at C speed."""
    volatile = frozenset(k for k in set(keys) if _name(k.replace(" ", "_"), names) is None)
    if not volatile:
        return None
    either = "|".join(map(re.escape, sorted(volatile, key=len, reverse=True)))
    return re.compile(template.replace("{}", either), re.MULTILINE)


def _mask(text: str) -> str:
    """``text`` with its volatile parts masked (UUIDs, found by their dashes, then
    ``_MASK``)."""
    if _UUID_TAIL(text) is not None:
        text = _UUID.sub("#", text)
    return (_MASK_ASCII if text.isascii() else _MASK).sub("#", text)


_UUID: Final = re.compile(
    # (a hex digit not after a word character, rather than ``\b``: a pattern that opens with
    # a character class is searched for at C speed)
    r"[0-9a-fA-F](?<![\w][0-9a-fA-F])[0-9a-fA-F]{7}"
    r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_UUID_TAIL: Final = re.compile(
    r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
).search
"""Where a text has what follows a UUID's first eight digits: a pattern that opens with a
literal is found by a fast scan, so a text without a UUID (nearly all) is not searched
character by character for one."""


def _echoed(text: str, echoes: tuple[str, ...], mark: str) -> str:
    for echo in echoes:
        if echo in text:
            text = text.replace(echo, mark)
    return text


_KEY = re.compile(r'"([A-Za-z_][\w\-]*+)"\s*+:')
"""A JSON key (possessive: what a key's characters or the spaces before its colon matched is
never tried again, as no shorter run could be followed by the quote or the colon)."""
_VALUE = r'(?:"(?:[^"\\]|\\.)*"|[-+\w.]+)'


def _nulled(text: str, names: Names) -> str:
    """A JSON text whose volatile fields (``VOLATILE_KEYS``) hold ``null``: the same value in
    every answer, so they say nothing. Done on the text rather than on the decoded objects."""
    pattern = _volatile_pattern(_KEY.findall(text), r'("(?:{})"\s*:\s*)' + _VALUE, names)
    return pattern.sub(r"\1null", text) if pattern is not None else text


def _walk(value: Any, path: str, numbers: re.Pattern[str] | None, found: set[int]) -> None:
    """The facts of a decoded JSON value: every scalar field of an object, every record of a
    list (a result set is compared as a multiset: in any order)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)):
                _walk(item, f"{path}.{key}", numbers, found)
            elif numbers is not None and numbers.fullmatch(str(item)):
                found.add(hash((path, key, ECHO)))  # an echo of the arguments: "page": 7
            else:
                found.add(hash((path, key, item)))
        return
    if isinstance(value, list):
        for item in value[:MAX_FACTS]:
            found.add(hash((path, _record(item))))
        return
    found.add(hash((path, value)))


_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _record(item: Any) -> Any:
    """A hashable stand-in for one record of a list, equal for equal records in any key
    order: a flat object as its set of fields (the common case, no encoding), anything
    nested as canonical JSON."""
    if type(item) is dict:
        if _SCALARS.issuperset(map(type, item.values())):
            return frozenset(item.items())
        return _CANONICAL(item)
    return _CANONICAL(item) if isinstance(item, list) else item


Names = dict[str, "str | None"]
"""A memo of keys (of JSON objects, of ``key: value`` lines) → their normalised name, or
``None`` for a volatile key (a result repeats the same few keys: each is judged once), owned
by its caller (``readings.Readings``): the core keeps no memo of its own."""


def _name(key: str, names: Names) -> str | None:
    name = names.get(key, "")
    if name == "":
        if len(names) >= READINGS_KEPT:
            names.clear()
        normal = _CAMEL.sub("_", key).lower().replace("-", "_")
        name = names[key] = None if VOLATILE_KEYS.search(normal) else normal
    return name


_Echoes = tuple[tuple[str, ...], "re.Pattern[str] | None"]
"""The echoes of a call's arguments: texts (masked, longest first), and one
pattern for its numbers as whole numbers ("page 7" is an echo of 7; "17" is not)."""
_NO_ECHOES: Final[_Echoes] = ((), None)


Echoes = dict[str, _Echoes]
"""A memo of echoes by the arguments' canonical text (a loop repeats its arguments), owned by
its caller (``readings.Readings``): the core keeps no memo of its own."""


def _echoes_named(args: Any, key: str, memo: Echoes) -> _Echoes:
    found = memo.get(key)
    if found is None:
        if len(memo) >= READINGS_KEPT:
            memo.clear()
        found = memo[key] = _echoes(args)
    return found


def _echoes(args: Any) -> _Echoes:
    """The argument values an output may echo: strings of three characters or more, and
    every number."""
    if not args:
        return _NO_ECHOES
    found: set[str] = set()
    _collect(args, found, 0)
    if not found:
        return _NO_ECHOES
    numbers: list[str] = []
    texts: list[str] = []
    for value in found:
        (numbers if _NUMBER.fullmatch(value) else texts).append(value)
    numbers.sort()
    texts.sort(key=len, reverse=True)
    return tuple(texts[:MAX_ECHOES]), _numbers_pattern(tuple(numbers[:MAX_ECHOES]))


def _numbers_pattern(numbers: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for a call's numbers as whole numbers (``re`` keeps the patterns it
    compiled, so a call's arguments seen again cost no compiling)."""
    if not numbers:
        return None
    return re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, numbers)) + r")(?!\w|\.\d)")


_NUMBER: Final = re.compile(r"-?\d+(?:\.\d+)?")
_DIGIT: Final = re.compile(r"\d").search
_ASCII_DIGITS: Final = "0123456789"


def has_digit(text: str) -> bool:
    """Whether a text has a digit (a figure, an id). An ASCII text is looked through for
    each of the ten digits in turn, by the fast substring search: three times quicker than
    a pattern tried at every character."""
    if not text.isascii():
        return _DIGIT(text) is not None
    for digit in _ASCII_DIGITS:  # noqa: SIM110 (a loop: any() over a generator costs more)
        if digit in text:
            return True
    return False


_PAGE_PARAM: Final = re.compile(rf"[?&;](?:{PAGE_PARAMS})=(\d{{1,6}})\b", re.I)
"""A page or offset in a URL's query: an answer that names it ("no results for page 4")
echoes the call."""


def _collect(value: Any, found: set[str], depth: int) -> None:
    if depth > ARG_DEPTH:
        return
    if isinstance(value, str):  # (the commonest first: no Mapping ABC check for it)
        head = value[:ARG_CHARS]
        digits = has_digit(head)
        text = " ".join((_mask(head) if digits else head).split())
        if len(text) >= MIN_VALUE_CHARS and text != "#":
            found.add(text)
        if digits and "=" in value:  # "…?q=x&page=4": "page 4" echoes 4
            found.update(_PAGE_PARAM.findall(value[:URL_CHARS]))
        if " " in text:  # a command line's specific words echo alone ("Collecting numpy<2")
            found.update(
                token for word in text.split()[:COMMAND_WORDS]
                if len(token := word.strip("\"'`")) >= ECHO_TOKEN_CHARS and not token.isalpha()
            )
    elif type(value) is dict or isinstance(value, Mapping):
        for item in value.values():
            _collect(item, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value[:VALUES_PER_LIST]:
            _collect(item, found, depth + 1)
    elif (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and (not isinstance(value, int) or -(10**18) < value < 10**18)  # (a huge int: no repr)
    ):
        found.add(repr(value))
