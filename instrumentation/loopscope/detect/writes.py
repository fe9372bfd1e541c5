"""Writes: identity by step or by the caller's key, UNKNOWN on timeout, reconcile by look-up.

A write's identity is the logical step of the run (``run_id:tool#n``) or the idempotency key
the caller passes in the arguments (``idempotency_key``, ``request_id``, ``client_token``,
… — ``Policy.idempotency_args``), never its argument hash: "buy another one" has the same
arguments and is a new step. The ledger keeps one key open per tool until
that step succeeds; a retry reuses it, so a retry after an UNKNOWN result is recognised.

``WriteLedger`` is bookkeeping the monitor keeps beside the history; ``WriteDuplicate`` is the
detector that reads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .base import BEFORE_RUNGS, Finding, args_preview
from .events import StepView
from .fingerprint import output_hash
from .history import History
from .limits import FOUND_VALUES, NAMING_CHARS
from .output_stagnation import phrase, values_of
from .policy import Policy
from .texts import FILE_WORD, arg_values, loose_text

WriteState = Literal["pending", "ok", "error", "unknown", "absent"]

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
        and _UNKNOWN_OUTCOME.search(text, 0, 2000) is not None
        and _CLEAR_ANSWER.search(text, 0, 2000) is None
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
                return url.group(0) if url else text[:200]
    url = _URL.search(args_text)
    if url:
        return url.group(0)
    if _is_mapping(args):
        line = args.get("command") or args.get("cmd")
        if isinstance(line, str):
            words = _COMMAND_HEAD.sub("", line[:300]).split()
            files = [w for w in words[2:] if paths and FILE_WORD.fullmatch(w.strip("'\""))]
            return " ".join(words[:2] + files[-1:])
    return ""


_COMMAND_HEAD = re.compile(r"^\s*(?:cd\s+\S+\s*(?:&&|;)\s*)*(?:sudo\s+)?")
"""What comes before a command line's program (``cd /repo && sudo``)."""


def _entities(step: StepView) -> frozenset[str]:
    """What a write names, for a look-up to be recognised by: its argument values, and its
    target (the URL a shell ``curl`` posts to: a ``curl`` of that URL looks it up)."""
    target = write_target(step.args, step.args_text)
    values = arg_values(step.args)
    return values | {loose_text(target)} if target.startswith("http") else values


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


@dataclass(slots=True)
class WriteRecord:
    """One logical write step and where it stands."""

    key: str
    tool: str
    slot: str = ""
    """The tool and its target (``key_for``): steps are numbered per slot."""
    state: WriteState = "pending"
    step: int = -1
    t: float = 0.0
    call_id: str | None = None
    output_hash: str = ""
    signature: str = ""
    caller_key: bool = False
    """The key came from the caller: the provider deduplicates retries under it."""
    entities: frozenset[str] = field(default_factory=frozenset)
    """What the write names (``_entities``), set when its outcome is UNKNOWN: a look-up that
    names one of them settles it."""
    found: bool = False
    """A reconcile found that this write happened after all."""
    timed_out: bool = False
    """Its UNKNOWN outcome is the call's status (a timeout), not read from its answer's text."""


