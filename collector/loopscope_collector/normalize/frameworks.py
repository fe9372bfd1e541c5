"""Tool spans of OpenInference, OpenLLMetry (Traceloop) and Logfire / the OpenAI Agents SDK.

- OpenInference: ``openinference.span.kind == "TOOL"`` with ``tool.name``, ``input.value``,
  ``output.value`` and ``tool_call.id``. A redacted payload (``__REDACTED__``) counts as not
  captured. A root AGENT or CHAIN span with a ``session.id`` or ``agent.name`` is the episode.
- OpenLLMetry: ``traceloop.span.kind == "tool"`` with ``traceloop.entity.name``,
  ``traceloop.entity.input`` and ``traceloop.entity.output``. The LangChain callback wraps
  them: input as ``{"input_str", "tags", "metadata", "inputs", "kwargs"}`` (chains:
  ``{"inputs", ...}``), output as ``{"output" | "outputs", "kwargs"}``, often holding a
  serialised ``ToolMessage``; the SDK's ``@tool`` decorator writes ``{"args", "kwargs"}``.
  Each is unwrapped to the arguments the tool received and the content the model saw. A root
  ``workflow`` or ``agent`` span is the episode.
- Logfire's OpenAI Agents integration: span ``Function: {name}`` (the message template is the
  span name) with ``name``, ``input`` and ``output`` attributes; the agents SDK's own
  processors' ``openai_agents.span_type == "function"`` spans are read leniently
  (``openai_agents.name`` / ``.input`` / ``.output``, then ``gen_ai.*``). Logfire's
  pending-span copies are skipped: the real span follows.
"""

from __future__ import annotations

from typing import Any, Final

from loopscope import conventions as c

from .common import MISSING, first, loads, suffix, text, tool_message, tool_row
from .genai import agent_episode
from .rows import Normalized
from .spans import SpanRecord

OPENINFERENCE: Final = "openinference"
OPENLLMETRY: Final = "openllmetry"
OPENAI_AGENTS: Final = "openai_agents"
OI_KIND: Final = "openinference.span.kind"
TRACELOOP_KIND: Final = "traceloop.span.kind"
AGENTS_KIND: Final = "openai_agents.span_type"
LOGFIRE_TEMPLATE: Final = "logfire.msg_template"
FUNCTION_PREFIX: Final = "Function: "
_REDACTED: Final = "__REDACTED__"
_LANGCHAIN_KEYS: Final = frozenset({"inputs", "tags", "metadata", "kwargs", "input_str"})


# -- OpenInference -------------------------------------------------------------------------


def read_openinference(span: SpanRecord, kind: Any) -> Normalized:
    """A TOOL span's tool call, or a root AGENT / CHAIN span's episode."""
    attrs = span.attributes
    if kind == "TOOL":
        args = _unredacted(first(attrs, "input.value"))
        if args is MISSING:
            args = first(attrs, "tool_call.function.arguments", c.GEN_AI_TOOL_CALL_ARGUMENTS)
        output = _unredacted(first(attrs, "output.value"))
        if output is MISSING:
            output = first(attrs, c.GEN_AI_TOOL_CALL_RESULT)
        call_id = first(attrs, "tool_call.id", c.GEN_AI_TOOL_CALL_ID, "tool.id")
        if isinstance(output, str) and '"tool_call_id"' in output:  # a dumped ToolMessage
            unwrapped = tool_message(loads(output))
            if unwrapped is not None:
                output, message_call_id = unwrapped
                call_id = message_call_id if call_id is MISSING else call_id
        tool = (
            text(first(attrs, "tool.name", "tool_call.function.name", c.GEN_AI_TOOL_NAME))
            or span.name
        )
        row = tool_row(
            span,
            OPENINFERENCE,
            tool,
            call_id=None if call_id is MISSING else call_id,
            args=args,
            output=output,
            agent=attrs.get("agent.name"),
        )
        return Normalized(tool_call=row)
    if (
        kind in ("AGENT", "CHAIN")
        and not span.parent_span_id
        and ("session.id" in attrs or "agent.name" in attrs)
    ):
        return Normalized(episode=agent_episode(span, OPENINFERENCE, attrs.get("agent.name")))
    return Normalized()


def _unredacted(value: Any) -> Any:
    return MISSING if value == _REDACTED else value


# -- OpenLLMetry ---------------------------------------------------------------------------


