"""The Policy page's "Calibrate from labels": ``loopscope calibrate`` over the stored runs the
page replays, with the current policy as the base.

The runs become labelled episodes by the collector's conversion (``runs.stored``, the
one ``loopscope calibrate --db`` reads stores with), so the page and the command calibrate a
store alike; calibration itself is ``loopscope.offline.calibration``, never re-implemented
here. What the page shows beside the result is plain data built here: the bound in words,
how the calibrated policy differs from the current one, and each evidence source's record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import pandas as pd

from loopscope.detect import Policy
from loopscope.offline.calibration import Calibration, TooFewLabels, calibrate
from loopscope_collector.runs.stored import StoredRun, labelled_episode

__all__ = ["CHANGE_COLUMNS", "Calibration", "TooFewLabels", "bound_text", "judged",
           "policy_changes", "run", "sources_frame"]

NOT_CAPPED: Final = "stop (not capped)"
CHANGE_COLUMNS: Final = ("setting", "current", "calibrated", "change")


def judged(runs: Sequence[StoredRun]) -> list[StoredRun]:
    """The runs calibration can judge: labelled (by a human or a scenario), marked a false
    kill by a human, or successful."""
    return [run for run in runs
            if run.label is not None or run.human_false_kill or run.outcome == "success"]


def run(runs: Sequence[StoredRun], base: Policy, *,
        progress: Callable[[str], None] | None = None) -> Calibration:
    """Calibrate on the labelled and successful ones of ``runs``, ``base``'s other settings
    kept; ``progress`` gets calibration's progress lines.

    Raises:
        TooFewLabels: too few labelled loops or healthy runs; its message says how many and
            what to do.
    """
    return calibrate([labelled_episode(r) for r in judged(runs)], base, progress=progress)


def bound_text(result: Calibration) -> str:
    """The false stops and their bound in words: "0 of 113: at most 3.2% at 95%"."""
    return (f"{len(result.false_kills)} of {result.healthy}: at most {result.bound:.1%} "
            "at 95%")


def policy_changes(current: Policy, calibrated: Policy) -> pd.DataFrame:
    """How ``calibrated`` differs from ``current``: one row per evidence cap added, removed
    or changed, and ``ignored_calls`` when it changed (columns ``CHANGE_COLUMNS``)."""
    rows = []
    before, after = current.evidence_caps, calibrated.evidence_caps
    for source in sorted(set(before) | set(after)):
        was, now = before.get(source), after.get(source)
        if was == now:
            continue
        change = "added" if was is None else "removed" if now is None else "changed"
        rows.append({"setting": f"evidence_caps: {source}", "current": was or NOT_CAPPED,
                     "calibrated": now or NOT_CAPPED, "change": change})
    if current.ignored_calls != calibrated.ignored_calls:
        rows.append({"setting": "ignored_calls", "current": str(current.ignored_calls),
                     "calibrated": str(calibrated.ignored_calls), "change": "changed"})
    return pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))


def sources_frame(result: Calibration) -> pd.DataFrame:
    """Each evidence source's blocks and stops before any cap (on loops, false kills) and
    the highest action the calibrated policy lets it take alone."""
    return pd.DataFrame(
        [{"evidence source": name, "stops on loops": row.on_loops,
          "false stops": len(row.false_kills), "highest action": result.caps.get(name, "stop"),
          "false stops on": ", ".join(row.false_kills[:5])}
         for name, row in sorted(result.sources.items())],
        columns=["evidence source", "stops on loops", "false stops", "highest action",
                 "false stops on"])
