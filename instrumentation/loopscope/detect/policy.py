"""Every threshold of the detection core, with the defaults of docs/detection.md, in one frozen record.

A policy is data: the guard, ``loopscope analyze`` and the collector build one (from keyword
arguments, a JSON file or defaults) and hand it to ``EpisodeMonitor``. ``Policy.from_mapping``
validates untrusted input and names the bad field. The numbers a user does not tune (how
much of a text is read, how much is remembered) are in ``limits``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from .events import ACTIONS, RUNG_ACTIONS, TOOL_KINDS, Action, ToolKind
from .evidence import check_source

DEFAULT_NO_PROGRESS_K: Final[Mapping[str, int]] = MappingProxyType(
    {
        "lookup": 6,
        "transaction": 6,
        "research": 8,
        "coding": 12,
        "polling": 12,
        "other": 8,
    }
)
"""K, the consecutive no-progress steps that trip the circuit breaker, per task type.

Polling and coding tolerate more legitimate repetition; lookups and transactions that stop
learning are cut sooner."""

EVIDENCE_CAPS: Final[Mapping[str, Action]] = MappingProxyType({
    "write_duplicate/kind:guessed+outcome:parsed": "warn",
})
"""The default ``Policy.evidence_caps``: the evidence sources with a false kill on record, as
``loopscope calibrate`` finds them over every labelled run we have (the corpus, the four
labelled sets and the successful runs of ../shared/data; docs/detection.md, "Evidence", gives
the command). A test holds the two equal."""
IGNORED_CALLS: Final = 2
"""The default ``Policy.ignored_calls``, chosen by the same calibration."""

RENAMED: Final = {"window_repeat": "exact_repeat", "repeated_tool_call": "exact_repeat"}

IDEMPOTENCY_ARGS: Final = (
    "idempotency_key",
    "idempotencyKey",
    "Idempotency-Key",
    "request_id",
    "requestId",
    "client_token",
    "clientToken",
    "client_request_id",
    "clientRequestId",
    "dedup_id",
    "dedupe_key",
    "deduplication_id",
)
"""Argument names under which a caller passes its own idempotency key."""


_NONE: Final[frozenset[str]] = frozenset()

@dataclass(frozen=True, slots=True)
class Budgets:
    """Hard limits, each checked before a call runs. ``None`` means no limit.

    There is no global round cap by default (five rounds kills real work).
    """

    model_turns: int | None = None
    tool_calls: int | None = None
    retries_per_tool: int | None = None
    wall_clock_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class RequiredTool:
    """A turn whose user message matches must call ``tool`` before answering.

    The rule matches when a keyword occurs in the user's message, or when the message is a
    short follow-up (``followups``) and one of ``context_markers`` occurs in the previous
    ``context_messages`` messages. ``args`` (optional) must be a subset of the call's
    arguments for the call to satisfy the rule.
    """

    tool: str
    keywords: tuple[str, ...] = ()
    args: Mapping[str, Any] | None = None
    followups: tuple[str, ...] = ()
    context_markers: tuple[str, ...] = ()
    context_messages: int = 4
    max_corrections: int = 2


@dataclass(frozen=True, slots=True)
class Policy:
    """Thresholds and rules; every field has the default docs/detection.md explains."""

    repeat_threshold: int = 3
    """Identical calls with an unchanged output inside one no-progress stretch, however far
    apart; the first sign of a read spin."""
    window: int = 6
    fuzzy_min_chars: int = 50
    fuzzy_similarity: float = 0.8
    fuzzy_threshold: int = 3
    fuzzy_requires_same_output: bool = True
    """Count a near-identical call only when its output carried the same information.
    ``False`` judges by arguments alone (arguments alone), which nags productive sweeps."""
    oscillation_max_period: int = 4
    oscillation_cycles: int = 3
    stagnation_similarity: float = 0.85
    """Word-set Jaccard at or above which two outputs count as the same information."""
    stagnation_threshold: int = 3
    stagnation_min_words: int = 3
    """Shorter outputs ("available", "OK") are statuses, not information that can stagnate."""
    ignored_calls: int = IGNORED_CALLS
    """Tool calls without progress after a nudge (a warning of any detector, or the
    no-progress breaker's), counted from the first nudge of a no-progress stretch, after
    which the run is stopped: every caught loop ends (issue 16, point 11), and a finding
    whose evidence may only warn climbs when the warning changed nothing."""
    error_threshold: int = 3
    retry_budget: int = 5
    """Retries of a transient failure (timeout, 503, 429) allowed, however well paced, before
    the same call failing again is a loop (issue 16, point 8)."""
    retry_pace_s: float = 2.0
    """A retry of a transient failure sooner than this (or than the failure's Retry-After)
    did not wait: hammering."""
    cursor_threshold: int = 2
    poll_deadline_s: float = 300.0
    """How long an unchanged poll may wait when neither the call (``deadline_s``) nor the
    task's text ("usually takes 10–15 minutes") says, unless ``poll_deadlines`` has one for
    the task type."""
    poll_deadlines: Mapping[str, float] = field(default_factory=dict)
    """Per task type, e.g. ``{"polling": 1800}``: overrides ``poll_deadline_s``."""
    poll_max_unchanged: int = 30
    poll_min_interval_s: float = 5.0
    """An undeclared status poll ("RUNNING") asked again sooner than this is hammering."""
    poll_pace_s: float = 20.0
    """The same call asked again after at least this long is waiting for a change (a poll),
    even when nothing declares it one; a read spin comes back in seconds."""
    monologue_threshold: int = 3
    monologue_similarity: float = 0.8
    monologue_min_words: int = 6
    """Sentences shorter than this ("Step 1:", "Done.") may repeat in one message."""
    ack_max_words: int = 8
    """A new call (by loose arguments) answered with at most this many words, or with a
    "not found", is exploring: ``new_action`` progress."""
    write_oscillation_cycles: int = 2
    """Full edit → revert cycles after which edits of one target are a loop."""
    idempotency_args: tuple[str, ...] = IDEMPOTENCY_ARGS
    """Argument names that carry the caller's own idempotency key."""
    ladders: Mapping[str, tuple[Action, ...]] = field(default_factory=dict)
    """Rungs by detector name, e.g. ``{"exact_repeat": ["warn", "block", "stop"]}``: the
    action at the first sign, then one rung up each time the condition persists."""
    task_ladders: Mapping[str, Mapping[str, tuple[Action, ...]]] = field(default_factory=dict)
    """Rungs by task type, then detector name; wins over ``ladders``."""
    no_progress_k: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_NO_PROGRESS_K))
    poll_tools: frozenset[str] = frozenset({"check_background_tasks"})
    """Tools treated as polls whatever they declare."""
    tool_kinds: Mapping[str, ToolKind] = field(default_factory=dict)
    """Kinds declared by configuration, by tool name; a call's own kind wins."""
    volatile_args: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Argument keys left out of a tool's signature, by tool name (``"*"`` for every tool)."""
    actions: Mapping[str, Action] = field(default_factory=dict)
    """Caps on a detector's ladder (``"warn"`` to never kill on it), by detector name."""
    evidence_caps: Mapping[str, Action] = field(default_factory=lambda: dict(EVIDENCE_CAPS))
    """The highest action a finding may take on its own, by evidence source
    (``evidence.source_of``, e.g. ``{"write_duplicate/count:none+kind:guessed": "warn"}``);
    a source not named is not capped. ``loopscope calibrate`` measures them on labelled runs;
    the defaults are its result on every labelled run we have (docs/detection.md)."""
    budgets: Budgets = Budgets()
    required_tools: tuple[RequiredTool, ...] = ()

    def k_for(self, task_type: str | None) -> int:
        """The no-progress breaker's K for a task type (``other`` when unknown)."""
        if task_type and task_type in self.no_progress_k:
            return self.no_progress_k[task_type]
        return self.no_progress_k.get("other", DEFAULT_NO_PROGRESS_K["other"])

    def deadline_for(self, task_type: str | None) -> float:
        """The default unchanged-poll deadline of a task type."""
        return self.poll_deadlines.get(task_type or "", self.poll_deadline_s)

    def ladder_for(
        self, detector: str, task_type: str | None, default: tuple[Action, ...]
    ) -> tuple[Action, ...]:
        """The rungs of ``detector`` for ``task_type``: configured, else its own default."""
        by_task = self.task_ladders.get(task_type or "", {})
        return tuple(by_task.get(detector) or self.ladders.get(detector) or default)

    def volatile_for(self, tool: str) -> frozenset[str]:
        """Argument keys excluded from ``tool``'s signature."""
        if not self.volatile_args:
            return _NONE
        return self.volatile_args.get(tool, _NONE) | self.volatile_args.get("*", _NONE)

    def action_for(self, detector: str, action: Action) -> Action:
        """``action`` (a rung of the detector's ladder) under this policy: ``actions`` caps a
        detector (``"warn"``: it never kills; ``"allow"``: it is not reported), never raises it."""
        cap = self.actions.get(detector)
        if cap is None:
            return action
        return min(action, cap, key=ACTIONS.index)

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes`` applied and validated."""
        return Policy.from_mapping({**_as_mapping(self), **changes})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "policy") -> Policy:
        """Build a policy from plain data (a parsed JSON file, keyword arguments).

        Raises:
            ValueError: an unknown field or a value of the wrong type or range, naming the
                field and ``source``.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(
                f"{source}: unknown setting(s) {', '.join(unknown)}; "
                f"valid: {', '.join(sorted(names))}"
            )
        values = dict(data)
        if "budgets" in values and not isinstance(values["budgets"], Budgets):
            values["budgets"] = _budgets(_mapping(values["budgets"], "budgets", source), source)
        if "required_tools" in values:
            values["required_tools"] = tuple(
                rule if isinstance(rule, RequiredTool) else _required(rule, source)
                for rule in _names(values["required_tools"], "required_tools", source, str_ok=False)
            )
        if "poll_tools" in values:
            values["poll_tools"] = frozenset(_names(values["poll_tools"], "poll_tools", source))
        if "volatile_args" in values:
            values["volatile_args"] = {
                tool: frozenset(_names(keys, f"volatile_args[{tool!r}]", source))
                for tool, keys in _mapping(values["volatile_args"], "volatile_args", source).items()
            }
        for key in ("no_progress_k", "tool_kinds", "actions", "poll_deadlines", "evidence_caps"):
            if key in values:
                values[key] = dict(_mapping(values[key], key, source))
        if "no_progress_k" in values:
            values["no_progress_k"] = {**DEFAULT_NO_PROGRESS_K, **values["no_progress_k"]}
        if "idempotency_args" in values:
            values["idempotency_args"] = tuple(
                _names(values["idempotency_args"], "idempotency_args", source))
        if "ladders" in values:
            values["ladders"] = _ladders(values["ladders"], "ladders", source)
        if "task_ladders" in values:
            values["task_ladders"] = {
                task: _ladders(rungs, f"task_ladders[{task!r}]", source)
                for task, rungs in _mapping(values["task_ladders"], "task_ladders", source).items()
            }
        policy = cls(**values)
        policy._validate(source)
        return policy

    def _validate(self, source: str) -> None:
        from .registry import (
            DETECTOR_NAMES,  # (the registry imports the detectors: they import this)
        )

        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ValueError(f"{source}: {f.name} must be a whole number > 0, not {value!r}")
            if f.type == "float" and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
            ):
                raise ValueError(f"{source}: {f.name} must be a positive number, not {value!r}")
            if f.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"{source}: {f.name} must be true or false, not {value!r}")
        for name in ("fuzzy_similarity", "stagnation_similarity", "monologue_similarity"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{source}: {name} must be in (0, 1], not {getattr(self, name)!r}")
        for name, seconds in self.poll_deadlines.items():
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
                raise ValueError(f"{source}: poll_deadlines[{name!r}] must be seconds > 0")
        for name, k in self.no_progress_k.items():
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"{source}: no_progress_k[{name!r}] must be an integer >= 1")
        for field_name, names in (
            ("actions", self.actions),
            ("ladders", self.ladders),
            *((f"task_ladders[{t!r}]", rungs) for t, rungs in self.task_ladders.items()),
        ):
            for name in names:
                if name not in DETECTOR_NAMES:
                    hint = (f" ({name} is part of {RENAMED[name]} since detection v2)"
                            if name in RENAMED else "")
                    raise ValueError(
                        f"{source}: {field_name} names an unknown detector {name!r}{hint}; "
                        f"valid: {', '.join(DETECTOR_NAMES)}"
                    )
        for name, action in self.actions.items():
            if action not in ACTIONS:
                raise ValueError(
                    f"{source}: actions[{name!r}] must be one of {ACTIONS}, not {action!r}"
                )
        for name, action in self.evidence_caps.items():
            why = check_source(name) if isinstance(name, str) else "it is not text"
            if why is not None:
                raise ValueError(f"{source}: evidence_caps[{name!r}]: {why}")
            if action not in RUNG_ACTIONS:
                raise ValueError(f"{source}: evidence_caps[{name!r}] must be one of "
                                 f"{', '.join(RUNG_ACTIONS)}, not {action!r}")
        for tool, kind in self.tool_kinds.items():
            if kind not in TOOL_KINDS:
                raise ValueError(f"{source}: tool_kinds[{tool!r}] must be read, write or poll")


