"""The records the detection core takes in and gives back.

Every caller of the core (the in-process guard, ``loopscope analyze``, the collector) reduces
what it knows to these plain values, so a live tool call, a recorded Episode JSONL step and an
OTLP span reach the detectors as the same type. Nothing here does I/O or reads a clock: times
are passed in as seconds since the episode started.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple, get_args

# The vocabularies, each spelled once. Every other spelling in the tree (argparse choices,
# validation, dashboard option lists) is derived from these; the SQL files, which cannot
# import them, are held to them by tests/detect/test_events.py.
Mode = Literal["observe", "warn", "enforce"]
"""How a guard applies a decision: record it only, nudge the model, or block and stop."""
ToolKind = Literal["read", "write", "poll"]
KindSource = Literal["declared", "annotation", "method", "name", "outcome"]
"""Where a call's kind came from: declared by the caller or the configuration, the MCP
tool annotations, the HTTP method of an HTTP call, the tool's name and arguments, or what
the call answered (an undeclared call that confirmed doing something is a write:
``kinds.confirms_change``)."""
Status = Literal["ok", "error", "timeout", "blocked"]
Action = Literal["allow", "warn", "block", "stop"]
Severity = Literal["warn", "kill"]
Outcome = Literal["success", "failure", "unknown"]
"""How an episode ended, as its agent reports it (``set_outcome``)."""

MODES: Final[tuple[Mode, ...]] = get_args(Mode)
TOOL_KINDS: Final[tuple[ToolKind, ...]] = get_args(ToolKind)
KIND_SOURCES: Final[tuple[KindSource, ...]] = get_args(KindSource)
STATUSES: Final[tuple[Status, ...]] = get_args(Status)
ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
"""From the mildest to the most severe (``ACTION_RANK``)."""
RUNG_ACTIONS: Final[tuple[Action, ...]] = ACTIONS[1:]
"""The actions a ladder's rung may name: every action but ``allow``."""
KILL_ACTIONS: Final[tuple[Action, ...]] = ("block", "stop")
"""The actions that end or skip work (``Decision.is_kill``; a flag's ``kill`` severity)."""
SEVERITIES: Final[tuple[Severity, ...]] = get_args(Severity)
OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)

STOP_REASONS: Final = (
    "completed",
    "no_progress",
    "repeated_tool_call",
    "budget",
    "timeout",
    "aborted",
    "fatal",
)
"""Every way an episode can end; ``Decision.stop_reason`` is one of these."""

PROGRESS_MARKERS: Final = (
    "new_info",
    "state_change",
    "cursor_advance",
    "write_ok",
    "new_action",
    "explicit",
)
"""Why a step counted as progress. ``None`` means no progress; ``"waiting"`` is a legitimate
poll before its deadline, which neither extends nor resets the no-progress streak."""


class ToolCall(NamedTuple):
    """One tool call as known before it runs: built once, complete, and never changed (a
    replay builds it with its recorded fields). A named tuple rather than a frozen dataclass:
    one is made for every call, and a frozen dataclass sets each field through
    ``object.__setattr__``, several times slower to build.

    ``args`` may be ``None`` when the caller did not capture arguments; ``signature`` is then
    required. ``signature`` and ``args_text`` are computed from ``args`` when left empty.
    """

    tool: str
    args: Any = None
    call_id: str | None = None
    kind: ToolKind | None = None
    t: float = 0.0
    signature: str = ""
    args_text: str = ""
    intent: str | None = None
    """``"duplicate"`` declares an intended repeat of a write ("buy another one")."""
    idempotency_key: str | None = None
    """Overrides the ``run_id:step_id`` key the core derives for writes."""
    reconciles: str | None = None
    """Call id or idempotency key of an UNKNOWN write that this (read) call looks up."""
    found: bool | None = None
    """With ``reconciles``: whether the looked-up business record exists."""
    deadline_s: float | None = None
    """For polls: seconds after the first poll of this call when polling must stop."""
    deadline_stated: bool | None = None
    """With ``deadline_s``: whether it is an explicit limit (counted from the first poll)
    rather than an estimate (counted from the last change), as a recorded span says;
    ``None`` (a deadline the caller declared) is explicit."""
    turn: int | None = None
    """The user turn the call belongs to (1 = the task), when the caller knows it; a call
    with a higher turn than the last starts a new intent, as ``on_message("user")`` does."""
    annotations: Mapping[str, Any] | None = None
    """The tool's MCP annotations (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``),
    when the tool comes from an MCP server that declares them: its kind when none is
    declared."""