class WriteLedger:
    """Per-episode write bookkeeping: keys, states, UNKNOWN writes and their reconciles."""

    def __init__(self, policy: Policy, run_id: str) -> None:
        self.run_id = run_id
        self._policy = policy
        self._next_step: dict[str, int] = {}
        self._records: dict[str, WriteRecord] = {}
        self._by_call: dict[str, str] = {}
        self._done: dict[str, list[int]] = {}  # signature -> steps that succeeded, this turn
        self._since: dict[str, int] = {}  # signature -> History.changes after its last success
        self._unknown: dict[str, WriteRecord] = {}  # UNKNOWN writes, so a check is O(open)
        self._found: dict[str, WriteRecord] = {}  # signature -> a write a reconcile found

    def key_for(
        self, tool: str, explicit: str | None = None, args: Any = None, args_text: str = ""
    ) -> str:
        """The idempotency key of the next call of ``tool`` on its target: the caller's
        (``explicit``, or in the arguments), else ``run_id:tool#n`` (``run_id:tool@target#n``
        when the write names a target: ``write_target``)."""
        explicit = explicit or caller_key(args, self._policy.idempotency_args)
        if explicit:
            return explicit
        target = write_target(args, args_text)
        slot = f"{tool}@{target}" if target else tool
        return f"{self.run_id}:{slot}#{self._next_step.get(slot, 1)}"

    def is_callers(self, key: str) -> bool:
        """Whether ``key`` is not one the ledger derived."""
        return not key.startswith(f"{self.run_id}:")

    def record(self, key: str) -> WriteRecord | None:
        """The record of ``key``, if that write has been attempted."""
        return self._records.get(key)

    def found(self, signature: str) -> WriteRecord | None:
        """The write with this signature that a reconcile found had happened, if any."""
        return self._found.get(signature)

    def done(self, signature: str) -> list[int]:
        """Steps at which a write with this signature succeeded in the current turn."""
        return self._done.get(signature, [])

    def changed(self, signature: str, changes: int) -> None:
        """A write with ``signature`` succeeded; ``changes`` is ``History.changes`` after it."""
        self._since[signature] = changes

    def unchanged_since(self, signature: str, changes: int) -> bool:
        """Whether nothing new was changed since the last success of ``signature``: doing it
        again would act on the same state (a duplicate), where after other changes (``git
        add`` after an edit) it may be new work."""
        return self._since.get(signature) == changes

    def unresolved(self) -> list[WriteRecord]:
        """Writes whose result is still UNKNOWN."""
        return list(self._unknown.values())

    def new_turn(self) -> None:
        """A user turn starts a new intent: earlier identical writes were of another one."""
        self._done.clear()
        self._since.clear()
        self._found.clear()

    def after(self, step: StepView, key: str) -> str | None:
        """Record a write's result; returns its write status (ok, error, unknown) or ``None``."""
        if step.status == "blocked":
            return None
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = WriteRecord(
                key=key, tool=step.tool, slot=key.rpartition("#")[0].removeprefix(f"{self.run_id}:"),
                caller_key=self.is_callers(key),
            )
        record.step, record.t, record.call_id = step.index, step.t, step.call_id
        record.output_hash, record.signature = step.output_hash, step.signature
        if step.call_id:
            self._by_call[step.call_id] = key
        if step.status == "ok":
            self._resolve(record)
            return "ok"
        self._unknown.pop(record.key, None)  # a new attempt settles the last one's state
        if step.status == "timeout" or unknown_outcome(step.output):
            record.state = "unknown"
            record.timed_out = step.status == "timeout"
            record.entities = _entities(step)  # (read only while it is UNKNOWN: a look-up's)
            self._unknown[record.key] = record
            return "unknown"
        record.state = "error"  # exceptions are not cached: the same key may be retried
        return "error"

    def _resolve(self, record: WriteRecord) -> None:
        self._unknown.pop(record.key, None)
        record.state = "ok"
        self._done.setdefault(record.signature, []).append(record.step)
        if not record.caller_key:
            self._next_step[record.slot] = self._next_step.get(record.slot, 1) + 1

    def reconcile(self, ref: str, found: bool | None) -> WriteRecord | None:
        """Resolve an UNKNOWN write, named by idempotency key or call id.

        ``found=True``: it happened (its result now counts as the write's). ``False``: it did
        not; a retry under the same key is fine. ``None``: looked up, outcome not reported;
        the retry is allowed. Returns the record, or ``None`` if ``ref`` names no UNKNOWN write.
        """
        record = self._records.get(ref) or self._records.get(self._by_call.get(ref, ""))
        if record is None or record.state != "unknown":
            return None
        if found:
            self._resolve(record)
            record.found = True
            self._found[record.signature] = record
        else:
            self._unknown.pop(record.key, None)
            record.state = "absent"
        return record

    def looked_up(self, step: StepView) -> list[WriteRecord]:
        """UNKNOWN writes that ``step`` (a successful read) looked up: its arguments name the
        write's idempotency key or one of the write's own argument values (the order id, the
        customer's email, the same entity), and it is not the write itself (a shell or HTTP
        agent looks up through the tool it writes with)."""
        if not self._unknown or step.status != "ok":
            return []
        mine = arg_values(step.args)
        text = step.args_text
        asked = loose_text(text)
        return [
            record
            for record in self._unknown.values()
            if record.signature != step.signature
            and (
                record.key in text
                or not mine.isdisjoint(record.entities)
                or any(len(v) >= NAMING_CHARS and v in asked for v in record.entities)
            )
        ]

    def found_in(self, record: WriteRecord, step: StepView) -> bool | None:
        """What a look-up's answer says of an UNKNOWN write: ``False`` when it found nothing,
        ``True`` when it shows ``FOUND_VALUES`` of the write's own values that the look-up did
        not ask for (the reference, the amount: the record exists, even "processing"), else
        ``None`` (looked up, outcome not told). A value names the record from ``NAMING_CHARS``
        characters; a shorter number (an amount of 24000 cents) counts beside one that does,
        as a word of the answer (not inside another number)."""
        if step.negative or not step.words:
            return False
        if step.output is None:
            return None
        shown, asked = loose_text(step.output[:4000]), loose_text(step.args_text)
        named = [v for v in record.entities if len(v) >= NAMING_CHARS and v not in asked]
        found = sum(1 for v in named if v in shown)
        if found:  # (beside a value that names the record, its amount shown as a number)
            words = set(shown.split()) - set(asked.split())
            found += sum(1 for v in record.entities
                         if len(v) < NAMING_CHARS and v.isdigit() and v in words)
        return found >= FOUND_VALUES or None


