"""Canonical call signatures and output hashes.

Two calls are the same call when their tool names match and their arguments serialise to the
same canonical JSON: keys sorted, integral floats written as integers, strings in Unicode NFC,
no ASCII escaping. Any Python value serialises: types JSON does not know fall back to a
stable description, so fingerprinting never raises into the agent (docs/detection.md).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import re
import string
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from .limits import (
    ECHO_CHARS,
    ECHO_LABEL_CHARS,
    ECHO_LINE_CHARS,
    HASH_CHARS,
    JSON_DEPTH,
    MAX_QUANTITIES,
    MIN_VALUE_CHARS,
    SKETCH_CHARS,
    STATUS_MAX_WORDS,
)

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def short_hash(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), as ``HASH_CHARS`` hex characters."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def normalize(value: Any, *, exclude: frozenset[str] = frozenset()) -> Any:
    """Turn ``value`` into plain JSON data with stable numbers and strings.

    Dict keys listed in ``exclude`` are dropped at every depth (volatile fields such as
    request ids and timestamps). Never raises.
    """
    return _normalize(value, exclude, 0, set())


def _normalize(value: Any, exclude: frozenset[str], depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return (
            value
            if unicodedata.is_normalized("NFC", value)
            else unicodedata.normalize("NFC", value)
        )
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return int(value) if value.is_integer() and abs(value) < 2**53 else value
        return repr(value)  # "nan", "inf", "-inf": JSON has no spelling for them
    if depth >= JSON_DEPTH:
        return "<too deep>"
    if id(value) in seen:
        return "<cycle>"
    seen.add(id(value))
    try:
        return _normalize_container(value, exclude, depth + 1, seen)
    finally:
        seen.discard(id(value))


def _normalize_container(value: Any, exclude: frozenset[str], depth: int, seen: set[int]) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
            name = _normalize(key, exclude, depth, seen) if isinstance(key, str) else _key_text(key)
            if name not in exclude:
                out[name] = _normalize(item, exclude, depth, seen)
        return out
    if isinstance(value, (list, tuple)):
        return [_normalize(item, exclude, depth, seen) for item in value]  # pyright: ignore
    if isinstance(value, (set, frozenset)):
        items = [_normalize(item, exclude, depth, seen) for item in value]  # pyright: ignore
        return sorted(items, key=_dump)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": hashlib.sha256(bytes(value)).hexdigest()[:HASH_CHARS]}
    if isinstance(value, enum.Enum):
        return _normalize(value.value, exclude, depth, seen)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        return _normalize(fields, exclude, depth, seen)
    for method, wrap in (("model_dump", False), ("isoformat", True)):  # pydantic; datetimes
        try:
            bound = getattr(value, method, None)
            if callable(bound):
                result = bound()
                return str(result) if wrap else _normalize(result, exclude, depth, seen)
        except Exception:  # a broken __getattr__ or method: fall through to the description
            pass
    return {"$type": type(value).__qualname__, "repr": _safe_repr(value)}


def _key_text(key: Any) -> str:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return json.dumps(_normalize(key, frozenset(), 0, set()))
    return _dump(_normalize(key, frozenset(), 0, set()))


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return "<unrepresentable>"
    return _ADDRESS.sub("", text)[:500]


_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
"""``json.dumps`` with these options builds an encoder per call; this one is built once."""


def _dump(value: Any) -> str:
    return _CANONICAL.encode(value)


def canonical_json(value: Any, *, exclude: Iterable[str] = ()) -> str:
    """The canonical JSON text of ``value``; equal calls give equal text. Never raises."""
    try:
        if not exclude:
            if (
                type(value) is dict
                and _STR.issuperset(map(type, value))
                and _FLAT.issuperset(map(type, value.values()))
            ):  # the commonest arguments: one level of strings, ints, booleans and nulls
                text = _dump(value)
                if text.isascii():  # (so every string is already in NFC)
                    return text
            if _is_plain(value, 0):  # already canonical data
                return _dump(value)
        return _dump(normalize(value, exclude=frozenset(exclude)))
    except Exception:  # a pathological __eq__/__hash__ in user data; still sign something
        return _dump({"$type": type(value).__qualname__, "repr": _safe_repr(value)})


_STR: Final = frozenset([str])
_FLAT: Final = frozenset([str, int, bool, type(None)])


def _is_plain(value: Any, depth: int) -> bool:
    """True when ``normalize`` would return ``value`` unchanged (checked cheaply)."""
    kind = type(value)
    if kind is str:
        return unicodedata.is_normalized("NFC", value)
    if kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value) and not value.is_integer()
    if depth >= 8:
        return False
    if kind is dict:
        return all(
            type(k) is str and unicodedata.is_normalized("NFC", k) and _is_plain(v, depth + 1)
            for k, v in value.items()
        )
    if kind is list:
        return all(_is_plain(v, depth + 1) for v in value)
    return False


def call_signature(tool: str, args_text: str) -> str:
    """The signature of a call: a hash of the tool name and canonical arguments."""
    return short_hash(f"{tool}\x00{args_text}")


def output_text(value: Any) -> str:
    """The model-visible text of a tool's return value: strings as they are, else JSON.

    Only the hash of this text is compared, so plain JSON serialisation suffices; values
    JSON cannot encode fall back to ``canonical_json``.
    """
    if isinstance(value, str):
        return value
    try:
        return _CANONICAL.encode(value)
    except (TypeError, ValueError):
        return canonical_json(value)


def output_hash(text: str) -> str:
    """Hash of a model-visible output."""
    return short_hash(text)


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


TRANSITIONAL: Final = frozenset(
    ["pending", "running", "queued", "creating", "provisioning", "starting", "processing", "building", "deploying", "initializing", "initialising", "in_progress", "inprogress", "waiting", "scheduled", "updating", "deleting", "submitted", "rebooting", "restarting", "migrating", "syncing", "copying", "uploading", "downloading", "exporting", "importing", "validating", "verifying", "preparing"]
)
"""Words of a status that is still on its way: polling it again is waiting, not spinning."""


def is_transitional(words: frozenset[str] | None) -> bool:
    """Whether a short output reads like a status still on its way (RUNNING, in progress)."""
    if not words or len(words) > STATUS_MAX_WORDS:
        return False
    return not TRANSITIONAL.isdisjoint(words) or ("in" in words and "progress" in words)


def _any(*words: str) -> frozenset[str]:
    return frozenset(words)


def _after_word(word: str, rest: str) -> re.Pattern[str]:
    """``\\b{word}{rest}``, spelled to start with the word itself: a pattern that starts with
    a literal is found by a fast scan; one that starts with ``\\b`` is tried at every
    position. The look-behind after the word is the ``\\b`` before it."""
    return re.compile(re.escape(word) + r"(?<!\w" + re.escape(word) + ")" + rest)


_NOTHING = r" (?:find|locate|match)\b"
_NOUNS = (
    r"\s+(?:\w+\s+)?(?:found|results?|match(?:es)?|hits?|records?|items?|entries|data|flights?|"
    r"orders?|pages?|files?|documents?|information|such)\b"
)
_NOUN_WORDS = _any(
    "found", "result", "results", "match", "matches", "hit", "hits", "record", "records",
    "item", "items", "entries", "data", "flight", "flights", "order", "orders", "page", "pages",
    "file", "files", "document", "documents", "information", "such",
)
_FINDS = _any("find", "locate", "match")
_NEGATIVE: Final = (
    ((_any("no"), _NOUN_WORDS), _after_word("no", _NOUNS)),
    ((_any("zero"), _NOUN_WORDS), _after_word("zero", _NOUNS)),
    ((_any("0"), _NOUN_WORDS), _after_word("0", _NOUNS)),
    ((_any("not"), _any("found", "available")), _after_word("not", r" (?:found|available)\b")),
    ((_any("does"), _any("not"), _any("exist")), _after_word("does", r" not exist\b")),
    ((_any("nothing"), _any("found", "matched")), _after_word("nothing", r" (?:found|matched)\b")),
    ((_any("empty"),), _after_word("empty", r"\b")),
    ((_any("could", "couldn", "couldnt", "couldnot"), _FINDS),
     _after_word("could", r" ?n[o']?t" + _NOTHING)),
    ((_any("cannot"), _FINDS), _after_word("cannot", _NOTHING)),
    ((_any("can"), _any("t"), _FINDS), _after_word("can't", _NOTHING)),
    ((_any("unable"), _any("to"), _FINDS), _after_word("unable", " to" + _NOTHING)),
    ((_any("did", "didn", "didnt", "didnot"), _FINDS), _after_word("did", r" ?n[o']?t" + _NOTHING)),
)
""""Nothing found" in its spellings, each a pattern for lower-cased text with the words it
needs as a word sketch splits them ("couldn't" is "couldn", "t"): for each set, one of its
words. A pattern runs only when the output's sketch has what it needs."""