@dataclass(slots=True)
class ToolResult:
    """What a tool call returned, as the model sees it.

    ``output`` is the model-visible text (or ``None`` when not captured; ``output_hash`` is
    then required). ``status`` ``timeout`` makes a write UNKNOWN rather than failed.
    """

    output: str | None = None
    output_hash: str = ""
    status: Status = "ok"
    call_id: str | None = None
    t: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0


@dataclass(frozen=True, slots=True)
class Flag:
    """One detector's finding at one step.

    ``severity`` is ``kill`` when the policy would block or stop there (in enforce mode), else
    ``warn``. ``key`` identifies the streak (for example the repeated signature), so a flag is
    reported once per streak.
    """

    step: int
    detector: str
    kind: str
    severity: Severity
    message: str
    key: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    action: str = "warn"
    """What the policy does at this flag in enforce mode: warn, block or stop."""
    rung: int = 0
    """How far up its detector's ladder the condition is: 0 at the first sign, one more
    each time it persists, with no progress, after the previous rung was delivered."""
    evidence: str = ""
    """The finding's evidence source (``evidence.source_of``: its detector and what it rests
    on, e.g. ``write_duplicate/count:none+kind:guessed``)."""
    capped: bool = False
    """Its evidence held it below its rung's action (``Policy.evidence_caps``)."""

    def as_dict(self) -> dict[str, Any]:
        """The flag as plain JSON-ready values."""
        return {
            "step": self.step,
            "detector": self.detector,
            "kind": self.kind,
            "severity": self.severity,
            "action": self.action,
            "rung": self.rung,
            "message": self.message,
            **({"details": self.details} if self.details else {}),
            **({"evidence": self.evidence} if self.evidence else {}),
            **({"capped": True} if self.capped else {}),
        }


@dataclass(slots=True)
class Decision:
    """What the policy says about one step, before any guard mode is applied.

    Treat it as read-only. It is not frozen only because two are built for every tool call
    and a frozen dataclass costs twice as much to construct.

    ``action`` is what *enforce* mode does; the guard turns it into a nudge (warn mode) or a
    record only (observe mode). ``correction`` is the message the model should see;
    ``diagnostic`` is the structured record of a stop or block; ``cached_output_hash`` names
    the earlier result a block hands back.
    """

    step: int
    action: Action = "allow"
    flags: tuple[Flag, ...] = ()
    new_flags: tuple[Flag, ...] = ()
    """The flags that start a streak here (what a report lists); ``flags`` has them all."""
    reason: str = ""
    correction: str | None = None
    diagnostic: dict[str, Any] | None = None
    stop_reason: str | None = None
    idempotency_key: str | None = None
    cached_output_hash: str | None = None
    progress: str | None = None
    """After a call: its progress marker (``None`` = no progress, ``"waiting"`` = a poll)."""
    write_status: str | None = None
    """After a write: ``ok``, ``error`` or ``unknown`` (a timeout: reconcile before retrying)."""
    streak: int = 0
    """Consecutive no-progress tool calls after this step."""
    kind: str | None = None
    """The call's effective kind: declared, configured, or ``poll`` by shape or content."""
    deadline_s: float | None = None
    """Before a poll: the deadline it is judged by (declared, the task's, or the default)."""
    deadline_stated: bool = False
    """Whether ``deadline_s`` is an explicit limit (declared, or "give up after 20 minutes")
    rather than an estimate or the default."""
    intent: str | None = None
    """Before a write: ``duplicate`` when repeating an earlier one is intended (declared, or
    asked for by the task or the user's latest turn)."""
    turn: int = 0
    """The user turn this step belongs to."""
    reconciled: tuple[str, ...] = ()
    """After a call: the UNKNOWN writes (idempotency keys) this call settled by looking the
    record up."""
    signature: str = ""
    """Before a call: the call's signature as the core computed it (under the policy's
    volatile arguments), for callers that store it."""
    kind_source: KindSource | None = None
    """Before a call: where ``kind`` came from (declared, annotation, method, name, outcome),
    or ``None`` when it was judged by the call's shape."""
    @property
    def is_kill(self) -> bool:
        """Block and stop end or skip work; allow and warn do not."""
        return self.action in KILL_ACTIONS


