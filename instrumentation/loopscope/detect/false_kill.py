"""The false-kill rule: whether a kill (a block or stop, or observe mode's would-be one) hit a
run that was in fact healthy. One rule for every place that reports the false-kill rate:
``loopscope eval``, the dashboard's Policy page and the collector's ``metrics_breakdown``
read, whose SQL spells the same rule as the ``false_kill_rule`` fragment of
``collector/loopscope_collector/reads/sql/reads.sql`` (a test holds the two equal on every
combination of inputs). docs/metrics.md, "False-kill rate", says why.

A budget stop is a user's cap, not a detector's verdict: it is no kill here
(``is_detector_kill``), and is reported beside the rate, never in it.

Example:
    >>> kill_was_false(label=False, kill_step=4)
    True
    >>> kill_was_false(label=True, first_loop_step=6, kill_step=4)   # before the loop began
    True
    >>> kill_was_false(label=None, outcome="success", progress_after_kill=True, kill_step=4)
    True
    >>> kill_was_false(label=None, outcome="success", progress_after_kill=False, kill_step=4)
    False
    >>> print(kill_was_false(label=None, outcome=None, kill_step=4))  # nothing to judge by
    None
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .events import Flag

JUDGED_OUTCOMES: Final = ("success", "failure")
"""The outcomes by which the rule judges a kill on an unlabelled run; a kill on an unlabelled
run with any other outcome (none recorded) is not judged, and stays out of the rate."""


def kill_was_false(
    *,
    label: bool | None,
    kill_step: int | None,
    first_loop_step: int | None = None,
    human_false_kill: bool = False,
    outcome: str | None = None,
    progress_after_kill: bool = False,
) -> bool | None:
    """Whether the first kill on a run was false: True false, False right, None not judged.

    In order, the first that applies:

    1. a human said this kill was wrong (a ``false_kill`` label): false;
    2. the run is labelled no loop (``label`` False, a human's label first, else the
       scenario's): false;
    3. the run is labelled a loop: false only when the kill came before the loop began
       (``kill_step < first_loop_step``, in the label's own step numbering; a label without a
       first step, or a kill without a step, makes it right);
    4. unlabelled and it succeeded: false when it made progress after the kill (a tool call
       after it whose progress marker is not none or waiting), else right;
    5. unlabelled and it failed: right;
    6. unlabelled with no known outcome: not judged (None), so not in the rate.
    """
    if human_false_kill or label is False:
        return True
    if label is True:
        return kill_step is not None and first_loop_step is not None \
            and kill_step < first_loop_step
    if outcome == "success":
        return progress_after_kill
    if outcome == "failure":
        return False
    return None


def made_progress(progress: str | None) -> bool:
    """Whether a tool call's progress marker counts as progress for the rule: any marker but
    none (``None``) and ``"waiting"`` (a poll before its deadline)."""
    return progress is not None and progress != "waiting"


def is_detector_kill(flag: Flag) -> bool:
    """Whether ``flag`` is a kill the rule judges: a detector's block or stop (severity
    ``kill``), not a budget's."""
    return flag.severity == "kill" and flag.detector != "budget" and flag.kind != "budget"


def first_kill(flags: Sequence[Flag], stop_step: int | None) -> Flag | None:
    """The run's kill the rule judges: its first detector kill (``is_detector_kill``) at or
    before the run's first stop (``stop_step``, a budget's included; None: it never
    stopped). A recorded run may go on past a stop (observe mode, or a what-if replay), but
    under enforce it would have ended there: a kill after it is no kill of this run. Eval,
    the Policy page and the SQL reads (``marks`` in reads.sql) all pick it so."""
    return next((f for f in flags if is_detector_kill(f)
                 and (stop_step is None or f.step <= stop_step)), None)
