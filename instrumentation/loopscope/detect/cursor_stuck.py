"""Pagination whose cursor does not advance: the same page again, or ``next`` = the cursor sent."""

from __future__ import annotations

import json
from typing import Any, Final

from .base import AFTER_RUNGS, Finding
from .events import StepView
from .fingerprint import canonical_json
from .history import History
from .limits import CURSOR_JSON_CHARS
from .policy import Policy

CURSOR_KEYS: Final = (
    "cursor",
    "page_token",
    "pageToken",
    "next_token",
    "page",
    "after",
    "continuation_token",
)
"""Pagination argument names, in the order they are looked for (the first present wins)."""
NEXT_KEYS: Final = ("next_cursor", "next_page_token", "nextPageToken", "next_token", "next")


def cursor_of(args: Any) -> tuple[str, Any] | None:
    """The (key, value) of the pagination argument of a call, if it has one."""
    if not isinstance(args, dict):
        return None
    for key in CURSOR_KEYS:
        if key in args:
            return key, args[key]
    return None


def next_cursor_of(output: str | None) -> Any:
    """The next-page cursor a JSON object output announces, or ``None``."""
    if not output or output[:1] != "{" or len(output) > CURSOR_JSON_CHARS:
        return None
    try:
        data = json.loads(output)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for key in NEXT_KEYS:
        if key in data:
            return data[key]
    return None


class CursorStuck:
    """Tracks each pagination series (tool + the arguments other than the cursor).

    A page does not advance when its output equals the previous page's, or when the output
    names the cursor that was sent as the next one. The ``cursor_threshold``-th such page
    fires. A page that moves on is marked ``cursor_advance`` in ``step.markers`` (progress).
    """

    name = "cursor_stuck"
    kinds = ("cursor_stuck",)
    rungs = AFTER_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.threshold = policy.cursor_threshold
        self._series: dict[str, tuple[str, int]] = {}  # series -> (last output, stuck count)

    def _series_key(self, step: StepView) -> tuple[str, Any] | None:
        found = cursor_of(step.args)
        if found is None:
            return None
        key, value = found
        rest = {k: v for k, v in step.args.items() if k != key}
        return f"{step.tool}\x00{canonical_json(rest)}", value

    def after(self, history: History, step: StepView) -> Finding | None:
        found = self._series_key(step)
        if found is None or step.status != "ok":
            return None
        series, sent = found
        last_output, stuck = self._series.get(series, ("", 0))
        announced = next_cursor_of(step.output)
        not_advancing = step.output_hash == last_output or (
            announced is not None and announced == sent
        )
        stuck = stuck + 1 if not_advancing else 0
        if not not_advancing:
            step.markers = {*(step.markers or ()), "cursor_advance"}
        self._series[series] = (step.output_hash, stuck)
        if stuck < self.threshold:
            return None
        return Finding(
            kind="cursor_stuck",
            message=(
                f"{step.tool} returned the same page for cursor {sent!r} "
                f"{stuck} times: the cursor is not advancing. Use the next cursor from the "
                "last result, or stop paging."
            ),
            key=series,
            details={"tool": step.tool, "cursor": str(sent), "count": stuck},
        )