ACTION_RANK: Final[dict[Action, int]] = {action: rank for rank, action in enumerate(ACTIONS)}
"""How severe each action is: when several apply, the highest wins."""


@dataclass(slots=True)
class StepView:
    """One completed tool step, as detectors read it from the history.

    ``args`` and ``output`` are there for the step being checked only; steps in the history
    keep their hashes, sketches and canonical argument text, not the content.
    """

    index: int
    """The step's index in the episode (messages count too)."""
    tool: str
    kind: ToolKind | None
    signature: str
    args_text: str
    args: Any
    output_hash: str
    status: Status
    t: float
    words: frozenset[str] | None = None
    """Word sketch of the output for near-duplicate checks; ``None`` when not captured."""
    output: str | None = None
    progress: str | None = None
    call_id: str | None = None
    deadline_s: float | None = None
    same_info: frozenset[int] = frozenset()
    """Indexes of the steps in the history whose output carried the same information
    (computed once per step by the monitor, read by several detectors)."""
    loose: str = ""
    """The tool and its arguments with case, punctuation and spacing ignored (a request asked
    again in other words has the same ``loose``)."""
    shape: str = ""
    """Hash of the output with numbers, ids, timestamps and durations masked."""
    idempotency_key: str | None = None
    intent: str | None = None
    markers: set[str] | None = None
    """Progress evidence a detector saw in this step (e.g. ``cursor_advance``)."""
    negative: bool = False
    """A successful call that answered "nothing found" (a soft failure of the question)."""
    call: int = 0
    """The tool-call ordinal (1 = the episode's first tool call): the number a person reads
    in tables, diagnostics and logs."""
    values: frozenset[str] | None = None
    """The argument values that name something (``texts.arg_values``); read them with
    ``values_of``, which computes them from the canonical arguments when first needed."""
    edit: tuple[str, str, str] | None = None
    """(target, old, new) when the call replaces text (``writes.edit_of``), computed once."""
    kind_source: KindSource | None = None
    """Where ``kind`` came from (``None``: judged by the call's shape, or unknown)."""
    start: float = 0.0
    """When the call started (``t`` becomes when it returned, once it has)."""
    deadline_stated: bool = False
    """``deadline_s`` is an explicit limit (the call's, or the task's "give up after 20
    minutes"): it counts from the first poll, where an estimate or the default counts from
    the poll's last change."""
    wait: bool = False
    """The call only waits (a ``sleep`` tool, ``sleep 30`` in a shell): pacing, judged by no
    detector (``kinds.is_wait``)."""
    figures: int = 0
    """For a poll: its answer's progress figures (``answers.figures``)."""
    quantities: tuple[float, ...] = ()
    """For a poll: those figures as numbers (``answers.quantities``)."""
    stuck: str = ""
    """What the output says that waiting will not change (``answers.stuck_state``)."""
    retry_after: float = 0.0
    """Seconds a failure asked the caller to wait before retrying (``Retry-After: 30``)."""
    failure: str = ""
    """For a failure: the hash of its output with the places in the source it names masked
    (``texts.unpositioned``): the same failure raised from code an edit moved."""
    facts: frozenset[int] | None = None
    """The output's facts (``information.facts``), for the step being checked only."""
    info: int = 0
    """What the output says, as one value: equal for outputs with the same facts (a shuffled
    result set, another request id, an echo of other arguments), else the output hash's."""
