"""What happened to a run, apart from what enforce mode would have done, and one numbering.

Two facts are easy to mix up, and every page keeps them apart:

- **what happened**: the action a guard really took at a call (``loopscope.guard.action``:
  allow, warn, block, stop) and the run's real stop reason. An observe-mode or warn-mode run
  that finished was never stopped, whatever its guard decided.
- **what enforce would have done**: the policy's decision (``loopscope.guard.decision``, or a
  collector detection's action). Where it is stronger than what happened, it is a *would-be*
  action ("would stop"), and named as such.

Calls are numbered once, by their **tool-call ordinal**: call 1 is the run's first tool call.
Tables, timelines, flags and the stop diagnostic all use it; the agent's own step index
(``tool_calls.step``, which counts the model's messages too) is translated to it here. The
ordinal is the **agent's**: the number its SDK put on the call's span (``call_ordinal``,
``loopscope.call.ordinal``), the one its log and its stop diagnostic give. A call whose span
never arrived leaves a gap ("calls 2–4 not received") instead of renumbering the calls after
it; only a run whose instrumentation numbers no calls is numbered in the order its calls ran.

Pure functions over the frames ``queries`` returns, so the wording is tested without Streamlit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import pandas as pd

from loopscope.detect.events import ACTION_RANK
from loopscope.detect.steps import call_numbers

RANK: Final[Mapping[str, int]] = {action: n for action, n in ACTION_RANK.items()}
DONE: Final = {"allow": "allowed", "warn": "warned", "block": "blocked", "stop": "stopped"}
"""An action as something that happened."""
WOULD: Final = {"warn": "would warn", "block": "would block", "stop": "would stop"}
"""An action enforce mode would have taken, where it did not happen."""
GUARD_STOPS: Final = ("no_progress", "repeated_tool_call", "budget")
"""Stop reasons that mean a guard ended the run."""


def rank(action: object) -> int:
    """0 allow … 3 stop; anything else (None, NaN) is 0."""
    return RANK.get(action, 0) if isinstance(action, str) else 0


def would_be(happened: object, enforce_would: object) -> str | None:
    """``"would stop"`` when enforce would have done more than happened, else None.

    ``happened`` is an episode's ``happened`` (stopped, blocked, warned, allowed) or a call's
    ``guard_action``; ``enforce_would`` an action (stop, block, warn, allow).
    """
    done = {v: k for k, v in DONE.items()}.get(str(happened), happened)
    if rank(enforce_would) > rank(done):
        return WOULD.get(str(enforce_would))
    return None


def number_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """``calls`` (in the order they ran) with ``call`` as its first column: the number of each
    call by the core's one numbering (``steps.call_numbers``): the agent's own
    (``call_ordinal``) when every call carries one and no two share it, else 1, 2, … in the
    order they ran (an instrumentation that numbers no calls, or a store from before the
    agents numbered them)."""
    numbered = calls.copy()
    if "call" in numbered.columns:
        return numbered
    numbered.insert(0, "call", list(call_numbers([True] * len(numbered), _own(numbered))))
    return numbered


def _own(calls: pd.DataFrame) -> list[int | None]:
    """The agent's own number of each call (``call_ordinal``; None where it gave none)."""
    if "call_ordinal" not in calls.columns:
        return []
    return [None if pd.isna(n) else int(n) for n in calls["call_ordinal"]]


def by_agent(calls: pd.DataFrame) -> bool:
    """Whether ``number_calls`` numbered ``calls`` by the agent's own numbers."""
    own = _own(calls)
    return bool(own) and "call" in calls.columns and [int(n) for n in calls["call"]] == own


def missing_calls(calls: pd.DataFrame, made: object = None) -> list[tuple[int, int]]:
    """The agent's calls the store lacks, as ranges of call numbers (first, last): the
    numbers below the highest one received, and above it up to ``made`` (the run's own count
    of its tool calls, from its final span) when given. Empty when the calls are not
    numbered by the agent: a count of what arrived cannot tell what did not."""
    if not by_agent(calls):
        return []
    made = int(made) if isinstance(made, int | float) and not isinstance(made, bool) \
        and not _missing(made) else None
    return gaps_in([int(n) for n in calls["call"]], made)