def is_negative(text: str | None, words: frozenset[str] | None = None) -> bool:
    """Whether an output says that nothing was found ("No results", "Could not find X") in
    its first 500 characters. ``words`` (the output's ``word_sketch``, when at hand) rules
    most outputs out at once."""
    if not text:
        return False
    if words is None:
        candidates: Iterable[int] = range(len(_NEGATIVE))
    else:
        leads = words.intersection(_NEGATIVE_LEADS)  # most outputs have none: ruled out
        if not leads:
            return False
        candidates = sorted({i for lead in leads for i in _NEGATIVE_LEADS[lead]})
    head = None
    for i in candidates:
        needs, pattern = _NEGATIVE[i]
        if words is not None and not _has_all(words, needs):
            continue
        if head is None:
            head = text[:500].lower()
        if pattern.search(head) is not None:
            return True
    return False


_NEGATIVE_LEADS: Final = {
    lead: tuple(i for i, (needs, _) in enumerate(_NEGATIVE) if lead in needs[0])
    for needs, _ in _NEGATIVE
    for lead in needs[0]
}
"""For each word a pattern starts with, the patterns that need it (by index in ``_NEGATIVE``):
an output is checked only against the patterns whose first word it has."""


def _has_all(words: frozenset[str], needs: tuple[frozenset[str], ...]) -> bool:
    for need in needs:  # noqa: SIM110 (a loop: all() over a generator costs twice as much here)
        if words.isdisjoint(need):
            return False
    return True


