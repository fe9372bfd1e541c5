"""What an answer says, beyond its words: a status on its way, nothing found, a refusal, a
wait asked for, progress figures, a state that waiting will not change.

Each question is asked of a bounded head of the text, and most are first ruled out by the
answer's word sketch (``texts.word_sketch``), whose words a pattern needs: the patterns run
on the few outputs that may match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from .fingerprint import output_hash, short_hash
from .limits import ANSWER_HEAD_CHARS, MAX_QUANTITIES, SKETCH_CHARS, STATUS_CHARS, STATUS_MAX_WORDS
from .texts import masked, unechoed

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
            head = text[:ANSWER_HEAD_CHARS].lower()
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
    return _REFUSAL.search(text, 0, ANSWER_HEAD_CHARS) is not None


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
    match = _RETRY_AFTER.search(text, 0, STATUS_CHARS)
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
    return short_hash("\x00".join(_FIGURE.findall(text[:STATUS_CHARS].lower())))


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
    head = text[:STATUS_CHARS].lower()
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
