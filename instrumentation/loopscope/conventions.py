"""Span and attribute names, spelled once.

``gen_ai.*`` names follow the OpenTelemetry GenAI semantic conventions and are spelled here
rather than imported: the upstream Python module (``opentelemetry.semconv._incubating``) is
private and marks them as moved. Ours live under ``loopscope.*``. The collector reads the
same constants, so a rename cannot split the two sides.
"""

import os
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from .detect.episode_records import check_label

# -- OpenTelemetry GenAI semantic conventions -----------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_TYPE_FUNCTION: Final = "function"
"""``gen_ai.tool.type`` of every tool loopscope guards: a function the agent's code runs
(the conventions' other values, ``extension`` and ``datastore``, name tools run elsewhere)."""
GEN_AI_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
"""The event that carries one evaluation of a GenAI operation: loopscope adds one to a tool
span for every loop verdict (a detector's flag) on that call."""
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
"""A model call (``record_model_call``'s span, named ``chat {model}``)."""

# -- loopscope: the episode (root span) -----------------------------------------------------
EPISODE_ID: Final = "loopscope.episode.id"
"""Groups tool calls into one run; the collector falls back to the trace id."""
TASK: Final = "loopscope.task"
TASK_TYPE: Final = "loopscope.task_type"
LABEL_LOOP: Final = "loopscope.label.loop"
"""Ground truth of a scripted or evaluation run (the Episode format's ``label.loop``): the
collector's metrics use it as the *scenario* label source."""
LABEL_KIND: Final = "loopscope.label.kind"
LABEL_FIRST_LOOP_STEP: Final = "loopscope.label.first_loop_step"
OUTCOME: Final = "loopscope.outcome"
"""success | failure | unknown: whether the task was achieved (set by the agent)."""
STOP_REASON: Final = "loopscope.stop_reason"
"""completed | no_progress | repeated_tool_call | budget | timeout | aborted | fatal."""
STOP_DIAGNOSTIC: Final = "loopscope.stop.diagnostic"
"""The structured diagnostic of a stop, as JSON text."""
TOOL_CALLS: Final = "loopscope.tool_calls"
MODEL_TURNS: Final = "loopscope.model_turns"
NO_PROGRESS_STEPS: Final = "loopscope.no_progress_steps"
FLAG_COUNT: Final = "loopscope.flag_count"
COST_USD: Final = "loopscope.cost_usd"
GUARD_MODE: Final = "loopscope.guard.mode"
GUARD_POLICY: Final = "loopscope.guard.policy"
"""The policy the run's guard applied, as a policy file holds it (JSON: the settings that
differ from the defaults, ``{}`` for the defaults). The dashboard's Policy page starts from it."""

# -- loopscope: one tool call ---------------------------------------------------------------
STEP: Final = "loopscope.step"
"""0-based index of the step in its episode."""
CALL_ORDINAL: Final = "loopscope.call.ordinal"
"""1-based ordinal of the tool call in its episode, as the guard counts calls (messages not
included): call 1 is the run's first tool call. The number the agent's log, its stop
diagnostic (``call``) and the dashboard give a call, so a call whose span was lost on the way
leaves a gap ("calls 2–4 not received") instead of renumbering the calls after it."""
TOOL_KIND: Final = "loopscope.tool.kind"
TOOL_KIND_SOURCE: Final = "loopscope.tool.kind_source"
"""Where the kind came from: ``declared``, ``annotation`` (MCP), ``method`` (HTTP), ``name``
(the tool's name and arguments), or ``shape`` (the calls' evidence, e.g. a changing answer)."""
TOOL_DEADLINE_S: Final = "loopscope.tool.deadline_s"
"""A poll's own deadline in seconds, when the agent declared one (else the policy's)."""
TOOL_DEADLINE_STATED: Final = "loopscope.tool.deadline_stated"
"""Whether that deadline is an explicit limit (declared, "give up after 20 minutes": counted
from the first poll) or an estimate or default (counted from the last change)."""
TOOL_INTENT: Final = "loopscope.tool.intent"
"""``duplicate`` when the agent declared a repeated write intended (not flagged)."""
SIGNATURE: Final = "loopscope.tool.signature"
"""Hash of the tool name and canonical arguments: equal calls have equal signatures."""
ARGS_SIZE: Final = "loopscope.tool.args_size"
OUTPUT_HASH: Final = "loopscope.output.hash"
"""Hash of the model-visible output; always recorded, content or not."""
OUTPUT_SIZE: Final = "loopscope.output.size"
STATUS: Final = "loopscope.status"
"""ok | error | timeout | blocked."""
PROGRESS: Final = "loopscope.progress"
"""The step's progress marker, or ``none``; ``waiting`` for a poll before its deadline."""
STREAK: Final = "loopscope.no_progress.streak"
FLAGS: Final = "loopscope.flags"
"""Detector names that flagged this step."""
FLAG_KINDS: Final = "loopscope.flag.kinds"
FLAG_KIND: Final = "loopscope.flag.kind"
"""On a ``gen_ai.evaluation.result`` event: the kind of loop the detector saw."""
FLAG_EVIDENCE: Final = "loopscope.flag.evidence"
"""On the same event: the finding's evidence source (the detector and what it rests on,
``write_duplicate/kind:guessed+outcome:parsed``; docs/detection.md, "Evidence")."""
FLAG_CAPPED: Final = "loopscope.flag.capped"
"""On the same event, when true: the evidence held the finding below its rung's action."""
GUARD_ACTION: Final = "loopscope.guard.action"
"""What the guard did: allow | warn | block | stop (observe mode: always allow)."""
GUARD_DECISION: Final = "loopscope.guard.decision"
"""What the policy decided (in observe mode: what enforce would have done)."""
GUARD_REASON: Final = "loopscope.guard.reason"
GUARD_CORRECTION: Final = "loopscope.guard.correction"
IDEMPOTENCY_KEY: Final = "loopscope.idempotency_key"
WRITE_STATUS: Final = "loopscope.write.status"
"""ok | error | unknown (a timed-out write: reconcile before retrying)."""
CONTENT_CAPTURED: Final = "loopscope.content_captured"
RECONCILE_KEY: Final = "loopscope.reconcile.key"
RECONCILE_FOUND: Final = "loopscope.reconcile.found"
"""On a ``reconcile`` span, and on a tool span that looks an UNKNOWN write up (``reconciles=``):
the write's idempotency key or call id, and whether the record was found."""
RECONCILED: Final = "loopscope.reconciled"
"""On a tool span: the UNKNOWN writes (idempotency keys) the guard saw this call look up."""
TURN: Final = "loopscope.turn"
"""The user turn a tool call belongs to (1 = the task): a new turn starts a new intent."""

