"""The write ledger's UNKNOWN set follows every way a write can settle."""

from __future__ import annotations

from loopscope.detect import EpisodeMonitor, ToolCall, ToolResult


def _write(m: EpisodeMonitor, call_id: str, status: str) -> None:
    m.before_call(ToolCall("create_order", {"item": "mug"}, call_id=call_id, kind="write"))
    m.after_call(ToolResult("order ?", status=status, call_id=call_id))  # type: ignore[arg-type]


def test_unknown_writes_are_tracked_until_settled() -> None:
    """A timeout opens an UNKNOWN write; a retry that fails or succeeds, or a reconcile,
    closes it; the summary counts only the open ones."""
    m = EpisodeMonitor()
    _write(m, "c1", "timeout")
    assert [r.call_id for r in m.writes.unresolved()] == ["c1"]
    assert m.summary()["unknown_writes"] == 1
    _write(m, "c2", "error")  # the retry ran (observe mode) and failed: not UNKNOWN any more
    assert m.writes.unresolved() == []
    _write(m, "c3", "timeout")
    assert m.reconcile("c3", found=False)
    assert m.writes.unresolved() == []
    _write(m, "c4", "timeout")
    _write(m, "c5", "ok")
    assert m.writes.unresolved() == [] and m.summary()["unknown_writes"] == 0
