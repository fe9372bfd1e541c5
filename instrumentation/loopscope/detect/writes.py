"""What a call's arguments and answer say about a write: the text an edit replaces, the
arguments that change state, the target written, the caller's idempotency key, an answer
that leaves the outcome unknown.

The write ledger (``write_ledger``) keeps the episode's writes by these; the duplicate-write
and edit-revert detectors, the progress judge and the monitor read them too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from .limits import ARG_CHARS, COMMAND_CHARS, STATUS_CHARS
from .texts import FILE_WORD

EDIT_PAIRS = (
    ("old_str", "new_str"),
    ("old_string", "new_string"),
    ("old", "new"),
    ("oldText", "newText"),
    ("old_text", "new_text"),
    ("search", "replace"),
    ("find", "replace"),
    ("original", "replacement"),
    ("before", "after"),
)
"""Argument pairs that make a call an edit of text (and its inverse a revert)."""
EDIT_TARGETS = ("path", "file", "file_path", "filename", "filepath", "target", "uri")


_EDIT_OLD = frozenset(old for old, _ in EDIT_PAIRS)


def _is_mapping(args: Any) -> bool:
    return type(args) is dict or isinstance(args, Mapping)  # (the ABC check is slow)


def edit_of(args: Any) -> tuple[str, str, str] | None:
    """(target, old, new) when ``args`` describe replacing text in a target, else ``None``."""
    if not _is_mapping(args) or _EDIT_OLD.isdisjoint(args):
        return None
    for old_key, new_key in EDIT_PAIRS:
        old, new = args.get(old_key), args.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            target = next((str(args[k]) for k in EDIT_TARGETS if k in args), "")
            return target, old, new
    return None


MUTATING_ARGS = frozenset(
    ("patch", "diff", "new_str", "new_string", "newText", "new_text", "file_text", "content",
     "replacement")
)
"""Arguments that carry new text for something: a call with one changes state, whatever its
tool declares."""


def changes_state(args: Any) -> bool:
    """Whether a call with ``args`` edits, patches or writes text (an undeclared write)."""
    return _is_mapping(args) and not MUTATING_ARGS.isdisjoint(args)


TARGET_ARGS: Final = (
    "url", "uri", "endpoint", "href", "route", "channel", "channel_id", "conversation",
    "conversation_id", "thread", "thread_id", "thread_ts", "chat_id", "to", "recipient",
    "email", "path", "file", "file_path", "filename", "table", "queue", "topic", "repo",
)
"""Arguments that name what a write acts on: a retry is of the same write when it has the
same tool and target, whatever else it rewords (another text to the same channel)."""
_TARGET_NAMES: Final = frozenset(TARGET_ARGS)
_URL = re.compile(r"https?://[^\s\"'`?#]+")
_UNKNOWN_OUTCOME = re.compile(
    r"\btim(?:ed|e)[ _-]?out\b|\btimeout\b|\bconnection (?:reset|aborted|closed|lost)\b"
    r"|\breset by peer\b|econnreset|\bsocket hang up\b|\bempty reply\b|\bbroken pipe\b"
    r"|\bremote end closed\b|\bhttp/\d(?:\.\d)? 5\d\d\b|\bhttp 5\d\d\b"
    r"|\b(?:status|code)\W{0,3}5\d\d\b|\b5\d\d (?:internal|bad|service|gateway|server)\b"
    r"|\bjsondecodeerror\b|\bexpecting value: line \d|\bunexpected end of json\b"
    r"|\bunexpected token .{1,3} in json\b|\blooking for beginning of value\b",
    re.IGNORECASE,
)
_CLEAR_ANSWER = re.compile(
    r"\b(?:http/\d(?:\.\d)? |http |error |status\W{0,3}|code\W{0,3})4\d\d\b|\b4\d\d (?:bad|"
    r"unauthori[sz]ed|forbidden|not found|conflict|unprocessable|payment|too many)\b|^fatal:"
    r"|\b(?:declined|rejected|invalid|validation failed|already exists|refused)\b",
    re.IGNORECASE | re.MULTILINE,
)
"""A clear answer that the write did not happen (a 4xx, "declined", git's ``fatal:``): the
outcome is known, whatever else the text says ("declined by the payment gateway")."""
"""A failure after which a write may or may not have happened: a timeout, a dropped
connection, a 5xx, an answer that could not be decoded (the request reached the other side;
what it did is unreadable): UNKNOWN, not failed. A 4xx or a refused connection is a clear
answer that it did not."""


def unknown_outcome(text: str | None) -> bool:
    """Whether a failed write's output leaves its outcome unknown (``_UNKNOWN_OUTCOME``) and
    gives no clear answer that it did not happen (``_CLEAR_ANSWER``)."""
    return (
        text is not None
        and _UNKNOWN_OUTCOME.search(text, 0, STATUS_CHARS) is not None
        and _CLEAR_ANSWER.search(text, 0, STATUS_CHARS) is None
    )


def write_target(args: Any, args_text: str, *, paths: bool = False) -> str:
    """What a write acts on (``TARGET_ARGS``, else the first URL in its arguments, query
    left out, else a command line's program and subcommand and, with ``paths``, the last file
    it names: ``git push``, ``sed -i src/a.py``), or ``""``."""
    if _is_mapping(args) and not _TARGET_NAMES.isdisjoint(args):
        for name in TARGET_ARGS:
            value = args.get(name)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
                text = str(value)
                url = _URL.match(text)
                return url.group(0) if url else text[:ARG_CHARS]
    url = _URL.search(args_text)
    if url:
        return url.group(0)
    if _is_mapping(args):
        line = args.get("command") or args.get("cmd")
        if isinstance(line, str):
            words = _COMMAND_HEAD.sub("", line[:COMMAND_CHARS]).split()
            files = [w for w in words[2:] if paths and FILE_WORD.fullmatch(w.strip("'\""))]
            return " ".join(words[:2] + files[-1:])
    return ""


_COMMAND_HEAD = re.compile(r"^\s*(?:cd\s+\S+\s*(?:&&|;)\s*)*(?:sudo\s+)?")
"""What comes before a command line's program (``cd /repo && sudo``)."""




def caller_key(args: Any, names: tuple[str, ...], depth: int = 0) -> str | None:
    """The idempotency key the caller passed in the arguments, if any: at the top, or one
    level down (an HTTP call's ``headers``)."""
    if not _is_mapping(args):
        return None
    for name in names:
        value = args.get(name)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    if depth == 0:
        for value in args.values():
            if _is_mapping(value) and (key := caller_key(value, names, 1)) is not None:
                return key
    return None





DECLARED: Final = ("declared", "annotation")
"""Kind sources that say a call is a write; one guessed from its name, method or answer may
be a hand-off or a poll (``_redone``)."""