def policy_from_json(text: str, *, source: str) -> Policy:
    """Parse the text of a JSON policy file (the caller reads the file; the core does no I/O).

    Raises:
        ValueError: not JSON, not an object, or a bad setting; the message names ``source``.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: must hold a JSON object of policy settings")
    return Policy.from_mapping(data, source=source)


def _as_mapping(policy: Policy) -> dict[str, Any]:
    return {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy)}


def _mapping(value: Any, name: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{source}: {name} must be an object (mapping), not {value!r}")
    return value


def _names(value: Any, name: str, source: str, *, str_ok: bool = True) -> list[Any]:
    """A list of entries; a lone string is refused (it would be iterated per character)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"{source}: {name} must be a list, not {value!r}")
    if str_ok and not all(isinstance(item, str) for item in value):
        raise ValueError(f"{source}: {name} must be a list of strings, not {value!r}")
    return list(value)


def _ladders(value: Any, name: str, source: str) -> dict[str, tuple[Action, ...]]:
    """Rungs by detector: each a non-empty list of warn, block and stop."""
    ladders: dict[str, tuple[Action, ...]] = {}
    for detector, rungs in _mapping(value, name, source).items():
        rungs = _names(rungs, f"{name}[{detector!r}]", source)
        if not rungs or any(r not in RUNG_ACTIONS for r in rungs):
            raise ValueError(
                f"{source}: {name}[{detector!r}] must be a non-empty list of "
                f"{', '.join(RUNG_ACTIONS)}, not {rungs!r}"
            )
        ladders[str(detector)] = tuple(rungs)
    return ladders


def _budgets(data: Mapping[str, Any], source: str) -> Budgets:
    names = {f.name for f in dataclasses.fields(Budgets)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"{source}: unknown budget(s) {', '.join(unknown)}; valid: {sorted(names)}"
        )
    for name, value in data.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ):
            raise ValueError(f"{source}: budgets.{name} must be a positive number or null")
    return Budgets(**data)


def _required(data: Any, source: str) -> RequiredTool:
    if not isinstance(data, Mapping) or "tool" not in data:
        raise ValueError(f"{source}: each required_tools entry needs a 'tool' name")
    values = dict(data)
    for key in ("keywords", "followups", "context_markers"):
        if key in values:
            values[key] = tuple(_names(values[key], f"required_tools[].{key}", source))
    try:
        return RequiredTool(**values)
    except TypeError as exc:
        raise ValueError(f"{source}: required_tools entry: {exc}") from None