class WriteDuplicate:
    """A write that would repeat one already done, or retry one whose result is UNKNOWN.

    - A retry of an UNKNOWN write (it timed out) under a key the ledger derived is blocked at
      once until the record is looked up; under the caller's own key it is safe (the
      provider deduplicates) and passes.
    - Identical arguments in a new step of the same turn, with nothing new changed since the
      last success (``WriteLedger.unchanged_since``; for a write known only by its outcome,
      a click that answered "Post successful", no call since that was not made before, and
      its first redo is judged once it has answered: ``after``), are a sign of a duplicate
      side effect, unless declared (``intent="duplicate"``), asked for by the task or the latest
      user turn ("create three identical tickets", "send it again"), or an edit (edits
      and their reverts are ``EditRevert``'s). The second is a warning; a third means the
      warning was ignored and climbs, even when each write created a new record (that is
      the duplicate side effect itself); a new user turn starts again. A write whose last
      answer was empty showed no effect to repeat (``git add -A`` again): the repeat and
      cycle rules judge it.
    """

    name = "write_duplicate"
    kinds = ("write_duplicate",)
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._redone: set[str] = set()
        """Writes known only by their outcome whose redo was judged a duplicate (``after``)."""

    def before(self, history: History, candidate: StepView) -> Finding | None:
        key = candidate.idempotency_key
        if candidate.kind != "write" or key is None:
            return None
        ledger = history.writes
        record = ledger.record(key)
        if record is not None and record.state == "unknown" and not record.caller_key:
            return Finding(
                kind="write_duplicate",
                message=(
                    f"{candidate.tool} failed at step {record.step} without a clear answer (a "
                    "timeout, a dropped connection, a 5xx); its result is UNKNOWN, not failed: "
                    f"it may have happened. Look the record up first (reconcile key {key}) and "
                    "retry only if it did not happen."
                ),
                key=key,
                details={"tool": candidate.tool, "idempotency_key": key, "state": "unknown"},
                rungs=("block", "block", "stop"),
                evidence=("outcome:timeout" if record.timed_out else "outcome:parsed",),
            )
        if record is not None and record.caller_key:
            return None  # a retry under the caller's key: the provider answers it once
        happened = ledger.found(candidate.signature)
        if happened is not None and candidate.intent != "duplicate":
            return Finding(
                kind="write_duplicate",
                message=(
                    f"{candidate.tool} {args_preview(candidate)} had an unknown outcome at step "
                    f"{happened.step}, and looking it up found that it happened. Do not run "
                    "it again: use the record that exists."
                ),
                key=happened.key,
                details={"tool": candidate.tool, "idempotency_key": happened.key,
                         "state": "found"},
                rungs=("block", "block", "stop"),
            )
        done = _redone(history, candidate)
        if not done:
            return None
        if candidate.kind_source == "outcome" and candidate.signature not in self._redone:
            return None  # (its first redo is judged by its answer: ``after``)
        if candidate.output_hash == _SILENT:
            return None  # (it answered nothing: no side effect shown to repeat)
        stats = history.stats(candidate.signature)
        return _duplicate(candidate, done, stats is not None and stats.answers_vary)

    def after(self, history: History, step: StepView) -> Finding | None:
        """A write known only by its outcome, redone with nothing new leading to it, whose
        answer says what the last one said, figures aside ("Post successful", the post count
        one higher): the redo was a duplicate. A "Next" clicked through a wizard, whose
        answers are new pages, was not."""
        if step.status != "ok" or step.kind != "write":
            return None
        if step.kind_source != "outcome":
            return _remade(history, step)
        stats = history.stats(step.signature)
        done = _redone(history, step)
        if not done or stats is None or not step.shape or step.shape != stats.last_shape:
            return None
        self._redone.add(step.signature)
        return _duplicate(step, done, stats.answers_vary)

    def new_turn(self) -> None:
        """A new user turn: earlier redos were of another intent."""
        self._redone.clear()


