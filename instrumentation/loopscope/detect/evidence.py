"""What a finding rests on, and how high that evidence lets it climb.

Every finding carries its **evidence**: the facts its verdict depends on, each from one
source, named ``axis:value``:

- ``kind:declared`` (the caller, the configuration or MCP annotations said read, write or
  poll), ``kind:guessed`` (inferred from the tool's name, the HTTP method or the answer),
  ``kind:shape`` (a poll because its output changed) or ``kind:unknown`` (nothing said);
- ``output:equal`` (the outputs compared carry the same information once volatile fields
  are masked) or ``output:similar`` (only near the same);
- ``deadline:stated`` (the call or the task states how long to wait) or
  ``deadline:default`` (the policy's default);
- ``progress:measured`` (every call counted returned an output that was compared) or
  ``progress:assumed`` (some returned none: no progress was assumed, not seen);
- ``outcome:timeout`` (a write's UNKNOWN outcome is its status: it timed out) or
  ``outcome:parsed`` (read from the text of its answer: "connection reset").
- ``effect:shown`` (a repeated write's answers said what it did, the same each time but for
  ids and figures), ``effect:varies`` (its answers each said something else: a hand-off's
  reports) or ``effect:assumed`` (it answered nothing: a repeated side effect is assumed);
- ``error:plain`` (a failure repeated as it was), ``error:retry-after`` (the failure says
  when to try again: a refusal for now, whatever the arguments) or ``error:unchanged`` (the
  same failure, where in the source aside, though edits were made in between);
- ``calls:same`` (one call failing again) or ``calls:different`` (different calls failing
  alike);
- ``state:failed`` (a poll answered a failed state twice: waiting will not fix it; no
  deadline is needed).

The evidence **source** of a finding is its detector and its evidence together, e.g.
``write_duplicate/effect:shown+kind:guessed``. ``Policy.evidence_caps`` bounds, per source, the
highest action a finding may take on its own: a source with a false kill on record (on any
labelled run available) may warn, never block or stop; ``loopscope calibrate`` measures that
and writes the caps. A capped finding still counts as a nudge: when the warning changes
nothing and no new information arrives (``Policy.ignored_calls`` calls), the independent
evidence of that agrees, and the run is stopped (the monitor's ``ignored`` finding).

Example:
    >>> source_of("write_duplicate", ("kind:guessed", "effect:shown"))
    'write_duplicate/effect:shown+kind:guessed'
    >>> kind_evidence("name"), kind_evidence("annotation"), kind_evidence(None, known=False)
    ('kind:guessed', 'kind:declared', 'kind:unknown')
    >>> capped("block", "warn")
    'warn'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .events import ACTION_RANK, Action

AXES: Final = ("calls", "deadline", "effect", "error", "kind", "outcome", "output",
               "progress", "state")
"""The axes of evidence, each ``axis:value``."""
VALUES: Final[dict[str, tuple[str, ...]]] = {
    "calls": ("same", "different"),
    "deadline": ("stated", "default"),
    "effect": ("shown", "varies", "assumed"),
    "error": ("plain", "retry-after", "unchanged"),
    "kind": ("declared", "guessed", "shape", "unknown"),
    "outcome": ("timeout", "parsed"),
    "output": ("equal", "similar"),
    "progress": ("measured", "assumed"),
    "state": ("failed",),
}
_KIND_SOURCES: Final[dict[str | None, str]] = {
    "declared": "kind:declared",
    "annotation": "kind:declared",
    "method": "kind:guessed",
    "name": "kind:guessed",
    "outcome": "kind:guessed",
    None: "kind:shape",
}
KINDLESS: Final = frozenset({"budget", "monologue", "no_progress"})
"""Detectors whose verdict does not depend on a call's kind: no ``kind`` evidence."""


def kind_evidence(source: str | None, *, known: bool = True) -> str:
    """The ``kind`` evidence of a call whose kind came from ``source`` (``events.KindSource``,
    None: judged by the shape of its outputs); ``known`` False: it has no kind at all."""
    if not known:
        return "kind:unknown"
    return _KIND_SOURCES.get(source, "kind:guessed")


def source_of(detector: str, evidence: Iterable[str]) -> str:
    """The evidence source of a finding: ``detector/axis:value+...``, items sorted."""
    items = sorted(set(evidence))
    return f"{detector}/{'+'.join(items)}" if items else detector


def capped(action: Action, cap: Action | None) -> Action:
    """``action``, no higher than ``cap`` (None: no cap)."""
    if cap is None or ACTION_RANK[action] <= ACTION_RANK[cap]:
        return action
    return cap


def check_source(source: str) -> str | None:
    """Why ``source`` is not a valid evidence source name (None when it is)."""
    detector, _, items = source.partition("/")
    if not detector:
        return "it names no detector"
    for item in items.split("+") if items else ():
        axis, _, value = item.partition(":")
        if axis not in VALUES or value not in VALUES[axis]:
            known = ", ".join(f"{a}:{v}" for a in AXES for v in VALUES[a])
            return f"{item!r} is not evidence ({known})"
    return None