PAGE_PARAMS: Final = "page|p|pg|offset|start|skip|from"
"""Argument names of a page or an offset (in a URL's query or a loosened value): another page
of one question names nothing new, and an answer that names it echoes the call."""


def arg_values(args: Any, depth: int = 0) -> frozenset[str]:
    """The scalar values of ``args`` that can name something: strings of at least three
    characters (loosened: case, punctuation and spacing ignored) and numbers of three digits
    or more (order ids, emails, SKUs, store ids). Small numbers (offsets, limits) are not."""
    found: set[str] = set()
    if isinstance(args, Mapping):
        if depth < 3:
            for value in args.values():
                found |= arg_values(value, depth + 1)
    elif isinstance(args, (list, tuple)):
        if depth < 3:
            for value in args[:20]:
                found |= arg_values(value, depth + 1)
    elif isinstance(args, str):
        text = loose_text(args[:200])
        if len(text) >= MIN_VALUE_CHARS:
            found.add(text)
    elif isinstance(args, (int, float)) and not isinstance(args, bool) and abs(args) >= 100:
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
            if depth < 3:
                stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple)):
            if depth < 3:
                stack.extend((v, depth + 1) for v in value[:20])
        elif isinstance(value, str) and FILE_WORD.fullmatch(value.strip()):
            found.add(loose_text(value[:200]))
    return frozenset(found)