def _remade(history: History, step: StepView) -> Finding | None:
    """A write right after another of the same tool in the same user turn, with other
    arguments (a description reworded), whose answer shows the record it made as the last
    one did — the same once ids and figures are masked, naming a phrase both calls gave (the
    title, not the repository or the channel both write to) — but for its new id: the same
    record made again, in other words."""
    if step.intent == "duplicate" or step.edit is not None or not step.shape:
        return None
    last = history.steps[-1] if history.steps else None
    if (
        last is None
        or last.tool != step.tool
        or last.kind != "write"
        or last.status != "ok"
        or last.signature == step.signature  # (the same arguments: ``before``'s rule)
        or not history.in_turn(last)
        or last.shape != step.shape
        or last.info == step.info  # (no new record: the answer said again, or recased)
        or step.output is None
    ):
        return None
    shown = loose_text(step.output[:4000])
    named = [v for v in values_of(step) & values_of(last)
             if len(v) >= NAMING_CHARS and phrase(v) and v in shown]
    if not named:
        return None
    return Finding(
        kind="write_duplicate",
        message=(
            f"{step.tool} {args_preview(step)} made the same record as the call before it "
            f"(step {last.index}), in other words: its answer is the same but for a new id. "
            "That is a duplicate side effect; use the record that exists, and if another one "
            "is really wanted, say so (declare the call intended)."
        ),
        key=f"remade:{step.tool}",
        details={"tool": step.tool, "done_at_step": last.index},
        rungs=("warn", "stop"),
        sticky=True,
        evidence=("calls:different", "effect:shown"),
    )


def _redone(history: History, step: StepView) -> list[int]:
    """The steps at which ``step``'s write already succeeded in this turn, when doing it
    again repeats them: with nothing new changed since (``WriteLedger.unchanged_since``), not
    declared intended, not an edit, and, for a write known only by its outcome (a click on
    "Post"), no call since that was not made before (new text typed into the form makes it
    a new write), and, for a write whose kind was guessed, no other call since that made
    progress (what was learned since may call for it again: a hand-off for the next
    company); else an empty list."""
    ledger = history.writes
    done: list[int] = ledger.done(step.signature)
    if (
        not done
        or step.intent == "duplicate"
        or step.edit is not None
        or not ledger.unchanged_since(step.signature, history.changes)
        or (step.kind_source == "outcome" and history.fresh_at > done[-1])
        or (step.kind_source not in DECLARED and history.stretch_start > done[-1] + 1)
    ):
        return []
    return done


def _duplicate(step: StepView, done: list[int], answers_vary: bool) -> Finding:
    return Finding(
        kind="write_duplicate",
        message=(
            f"{step.tool} {args_preview(step)} was already done at step "
            f"{done[-1]}. Running it again would repeat the side effect. If the user really "
            "wants it again, the call must be declared intended."
        ),
        key=f"dup:{step.signature}",
        details={"tool": step.tool, "idempotency_key": step.idempotency_key,
                 "done_at_step": done[-1]},
        sticky=True,
        evidence=("effect:assumed" if step.output_hash == _SILENT
                  else "effect:varies" if answers_vary else "effect:shown",),
    )


_SILENT: Final = output_hash("")
"""The hash of an empty answer: a write that said nothing showed no effect to repeat."""


DECLARED: Final = ("declared", "annotation")
"""Kind sources that say a call is a write; one guessed from its name, method or answer may
be a hand-off or a poll (``_redone``)."""