# -- loopscope: one message -----------------------------------------------------------------
MESSAGE_ROLE: Final = "loopscope.message.role"
"""On a ``message`` span (``Episode.record_message``): user | assistant | system. With
``loopscope.step``, ``loopscope.turn`` and, when the guard flagged it, the guard's keys."""
MESSAGE_CONTENT: Final = "loopscope.message.content"
"""The message's text, when content capture is on (as tool arguments and results)."""
MESSAGE_HASH: Final = "loopscope.message.hash"
"""Hash of the message's text; always recorded, content or not."""
OP_MESSAGE: Final = "message"
"""The name of a message span is ``message {role}``."""


def label_attributes(label: Mapping[str, Any] | None) -> dict[str, Any]:
    """The root-span attributes of a run's ground-truth label (docs/episode-format.md ``label``:
    ``{"loop": bool, "kind": str, "first_loop_step": int}``, the last two optional; ``why``
    is not recorded). A label whose ``loop`` is missing or null says nothing: no attributes.

    Raises:
        ValueError: a field has the wrong type, named in the message.
    """
    label = check_label(label)
    if label.get("loop") is None:
        return {}
    attributes: dict[str, Any] = {LABEL_LOOP: label["loop"]}
    if label.get("kind") is not None:
        attributes[LABEL_KIND] = label["kind"]
    if label.get("first_loop_step") is not None:
        attributes[LABEL_FIRST_LOOP_STEP] = label["first_loop_step"]
    return attributes


def tool_span_attributes(
    *,
    tool: str,
    episode_id: str,
    step: int,
    signature: str,
    args_text: str,
    arguments: str | None,
    call: int | None = None,
    call_id: str | None = None,
    kind: str | None = None,
    kind_source: str | None = None,
    turn: int | None = None,
    deadline_s: float | None = None,
    deadline_stated: bool | None = None,
    intent: str | None = None,
    reconciles: str | None = None,
    found: bool | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """The attributes a tool call's span starts with, as loopscope writes them: the SDK for a
    live call (``loopscope._call``), the collector for a recorded one
    (``loopscope_collector.runs.synthetic_spans``). ``arguments`` is the text recorded as
    the call's arguments, ``None`` when content is not captured; ``args_text`` is what the
    size counts; ``call`` the call's 1-based ordinal among the run's tool calls. Empty optional
    values are left out."""
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: OP_EXECUTE_TOOL,
        GEN_AI_TOOL_NAME: tool,
        GEN_AI_TOOL_TYPE: GEN_AI_TOOL_TYPE_FUNCTION,
        EPISODE_ID: episode_id,
        STEP: step,
        SIGNATURE: signature,
        ARGS_SIZE: len(args_text),
        CONTENT_CAPTURED: arguments is not None,
    }
    if call is not None:
        attributes[CALL_ORDINAL] = call
    if call_id:
        attributes[GEN_AI_TOOL_CALL_ID] = call_id
    if kind:
        attributes[TOOL_KIND] = kind
        if kind_source:
            attributes[TOOL_KIND_SOURCE] = kind_source
    if turn:
        attributes[TURN] = turn
    if deadline_s is not None:
        attributes[TOOL_DEADLINE_S] = float(deadline_s)
        attributes[TOOL_DEADLINE_STATED] = bool(deadline_stated)
    if intent:
        attributes[TOOL_INTENT] = intent
    if reconciles:
        attributes[RECONCILE_KEY] = reconciles
        if found is not None:
            attributes[RECONCILE_FOUND] = bool(found)
    if idempotency_key:
        attributes[IDEMPOTENCY_KEY] = idempotency_key
    if arguments is not None:
        attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = arguments
    return attributes