FILE_WORD: Final = re.compile(
    r"[\w.~@:-]*(?:/[\w.~@:-]+)+/?|[\w~-]+(?:\.[A-Za-z][A-Za-z0-9]{0,4})+")
"""A path (``src/app/main.py``, ``/etc/hosts``) or a file name (``notes.md``; a version such
as ``2.4.1`` is not one), no spaces: a word that names a file."""


_REFUSAL = re.compile(
    r"""["']?(?:status|status_code|code)["']?\s*[:=]\s*["']?[45]\d\d\b"""
    r"|\b(?:access denied|forbidden|unauthori[sz]ed|permission denied|not permitted|"
    r"rate limit(?:ed)?|too many requests|bot protection|captcha)\b",
    re.IGNORECASE,
)


_REFUSAL_NEEDS: Final = (
    (_any("status", "code"), frozenset(str(code) for code in range(400, 600))),
    (_any("denied"), _any("access", "permission")),
    (_any("forbidden", "unauthorized", "unauthorised", "captcha"),),
    (_any("permitted"), _any("not")),
    (_any("rate"), _any("limit", "limited")),
    (_any("too"), _any("many"), _any("requests")),
    (_any("bot"), _any("protection")),
)
"""The words ``_REFUSAL`` needs, as in ``_NEGATIVE``: for some entry, one word of each set."""


def is_refusal(text: str | None, words: frozenset[str] | None = None) -> bool:
    """Whether a successful call's output is a refusal in disguise (an HTTP 403 page, "access
    denied", "rate limited"): asking in other ways for what is refused is not exploring.
    ``words`` (the output's ``word_sketch``) rules most outputs out at once."""
    if not text:
        return False
    if words is not None and not any(_has_all(words, needs) for needs in _REFUSAL_NEEDS):
        return False
    return _REFUSAL.search(text, 0, 500) is not None


_RETRY_AFTER = re.compile(
    r"(?:retry[-_ ]?after(?:[-_]?(?P<key>ms|millis(?:econds)?|secs?|seconds?))?|try again in|"
    r"retry in|retrying in|wait(?: for)?)[\"':= ]{0,4}"
    r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)?\b",
    re.IGNORECASE,
)
"""A wait a failure asks for; the unit may be in the key (``"retryAfterSeconds": 60``)."""


def retry_after_s(text: str | None) -> float:
    """The wait a failure asks for before a retry, in seconds ("Retry-After: 30", "try again
    in 2 minutes", ``"retry_after": 60``), or 0 when it asks for none."""
    if not text:
        return 0.0
    match = _RETRY_AFTER.search(text, 0, 2000)
    if match is None:
        return 0.0
    value = float(match.group("n"))
    unit = (match.group("unit") or match.group("key") or "s").lower()
    if unit.startswith("m") and not unit.startswith("ms") and not unit.startswith("mil"):
        return value * 60
    return value / 1000 if unit.startswith(("ms", "mil")) else value


_CONTAINER = re.compile(
    r"\b(?:crashloopbackoff|imagepullbackoff|errimagepull|oomkilled|createcontainerconfigerror"
    r"|invalidimagename)\b"
)
"""A container state waiting will not fix, whatever its restart count or age says."""
_TERMINAL = re.compile(
    r"\b(?:exited with (?:code|status) [1-9]\d*|exit (?:code|status):? [1-9]\d*)\b"
    r"""|\b(?:status|state|phase|conclusion|result)["']?\s*[:=]?\s*["']?(?:[^\w\s]{1,2}\s*)?"""
    r"(?:failed|failure|error|errored|cancell?ed|aborted)\b",
)
_TERMINAL_WORDS: Final = frozenset(
    ["crashloopbackoff", "imagepullbackoff", "errimagepull", "oomkilled", "exited", "exit",
     "createcontainerconfigerror", "invalidimagename", "failed", "failure", "error", "errored",
     "cancelled", "canceled", "aborted"]
)
_FIGURE = re.compile(
    r"\d(?:\.\d+)?\s?%|\b\d[\d,]*\s*(?:/|of)\s*\d[\d,]*\b"
    r"|\b(?:copied|processed|migrated|indexed|synced|uploaded|exported|imported|done|progress)"
    r"\b\W{0,3}\d|\b\d[\d,.]*\s+(?:rows|records|items|files|bytes|objects|documents)\b"
)
"""A progress figure: 37%, 12 of 40, 3/8, "rows copied: 48,112", "48,112 rows"."""