def read_openllmetry(span: SpanRecord, kind: Any) -> Normalized:
    """A ``tool`` span's tool call, or a root ``workflow`` / ``agent`` span's episode."""
    attrs = span.attributes
    if kind == "tool":
        call_ids: list[Any] = [first(attrs, c.GEN_AI_TOOL_CALL_ID)]
        args = first(attrs, "traceloop.entity.input")
        if args is not MISSING:
            args = _traceloop_input(args, call_ids)
        output = first(attrs, "traceloop.entity.output")
        if output is not MISSING:
            output = _traceloop_output(output, call_ids)
        name = span.name
        tool = text(first(attrs, "traceloop.entity.name", c.GEN_AI_TOOL_NAME)) or (
            name.removesuffix(".tool") or name
        )
        call_id = next((text(i) for i in call_ids if text(i)), None)
        row = tool_row(span, OPENLLMETRY, tool, call_id=call_id, args=args, output=output)
        return Normalized(tool_call=row)
    if kind in ("workflow", "agent") and not span.parent_span_id:
        agent = first(attrs, "traceloop.entity.name", "traceloop.workflow.name")
        return Normalized(
            episode=agent_episode(span, OPENLLMETRY, None if agent is MISSING else agent)
        )
    return Normalized()


def _traceloop_input(raw: Any, call_ids: list[Any]) -> Any:
    """The tool's own arguments from ``traceloop.entity.input``."""
    data = loads(raw)
    if not isinstance(data, dict):
        return raw
    keys = data.keys()
    if "input_str" in data and keys <= _LANGCHAIN_KEYS:  # LangChain on_tool_start
        kwargs = data.get("kwargs")
        if isinstance(kwargs, dict):
            call_ids.append(kwargs.get("tool_call_id"))
        inputs = data.get("inputs")
        if isinstance(inputs, dict) and inputs:
            return inputs
        return data["input_str"] if data["input_str"] is not None else {}
    if "inputs" in data and keys <= _LANGCHAIN_KEYS:  # LangChain on_chain_start
        return data["inputs"]
    if keys == {"args", "kwargs"}:  # traceloop.sdk's @tool / @task decorators
        positional, named = data["args"], data["kwargs"]
        return named if not positional and isinstance(named, dict) else data
    return raw


def _traceloop_output(raw: Any, call_ids: list[Any]) -> Any:
    """What the model saw, from ``traceloop.entity.output``: unwrapped, else as it is."""
    data = loads(raw)
    if not isinstance(data, dict):
        return raw
    keys = data.keys()
    if "output" in data and keys <= {"output", "kwargs"}:
        value = data["output"]
    elif "outputs" in data and keys <= {"outputs", "kwargs"}:
        value = data["outputs"]
    else:
        return raw
    value = loads(value) if isinstance(value, str) and '"tool_call_id"' in value else value
    message = tool_message(value)
    if message is None:
        return value
    call_ids.append(message[1])
    return message[0]


# -- Logfire / OpenAI Agents SDK -------------------------------------------------------------


def is_agents_function(span: SpanRecord) -> bool:
    """Whether the span is an OpenAI Agents SDK function (tool) span."""
    attrs = span.attributes
    return (
        span.name.startswith(FUNCTION_PREFIX)
        or attrs.get(LOGFIRE_TEMPLATE) == "Function: {name}"
        or attrs.get(AGENTS_KIND) == "function"
    )


def read_openai_agents(span: SpanRecord) -> Normalized:
    """The tool call of a Logfire ``Function: {name}`` or agents-SDK ``function`` span."""
    attrs = span.attributes
    if attrs.get("logfire.span_type") == "pending_span":
        return Normalized()
    tool = (
        text(first(attrs, "name", "openai_agents.name", c.GEN_AI_TOOL_NAME))
        or suffix(text(attrs.get("logfire.msg")) or "", FUNCTION_PREFIX)
        or suffix(span.name, FUNCTION_PREFIX)
        or span.name
    )
    if tool == "{name}":
        return Normalized()
    row = tool_row(
        span,
        OPENAI_AGENTS,
        tool,
        call_id=attrs.get(c.GEN_AI_TOOL_CALL_ID),
        args=first(attrs, "input", "openai_agents.input", c.GEN_AI_TOOL_CALL_ARGUMENTS),
        output=first(attrs, "output", "openai_agents.output", c.GEN_AI_TOOL_CALL_RESULT),
    )
    return Normalized(tool_call=row)
