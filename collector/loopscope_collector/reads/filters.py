"""The filters every view of the store takes, spelled once: the reads' parameters, the
``loopscope metrics`` options and the dashboard's sidebar all build a ``Filters``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

DIMENSIONS: Final = ("service", "agent", "model", "tool", "outcome")
"""The filters that pick one value (the ``filter_options`` read offers each one's values);
the time window is ``since_ns`` / ``until_ns``."""


@dataclass(frozen=True, slots=True)
class Filters:
    """Which runs and calls a view covers; ``None`` means "no filter". ``since_ns`` and
    ``until_ns`` bound a half-open window [since, until) in Unix nanoseconds."""

    service: str | None = None
    agent: str | None = None
    model: str | None = None
    tool: str | None = None
    outcome: str | None = None
    since_ns: int | None = None
    until_ns: int | None = None

    def params(self) -> dict[str, Any]:
        """The reads' parameters (and the keyword arguments of the dashboard's queries)."""
        return {"service": self.service, "agent": self.agent, "model": self.model,
                "tool": self.tool, "outcome": self.outcome, "since_ns": self.since_ns,
                "until_ns": self.until_ns}

    def previous(self) -> Filters | None:
        """The same filters over the window just before this one (for trends), or None
        when the time range is unbounded."""
        if self.since_ns is None:
            return None
        until = self.until_ns if self.until_ns is not None else time.time_ns()
        width = until - self.since_ns
        return Filters(self.service, self.agent, self.model, self.tool, self.outcome,
                       self.since_ns - width, self.since_ns)