def progress_figures(text: str) -> str:
    """The progress figures of a poll's answer (``_FIGURE``: 37%, 12 of 40, "48,112 rows")
    as one hash: a status whose other numbers move (a lag, a log position, an elapsed time)
    has not progressed while these stand still."""
    return short_hash("\x00".join(_FIGURE.findall(text[:2000].lower())))


def error_shape(text: str, args: Any) -> str:
    """A failure's shape: its text masked (``masked``), its echoes of the call's own
    arguments masked (``unechoed``: "no such file: a/b.py" reads the same for every path),
    and its progress figures kept (``progress_figures``). Two failures that differ in a line
    number, a request id or a duration read the same; "1 of 3 replicas available" and "2 of
    3" do not: a rollout that answers "not done yet" as an error has moved on."""
    return output_hash(f"{masked(unechoed(text, args))}\x00{progress_figures(text)}")


def stuck_state(text: str, words: frozenset[str] | None = None) -> str:
    """What a poll's answer says that waiting will not change: ``"container"`` for a
    container state (CrashLoopBackOff, ImagePullBackOff: its restart count may move, the state
    does not), ``"terminal"`` for a status that will not move on by itself (Failed, "exited
    with code 1"), ``"stalled"`` for a progress figure (37%, 48,112 rows, 12 of 40) beside a status
    still on its way (running, copying: the figure must move), else ``""``."""
    if words is not None and words.isdisjoint(_TERMINAL_WORDS) and words.isdisjoint(
        TRANSITIONAL
    ):
        return ""
    head = text[:2000].lower()
    if _CONTAINER.search(head) is not None:
        return "container"
    if _TERMINAL.search(head) is not None:
        return "terminal"
    if (words is None or not words.isdisjoint(TRANSITIONAL)) and _FIGURE.search(head):
        return "stalled"
    return ""


_SCENERY = re.compile(
    r"\d{4}-\d\d-\d\d(?:[tT ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:[zZ]|[+-]\d\d:?\d\d)?)?"
    r"|\b\d\d?:\d\d(?::\d\d(?:[.,]\d+)?)?\b"
    r"|\b[0-9a-fA-F]*\d[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\b"
    r"|\b(?:\d+(?:ms|s|m|h|d)){1,4}\b|\b\d+\s*\w+ ago\b"
)
"""What moves in an answer without saying anything: times, ids, compact ages (``14m``)."""
_QUANTITY = re.compile(r"\d+(?:[.,]\d+)*")


def quantities(text: str) -> tuple[float, ...]:
    """The numbers of a poll's answer that ``figures`` reads, as numbers (``12,417,902`` is
    one), at most ``MAX_QUANTITIES``: whether they went up or down tells a count moving
    toward its end."""
    found = []
    for raw in _QUANTITY.findall(_SCENERY.sub(" ", text[:SKETCH_CHARS]))[:MAX_QUANTITIES]:
        try:
            found.append(float(raw.replace(",", "")))
        except ValueError:  # ("1.2.3": a version, not a quantity)
            return ()
    return tuple(found)


def figures(text: str) -> int:
    """The numbers of a poll's answer that can tell its progress (``14 minutes remaining``,
    ``0.3 GB of 5.8 GB``, ``37%``), times, ids and ages left out, as one value: two answers
    with different figures say the operation moved, however their facts compare."""
    return hash(tuple(_QUANTITY.findall(_SCENERY.sub(" ", text[:SKETCH_CHARS]))))
