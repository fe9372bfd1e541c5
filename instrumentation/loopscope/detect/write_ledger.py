"""The write ledger: identity by step or by the caller's key, UNKNOWN on timeout, reconcile
by look-up.

A write's identity is the logical step of the run (``run_id:tool#n``) or the idempotency key
the caller passes in the arguments (``idempotency_key``, ``request_id``, ``client_token``,
… — ``Policy.idempotency_args``), never its argument hash: "buy another one" has the same
arguments and is a new step. The ledger keeps one key open per tool until
that step succeeds; a retry reuses it, so a retry after an UNKNOWN result is recognised.

``WriteLedger`` is bookkeeping the monitor keeps beside the history; ``WriteDuplicate``
(``write_duplicate``) is the detector that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .events import StepView
from .limits import FOUND_VALUES, NAMING_CHARS, SHOWN_CHARS
from .policy import Policy
from .texts import arg_values, loose_text
from .writes import caller_key, unknown_outcome, write_target

WriteState = Literal["pending", "ok", "error", "unknown", "absent"]


def _entities(step: StepView) -> frozenset[str]:
    """What a write names, for a look-up to be recognised by: its argument values, and its
    target (the URL a shell ``curl`` posts to: a ``curl`` of that URL looks it up)."""
    target = write_target(step.args, step.args_text)
    values = arg_values(step.args)
    return values | {loose_text(target)} if target.startswith("http") else values


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
        shown, asked = loose_text(step.output[:SHOWN_CHARS]), loose_text(step.args_text)
        named = [v for v in record.entities if len(v) >= NAMING_CHARS and v not in asked]
        found = sum(1 for v in named if v in shown)
        if found:  # (beside a value that names the record, its amount shown as a number)
            words = set(shown.split()) - set(asked.split())
            found += sum(1 for v in record.entities
                         if len(v) < NAMING_CHARS and v.isdigit() and v in words)
        return found >= FOUND_VALUES or None