def gaps_in(numbers: Iterable[int], made: int | None = None) -> list[tuple[int, int]]:
    """The numbers from 1 to the highest of ``numbers`` (or ``made``, when higher) that are
    not among them, as ranges (first, last)."""
    have = set(numbers)
    last = max([*have, made or 0], default=0)
    gaps: list[tuple[int, int]] = []
    for n in range(1, last + 1):
        if n in have:
            continue
        if gaps and gaps[-1][1] == n - 1:
            gaps[-1] = (gaps[-1][0], n)
        else:
            gaps.append((n, n))
    return gaps


def gap_text(gaps: list[tuple[int, int]]) -> str:
    """``[(2, 4), (9, 9)]`` in words: ``calls 2–4 and 9 not received`` (``call 9 not
    received`` for one); empty for none."""
    if not gaps:
        return ""
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in gaps]
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    many = len(gaps) > 1 or gaps[0][0] != gaps[0][1]
    return f"{'calls' if many else 'call'} {listed} not received"


def call_of_step(calls: pd.DataFrame, step: object) -> int | None:
    """The tool-call ordinal of the agent's step index ``step`` (``tool_calls.step``), or None
    when no call of the run has that step."""
    if calls.empty or not isinstance(step, int) or isinstance(step, bool):
        return None
    if "step" not in calls.columns:
        return None
    hit = calls.loc[calls["step"] == step, "call"]
    return int(hit.iloc[0]) if not hit.empty else None


