"""Episode JSONL records: a line parsed and checked (``parse_episode``: an error names the
field), and a record's steps as the core takes them (``episode_steps``). No file access here:
the CLI, the evaluation and the collector's import read the text and hand it over.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .events import STATUSES, TOOL_KINDS, Status, ToolCall, ToolResult
from .fingerprint import output_text
from .steps import MessageStep, Step, ToolStep, recorded_call

_STATUSES: Final[dict[str | None, Status]] = {None: "ok", **{s: s for s in STATUSES}}
_KINDS: Final = (None, *TOOL_KINDS)
COST_KEYS: Final = ("agent_cost_usd", "cost_usd", "accumulated_cost_usd", "instance_cost_usd")


class EpisodeFormatError(ValueError):
    """A record that is not a valid Episode; the message names the field."""


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """One recorded run, as a line of Episode JSONL holds it (docs/episode-format.md). Not the
    SDK's ``loopscope.Episode``, which is a run in progress."""

    episode_id: str
    steps: tuple[Mapping[str, Any], ...]
    task_type: str | None = None
    outcome: str | None = None
    label: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    task: str = ""

    @property
    def loop_label(self) -> bool | None:
        """Ground truth: True stuck, False legitimate, None unlabelled."""
        value = self.label.get("loop") if isinstance(self.label, Mapping) else None
        return value if isinstance(value, bool) else None

    @property
    def cost_usd(self) -> float | None:
        """The agent's recorded cost, if the source recorded one."""
        for key in COST_KEYS:
            value = self.meta.get(key)
            if isinstance(value, NUMBERS) and not isinstance(value, bool):
                return float(value)
        return None


def parse_episode(record: Any) -> EpisodeRecord:
    """Validate one decoded JSON record as an Episode.

    Raises:
        EpisodeFormatError: naming the first field that is missing or of the wrong type.
    """
    if not isinstance(record, dict):
        raise EpisodeFormatError(f"an episode must be a JSON object, not {type(record).__name__}")
    episode_id = record.get("episode_id")
    if not isinstance(episode_id, str) or not episode_id:
        raise EpisodeFormatError("episode_id: missing or not a non-empty string")
    steps = record.get("steps")
    if not isinstance(steps, list):
        raise EpisodeFormatError(f"{episode_id}: steps: missing or not a list")
    for i, step in enumerate(steps):
        _check_step(episode_id, i, step)
    try:
        label = check_label(record.get("label"))
    except EpisodeFormatError as exc:
        raise EpisodeFormatError(f"{episode_id}: {exc}") from None
    meta = record.get("meta") or {}
    task = record.get("task")
    return EpisodeRecord(
        episode_id=episode_id,
        steps=tuple(steps),
        task_type=record.get("task_type") if isinstance(record.get("task_type"), str) else None,
        outcome=record.get("outcome") if isinstance(record.get("outcome"), str) else None,
        label=label,
        meta=meta if isinstance(meta, dict) else {},
        task=task if isinstance(task, str) else "",
    )


def check_label(label: Any) -> dict[str, Any]:
    """A run's ground-truth ``label``, checked: ``loop`` True, False or null; ``kind`` a
    string or null; ``first_loop_step`` a step index (int >= 0) or null. Other keys (``why``)
    pass through. None is an empty label.

    Raises:
        EpisodeFormatError: naming the field of the wrong type.
    """
    if label is None:
        return {}
    if not isinstance(label, Mapping):
        raise EpisodeFormatError(f"label: must be an object like {{'loop': true}}, not {label!r}")
    loop, kind, first = label.get("loop"), label.get("kind"), label.get("first_loop_step")
    if loop is not None and not isinstance(loop, bool):
        raise EpisodeFormatError(f"label.loop: must be true, false or null, not {loop!r}")
    if kind is not None and not isinstance(kind, str):
        raise EpisodeFormatError(f"label.kind: must be a string or null, not {kind!r}")
    if first is not None and (isinstance(first, bool) or not isinstance(first, int)
                              or first < 0):
        raise EpisodeFormatError(
            f"label.first_loop_step: must be a step index (an int >= 0) or null, not {first!r}")
    return dict(label)