def tool_result_attributes(
    *, status: str, output_hash: str, output: str | None, result: str | None
) -> dict[str, Any]:
    """The attributes a tool call's span gets from its result, as ``tool_span_attributes``'
    writers record them: ``output`` is what the size counts, ``result`` the text recorded as
    the result (``None`` when content is not captured or there was none)."""
    attributes: dict[str, Any] = {
        STATUS: status,
        OUTPUT_HASH: output_hash,
        OUTPUT_SIZE: len(output or ""),
    }
    if result is not None:
        attributes[GEN_AI_TOOL_CALL_RESULT] = result
    return attributes


# -- loopscope: the SDK's export report ------------------------------------------------------
EXPORT_REPORT: Final = "loopscope.export_report"
"""The name of the span loopscope's exporter adds to the next batch it sends after spans were
dropped: the process's own counts (docs/agent-export.md, "What reaches the collector")."""
SERVICE_INSTANCE_ID: Final = "service.instance.id"
"""OpenTelemetry's resource attribute naming one process of a service (a UUID)."""
SDK_SPANS_STARTED: Final = "loopscope.sdk.span.started"
"""Spans started in the process (OpenTelemetry's ``otel.sdk.span.started``), cumulative."""
SDK_SPANS_EXPORTED: Final = "loopscope.sdk.span.exported"
"""Spans the collector acknowledged (``otel.sdk.exporter.span.exported`` without
``error.type``), cumulative, up to the batch before the report's."""
SDK_SPANS_DROPPED: Final = "loopscope.sdk.span.dropped."
"""Prefix of the cumulative counts of spans dropped, one per reason in ``DROP_REASONS``."""
DROP_REASONS: Final = ("unreachable", "throttled", "timed_out", "rejected", "queue_full",
                       "at_exit")
"""Why a span was dropped (``export_stats()``'s ``dropped_*`` without the prefix). They are
OpenTelemetry's ``error.type`` values of ``otel.sdk.exporter.span.exported`` (the first four),
and of ``otel.sdk.processor.span.processed`` (``queue_full``; ``at_exit`` is its
``already_shutdown``)."""
SDK_INCOMPLETE_RUNS: Final = "loopscope.sdk.incomplete_runs"
"""The runs (``loopscope.episode.id``) that lost spans since the last report got through."""
SDK_INCOMPLETE_RUNS_DROPPED: Final = "loopscope.sdk.incomplete_runs.dropped"
"""How many spans each of those runs lost, in the same order."""


# -- which version of the GenAI conventions -------------------------------------------------
OTEL_SEMCONV_STABILITY_OPT_IN: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
"""The OpenTelemetry variable that picks a convention version: a comma-separated list in
which ``gen_ai_latest_experimental`` asks for the latest experimental GenAI conventions."""
GEN_AI_LATEST_EXPERIMENTAL: Final = "gen_ai_latest_experimental"


def gen_ai_latest_experimental(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai_latest_experimental``."""
    values = environ.get(OTEL_SEMCONV_STABILITY_OPT_IN, "")
    return GEN_AI_LATEST_EXPERIMENTAL in {v.strip().lower() for v in values.split(",")}


class LoopVerdict(Protocol):
    """What ``evaluation_events`` reads of a detector's flag (``loopscope.detect.Flag``)."""

    @property
    def detector(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def rung(self) -> int: ...
    @property
    def evidence(self) -> str: ...
    @property
    def capped(self) -> bool: ...


def evaluation_events(flags: Iterable[LoopVerdict]) -> list[tuple[str, dict[str, Any]]]:
    """One ``gen_ai.evaluation.result`` event (name, attributes) per loop verdict on a call:
    the evaluation is the detector (``loopscope.exact_repeat``), its score label what the
    policy does there in enforce mode (``warn``, ``block`` or ``stop``; in observe and warn
    mode what enforce *would* do), its score the ladder rung (0 at the first sign), its
    explanation the detector's message; the evidence source beside it."""
    return [(GEN_AI_EVALUATION_RESULT, {
        GEN_AI_EVALUATION_NAME: f"loopscope.{flag.detector}",
        GEN_AI_EVALUATION_SCORE_LABEL: flag.action,
        GEN_AI_EVALUATION_SCORE_VALUE: float(flag.rung),
        GEN_AI_EVALUATION_EXPLANATION: flag.message,
        FLAG_KIND: flag.kind,
        FLAG_EVIDENCE: flag.evidence,
        **({FLAG_CAPPED: True} if flag.capped else {}),
    }) for flag in flags]
