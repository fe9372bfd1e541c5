"""Writes: idempotency keys from run_id:step_id, UNKNOWN on timeout, reconcile before retry.

A write's identity is the logical step of the run, never its argument hash: "buy another one"
has the same arguments and is a new step (seed 002 §4.2). The ledger keeps one key open per
tool until that step resolves; a retry reuses the key, so a retry after an UNKNOWN result is
recognised, and a second identical write after a success is flagged unless declared
(``intent="duplicate"``) or preceded by a reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import Finding, args_preview
from .events import StepView
from .policy import Policy

WriteState = Literal["pending", "ok", "error", "unknown", "absent"]


@dataclass(slots=True)
class WriteRecord:
    """One logical write step and where it stands."""

    key: str
    tool: str
    state: WriteState = "pending"
    step: int = -1
    t: float = 0.0
    call_id: str | None = None
    output_hash: str = ""
    signature: str = ""


class WriteLedger:
    """Per-episode write bookkeeping; the ``write_duplicate`` detector."""

    name = "write_duplicate"

    def __init__(self, policy: Policy, run_id: str) -> None:
        self.run_id = run_id
        self._policy = policy
        self._next_step: dict[str, int] = {}
        self._records: dict[str, WriteRecord] = {}
        self._by_call: dict[str, str] = {}
        self._done_signatures: dict[str, int] = {}
        self._unknown: dict[str, WriteRecord] = {}  # UNKNOWN writes, so a check is O(open)

    def key_for(self, tool: str, explicit: str | None = None) -> str:
        """The idempotency key of the next call of ``tool``: ``run_id:tool#n``, or ``explicit``."""
        return explicit or f"{self.run_id}:{tool}#{self._next_step.get(tool, 1)}"

    def record(self, key: str) -> WriteRecord | None:
        """The record of ``key``, if that write has been attempted."""
        return self._records.get(key)

    def unresolved(self) -> list[WriteRecord]:
        """Writes whose result is still UNKNOWN."""
        return list(self._unknown.values())

    def before(self, candidate: StepView, key: str, intent: str | None) -> Finding | None:
        """Check a write before it runs."""
        record = self._records.get(key)
        if record is not None and record.state == "unknown":
            return Finding(
                kind="write_duplicate",
                action="block",
                message=(
                    f"{candidate.tool} timed out at step {record.step}; its result is UNKNOWN, "
                    f"not failed: it may have happened. Look the record up first (reconcile key "
                    f"{key}) and retry only if it did not happen."
                ),
                key=key,
                details={"tool": candidate.tool, "idempotency_key": key, "state": "unknown"},
            )
        if record is not None and record.state == "ok":
            return self._duplicate(candidate, key, record.step)
        done_at = self._done_signatures.get(candidate.signature)
        if done_at is not None and intent != "duplicate":
            return self._duplicate(candidate, key, done_at)
        return None

    def _duplicate(self, candidate: StepView, key: str, done_at: int) -> Finding:
        return Finding(
            kind="write_duplicate",
            action="block",
            message=(
                f"{candidate.tool} {args_preview(candidate)} already succeeded at step "
                f"{done_at}. Running it again would repeat the side effect. If the user really "
                "wants it twice, the call must be declared intended."
            ),
            key=f"dup:{candidate.signature}",
            details={"tool": candidate.tool, "idempotency_key": key, "done_at_step": done_at},
        )

    def after(self, step: StepView, key: str) -> str | None:
        """Record a write's result; returns its write status (ok, error, unknown) or ``None``."""
        if step.status == "blocked":
            return None
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = WriteRecord(key=key, tool=step.tool)
        record.step, record.t, record.call_id = step.index, step.t, step.call_id
        record.output_hash, record.signature = step.output_hash, step.signature
        if step.call_id:
            self._by_call[step.call_id] = key
        if step.status == "ok":
            self._resolve(record, step.signature)
            return "ok"
        self._unknown.pop(record.key, None)  # a new attempt settles the last one's state
        if step.status == "timeout":
            record.state = "unknown"
            self._unknown[record.key] = record
            return "unknown"
        record.state = "error"  # exceptions are not cached: the same key may be retried
        return "error"

    def _resolve(self, record: WriteRecord, signature: str) -> None:
        self._unknown.pop(record.key, None)
        record.state = "ok"
        self._done_signatures[signature] = record.step
        self._next_step[record.tool] = self._next_step.get(record.tool, 1) + 1

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
            self._resolve(record, record.signature)
        else:
            self._unknown.pop(record.key, None)
            record.state = "absent"
        return record