def parse_episode_line(line: str) -> EpisodeRecord:
    """Decode and validate one JSONL line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EpisodeFormatError(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    return parse_episode(record)


def _check_step(episode_id: str, i: int, step: Any) -> None:
    where = f"{episode_id}: steps[{i}]"
    if not isinstance(step, dict):
        raise EpisodeFormatError(f"{where}: not an object")
    kind = step.get("type")
    if kind == "tool":
        if not isinstance(step.get("tool"), str) or not step["tool"]:
            raise EpisodeFormatError(f"{where}.tool: missing or not a string")
        if step.get("status") not in _STATUSES:
            raise EpisodeFormatError(
                f"{where}.status: {step.get('status')!r} is not {', '.join(STATUSES)} or null"
            )
        if step.get("kind") not in _KINDS:
            raise EpisodeFormatError(
                f"{where}.kind: {step.get('kind')!r} is not {', '.join(TOOL_KINDS)} or null"
            )
    elif kind == "message":
        if step.get("role") not in ("user", "assistant", "system"):
            raise EpisodeFormatError(f"{where}.role: {step.get('role')!r} is not user or assistant")
    else:
        raise EpisodeFormatError(f"{where}.type: {kind!r} is not 'tool' or 'message'")


def episode_steps(episode: EpisodeRecord, first_t: float = 0.0) -> Iterator[Step]:
    """The steps of a recorded episode as the core takes them, one at a time (a step is
    read when it is fed). A step without a time ``t`` happened when the one before it did
    (the first: at ``first_t``)."""
    t = first_t
    for index, step in enumerate(episode.steps):
        get = step.get
        at = get("t")
        if isinstance(at, NUMBERS):
            t = float(at)
        if get("type") == "message":
            yield MessageStep(
                str(get("role", "")), str(get("content") or ""), t,
                _int(get("tokens_in")) + _int(get("tokens_out")), True)
            continue
        call_id = get("tool_call_id")
        call_id = str(call_id) if call_id else f"step-{index}"
        output = get("output")
        took = get("duration_s")
        yield ToolStep(_tool_call(step, call_id, t), ToolResult(
            None if output is None else output_text(output),
            _text(get("output_hash")),
            _STATUSES[get("status")],
            call_id,
            t,
            _int(get("tokens_in")),
            _int(get("tokens_out")),
        ), t + took if isinstance(took, NUMBERS) and took > 0 else None)


NUMBERS: Final = (int, float)
"""The types a number in a record may have (JSON gives int or float)."""


def _tool_call(step: Mapping[str, Any], call_id: str, t: float) -> ToolCall:
    get = step.get
    args, signature, args_text = get("args"), _text(get("signature")), get("args_text")
    if not isinstance(args_text, str):
        args_text = None
    if args is None and args_text is None and not signature:
        args = {}  # (a step without arguments or a recorded signature called the tool with none)
    occasional: dict[str, Any] = {}
    if not _OCCASIONAL.isdisjoint(step):  # (most steps record none of them: defaults stand)
        deadline, intent, found, stated = (
            get("deadline_s"), get("intent"), get("found"), get("deadline_stated"))
        occasional = {
            "intent": intent if isinstance(intent, str) else None,
            "idempotency_key": get("idempotency_key") or None,
            "reconciles": get("reconciles") or None,
            "found": found if isinstance(found, bool) else None,
            "deadline_s": float(deadline) if isinstance(deadline, NUMBERS) else None,
            "deadline_stated": stated if isinstance(stated, bool) else None,
            "turn": _int(get("turn")) or None,
        }
    return recorded_call(step["tool"], args=args, args_text=args_text, signature=signature,
                         unique=call_id, call_id=call_id, kind=get("kind"), t=t, **occasional)


_OCCASIONAL: Final = frozenset(
    ["intent", "idempotency_key", "reconciles", "found", "deadline_s", "deadline_stated", "turn"]
)
"""Step fields only some calls carry (docs/episode-format.md): read when a step has one."""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    if value is None or type(value) is int:  # the common cases, first
        return value or 0
    return int(value) if isinstance(value, NUMBERS) and not isinstance(value, bool) else 0