def flag_calls(detections: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """``detections`` with ``call``: the flagged call's number (by span), first column, in
    call order. A flag on a message (a monologue) is at the call that would follow it: the
    collector's ``ordinal`` counts the calls it received before the message, so it is
    translated through them (the call after the last received one before it)."""
    if detections.empty:
        return detections
    numbers = [int(n) for n in calls["call"]] if "call" in calls.columns else []
    by_span = dict(zip(calls.get("span_id", []), numbers, strict=True))
    flagged = detections.copy()
    ordinals = flagged["ordinal"] if "ordinal" in flagged.columns else None

    def after(received: int) -> int:
        """The number of a message after the first ``received`` calls that arrived, by the
        core's rule (``steps.call_numbers``: the call that would follow it)."""
        own = numbers[:received] if received <= len(numbers) else ()
        return call_numbers([True] * received + [False], own)[-1]

    flagged.insert(0, "call", [
        by_span.get(span, None if ordinals is None else after(int(ordinals.iloc[i])))
        for i, span in enumerate(flagged["span_id"])
    ])
    return flagged.sort_values("call", kind="stable")


NOTHING_FURTHER: Final = "—"
"""The Flags table's "then" where the guard's ladder went nowhere past the flag (it allowed or
only warned, or no in-process guard reported a decision)."""


def flag_ladder(flags: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """``flag_calls``' frame as the Flags table shows it: ``climbed_to`` is where the guard's
    ladder for the flag's detector went from the flag's call on, until the detector's next
    flag (``stopped at call 6``; ``would stop at call 6`` where it did not happen, in observe
    and warn mode), so a flag that started at warn agrees with the guard's later "would stop".
    The collector's 0-based ``ordinal`` and the core's ``severity`` are dropped: calls are
    numbered once (``call``), and kills are named by their action (block, stop)."""
    if flags.empty:
        return flags.drop(columns=["ordinal", "severity"], errors="ignore")
    shown = flags.drop(columns=["ordinal", "severity"], errors="ignore").copy()
    climbed: list[str] = []
    has_guard = not calls.empty and "guard_flags" in calls.columns
    for i, (call, detector) in enumerate(zip(shown["call"], shown["detector"], strict=True)):
        later = shown.iloc[i + 1:]
        again = later.loc[later["detector"] == detector, "call"]
        end = again.iloc[0] if not again.empty else None
        best: tuple[int, str] | None = None
        if has_guard and not _missing(call):
            for row in calls.itertuples():
                if row.call < call or (end is not None and row.call >= end):
                    continue
                if detector not in _flag_text(row.guard_flags).split(", "):
                    continue
                decided = row.guard_decision if isinstance(row.guard_decision, str) \
                    else row.guard_action
                done = row.guard_action if isinstance(row.guard_action, str) else "allow"
                text = (f"{DONE[done]} at call {row.call}" if rank(done) >= rank(decided)
                        else f"{WOULD[str(decided)]} at call {row.call}")
                strength = max(rank(done), rank(decided))
                if strength > 0 and (best is None or strength > best[0]):
                    best = (strength, text)
        climbed.append(best[1] if best is not None else NOTHING_FURTHER)
    shown["climbed_to"] = climbed
    return shown


def step_progress(calls: pd.DataFrame) -> pd.DataFrame:
    """``calls`` with the progress the Steps table shows: ``shown_progress`` and
    ``shown_streak`` are the guard's (``loopscope.progress``, ``loopscope.no_progress.streak``:
    the values its decisions and its stop diagnostic were made from) wherever the span carries
    them, else the collector's own; ``progress_by`` says whose ("guard" or "collector").

    The two can differ: the collector judges what it stored, and when content was not captured
    it has neither the outputs nor the model's messages the guard saw, so it may call a new
    action "none" and count a longer streak than the guard that stopped the run.
    """
    shown = calls.copy()
    if shown.empty:
        for name in ("shown_progress", "shown_streak", "progress_by"):
            shown[name] = pd.Series(dtype=object)
        return shown
    empty = pd.Series([None] * len(shown), index=shown.index, dtype=object)
    guard_progress = shown["progress"] if "progress" in shown.columns else empty
    guard_streak = shown["streak"] if "streak" in shown.columns else empty
    own_progress = (shown["collector_progress"] if "collector_progress" in shown.columns
                    else empty)
    own_streak = shown["collector_streak"] if "collector_streak" in shown.columns else empty
    by_guard = guard_progress.notna() | guard_streak.notna()
    shown["shown_progress"] = guard_progress.where(by_guard, own_progress)
    shown["shown_streak"] = guard_streak.where(by_guard, own_streak).astype("Int64")
    shown["progress_by"] = by_guard.map({True: "guard", False: "collector"})
    return shown


def collector_differs(steps: pd.DataFrame) -> bool:
    """Whether, on a ``step_progress`` frame, the collector's own progress or streak differs
    from the guard's at any call the guard reported."""
    if steps.empty or "collector_progress" not in steps.columns:
        return False
    guard = steps[steps["progress_by"] == "guard"]

    def text(column: pd.Series) -> list[str]:
        return ["" if _missing(v) else str(int(v)) if isinstance(v, float) else str(v)
                for v in column]

    return (text(guard["shown_progress"]) != text(guard["collector_progress"])
            or text(guard["shown_streak"]) != text(guard["collector_streak"]))


def _missing(value: object) -> bool:
    try:
        # pd.isna's overloads take scalars, arrays and frames, not ``object``: any value may
        # come here, and what it cannot judge raises (caught below).
        return bool(pd.isna(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False


def guard_rows(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls at which a guard did or decided something other than allow, oldest first:
    ``call``, ``tool``, ``mode``, ``happened`` (what the guard did), ``enforce_would`` (the
    would-be action where it is stronger than what happened), ``reason``, ``flags``."""
    columns = ["call", "tool", "mode", "happened", "enforce_would", "reason", "flags"]
    if calls.empty or "guard_action" not in calls.columns:
        return pd.DataFrame(columns=columns)
    action = calls["guard_action"]
    decision = calls["guard_decision"].where(calls["guard_decision"].notna(), action)
    busy = calls[(decision.map(rank) > 0) | (action.map(rank) > 0)]
    return pd.DataFrame({
        "call": busy["call"],
        "tool": busy["tool"],
        "mode": busy["guard_mode"],
        "happened": [DONE.get(str(a), "—") if isinstance(a, str) else "—"
                     for a in busy["guard_action"]],
        "enforce_would": [would_be(a, d) for a, d in
                          zip(busy["guard_action"], decision[busy.index], strict=True)],
        "reason": busy["guard_reason"],
        "flags": busy["guard_flags"].map(_flag_text),
    }, columns=columns)


def stop_story(episode: Mapping[str, Any], diagnostic: Mapping[str, Any] | None,
               calls: pd.DataFrame) -> tuple[str, str]:
    """How the run ended, as (kind, text): kind ``stopped`` (a guard stopped it), ``would``
    (it was not stopped, but enforce would have), ``open`` (it is running, or ended without
    its final span: ``episode["status"]``), or ``none``. Call numbers are the agent's
    (``number_calls``); a stop at a call whose span never arrived is named by the number the
    guard's diagnostic gives it (``call``), as the agent's log named it."""
    reason = episode.get("stop_reason") or "unknown"
    mode = episode.get("guard_mode") or "no"
    stopped = episode.get("happened") == "stopped" or reason in GUARD_STOPS
    status = episode.get("status") or "ended"
    if diagnostic is None and status != "ended":
        return _open_story(episode, stopped, calls)
    if diagnostic is None:
        if stopped:
            return "stopped", f"Stopped: {reason}."
        return "none", f"Not stopped: the run ended with stop reason {reason}."
    at = call_of_step(calls, diagnostic.get("step"))
    table = calls  # where the Steps table's facts about that call are read
    if at is None:  # the call's span never arrived: the agent's number, as its log gave it
        at = _number(diagnostic.get("call"))
        if not by_agent(calls):  # (the table numbers what arrived: none of its rows is it)
            table = calls.iloc[0:0]
    where = f" at call {at}" if at is not None else ""
    by = diagnostic.get("detector") or diagnostic.get("terminated_by") or "the guard"
    streak = diagnostic.get("no_progress_streak")
    last = call_of_step(calls, diagnostic.get("last_progress_step"))
    facts = []
    shown = _shown_streak(table, at)
    if shown is not None:  # the Steps table's count at that call: one number on the page
        facts.append(f"{shown} call(s) without progress up to call {at}, that call included")
    elif isinstance(streak, int):
        facts.append(f"{streak} call(s) without progress{_streak_end(table, at, streak)}")
    if last is not None:
        facts.append(f"last progress at call {last}")
    tail = f" ({'; '.join(facts)})" if facts else ""
    hint = f" {diagnostic['hint']}" if diagnostic.get("hint") else ""
    if stopped:
        return "stopped", f"Stopped{where} by {by}{tail}.{hint}"
    return "would", (f"Not stopped: this {mode}-mode run ended with stop reason {reason}. "
                     f"Enforce mode would have stopped it{where} by {by}{tail}.{hint}")


def _number(value: object) -> int | None:
    """A call number from a diagnostic: a positive int, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def _shown_streak(calls: pd.DataFrame, at: int | None) -> int | None:
    """The no-progress streak the Steps table shows at call ``at`` (``step_progress``), or
    None when the run has no such call or no streak there."""
    if at is None or calls.empty or "call" not in calls.columns:
        return None
    steps = step_progress(calls)
    hit = steps.loc[steps["call"] == at, "shown_streak"]
    if hit.empty or _missing(hit.iloc[0]):
        return None
    return int(hit.iloc[0])


OPEN_STATUSES: Final = {
    "running": "Running: the agent's final span (its outcome and stop reason) has not "
               "arrived yet; the calls so far are shown above.",
    "ended without a summary": "Ended without a summary: the agent's final span never "
               "arrived and the run has been silent for over {minutes} minutes (the agent "
               "died, or its exporter dropped the span), so its outcome and stop reason are "
               "unknown.",
}
"""What the Episode page says of a run whose final span has not arrived (the episode read's
``status``; ``minutes`` from its ``silent_s``)."""


def _open_story(episode: Mapping[str, Any], stopped: bool,
                calls: pd.DataFrame) -> tuple[str, str]:
    minutes = f"{float(episode.get('silent_s') or 0) / 60:g}"
    text = OPEN_STATUSES.get(str(episode.get("status")), OPEN_STATUSES["running"]).format(
        minutes=minutes)
    if stopped and "guard_action" in calls.columns:
        at = calls.loc[calls["guard_action"] == "stop", "call"]
        where = f" at call {int(at.iloc[0])}" if not at.empty else ""
        return "stopped", (f"Stopped{where} by its guard. " + text.split(": ", 1)[0]
                           + ": the final span, with the stop diagnostic, has not arrived.")
    return "open", text


def _streak_end(calls: pd.DataFrame, at: int | None, streak: int) -> str:
    """Where a diagnostic's streak ends. A guard decides before a call runs (the streak counts
    the calls before it) or after its output is recorded (the call is counted too); its span's
    own streak (``tool_calls.streak``) tells which."""
    if at is None or "streak" not in calls.columns:
        return " before it"
    own = calls.loc[calls["call"] == at, "streak"]
    if not own.empty and own.iloc[0] == streak and streak > 0:
        prior = calls.loc[calls["call"] == at - 1, "streak"]
        if prior.empty or prior.iloc[0] != streak:
            return f", call {at} included"
    return " before it"


def _flag_text(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if hasattr(value, "tolist"):  # a NumPy array
        return ", ".join(str(v) for v in value.tolist())
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
