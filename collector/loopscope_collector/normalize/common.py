"""What every convention reader shares: content parsing, status, episode ids, the row builder.

A reader (``loopscope_spans``, ``genai``, ``frameworks``) finds
the tool name, call id, raw arguments and raw output in its own attributes and hands them to
``tool_row``, which applies the rules common to all of them:

- arguments: a structured value is used as it is; a JSON string is parsed (a Python-literal
  dict, as LangChain's ``str(tool_input)`` writes it, too); any other string becomes
  ``{"input": string}``; an empty string is ``{}``. ``args_text`` is the canonical JSON, so
  the same call has the same text whichever instrumentation reported it. No signature is
  computed here: the detection core computes it from the arguments, under the policy
  (volatile arguments left out), and the verdict carries it to the store.
- output: a string is the model-visible text as it is; a structured value goes through
  ``output_text``. ``output_hash`` hashes that text.
- no content at all (neither arguments nor output): ``content_captured`` is False and
  hash stays ``""``; nothing is guessed. Output without arguments means a call
  without arguments (``{}``); arguments without output leave the hash empty.

Only the standard library, ``loopscope.detect.fingerprint`` and ``loopscope.conventions`` are
imported here (the collector never loads the agent-side runtime).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Final

from loopscope import conventions as c
from loopscope.detect.fingerprint import canonical_json, output_hash, output_text

from .rows import ToolCallRow
from .spans import SpanRecord
from .typed_attributes import typed_int

MISSING: Final[Any] = object()
"""An attribute that is absent, as opposed to present and empty."""

STATUS_ERROR: Final = 2
KIND_SERVER: Final = 2
KIND_CLIENT: Final = 3

SESSION_ID: Final = "session.id"
ERROR_TYPE: Final = "error.type"
ASSOCIATION: Final = "traceloop.association.properties."
_EPISODE_KEYS: Final = (
    c.EPISODE_ID,
    c.GEN_AI_CONVERSATION_ID,
    SESSION_ID,
    ASSOCIATION + "session_id",
    ASSOCIATION + "thread_id",
    ASSOCIATION + "conversation_id",
)
_TIMEOUT: Final = re.compile(r"time ?out|timed out|deadline[ _]exceeded", re.IGNORECASE)
_LITERAL_LIMIT: Final = 20_000
"""Longest text tried with ``ast.literal_eval``: bounded work on any span."""


def first(attrs: dict[str, Any], *keys: str) -> Any:
    """The value of the first of ``keys`` present in ``attrs``, else ``MISSING``."""
    for key in keys:
        value = attrs.get(key, MISSING)
        if value is not MISSING and value is not None:
            return value
    return MISSING


def text(value: Any) -> str | None:
    """A non-empty string attribute (numbers as text), else ``None``."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def as_int(value: Any, *, bits: int = 64) -> int | None:
    """An integer attribute (also from a float or a numeric string) that a signed ``bits``-bit
    column can hold, else ``None``: a value the store cannot hold is ignored like any other
    unreadable attribute (the span keeps it as sent)."""
    if isinstance(value, bool):
        return None
    number: int | None = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            return None
    if number is None or not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        return None
    return number


def as_float(value: Any) -> float | None:
    """A numeric attribute as float, else ``None``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def suffix(name: str, prefix: str) -> str | None:
    """``name`` without ``prefix``, when it has it and something follows."""
    if name.startswith(prefix) and len(name) > len(prefix):
        return name[len(prefix) :].strip() or None
    return None


def loads(value: Any) -> Any:
    """``value`` decoded when it is a JSON object or array in a string; else ``value``."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return json.loads(stripped)
            except ValueError:
                return value
    return value


def parse_args(raw: Any) -> Any:
    """Tool arguments as data: JSON and Python-literal text parsed, other text wrapped."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str):
        return raw
    stripped = raw.strip()
    if not stripped:
        return {}
    head = stripped[0]
    if head == '"':  # a JSON string holding JSON (double-encoded)
        try:
            inner = json.loads(stripped)
        except ValueError:
            return {"input": raw}
        if isinstance(inner, str) and inner.strip()[:1] in ("{", "["):
            return parse_args(inner)
        return {"input": inner}
    if head in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
        if len(stripped) <= _LITERAL_LIMIT:
            try:
                value = ast.literal_eval(stripped)  # LangChain's str(dict): single quotes
            except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError...
                value = None
            if isinstance(value, dict | list):
                return value
    return {"input": raw}


def episode_id(attrs: dict[str, Any]) -> str:
    """``loopscope.episode.id``, else the conversation / session / thread id, else ``""``."""
    for key in _EPISODE_KEYS:
        value = text(attrs.get(key))
        if value:
            return value
    return ""


def span_status(span: SpanRecord) -> tuple[str, str | None]:
    """``(status, error_message)``: ``ok``, ``error`` or ``timeout``.

    A span is an error when its status is ERROR or it carries ``error.type``; it is a timeout
    when the error type, the status message or a recorded exception says so.
    """
    error_type = text(span.attributes.get(ERROR_TYPE))
    if span.status_code != STATUS_ERROR and not error_type:
        return "ok", None
    clues = [span.status_message, error_type or ""]
    exception = ""
    for event in span.events:
        if event.name == "exception":
            kind = text(event.attributes.get("exception.type")) or ""
            message = text(event.attributes.get("exception.message")) or ""
            clues += (kind, message)
            exception = exception or (f"{kind}: {message}" if kind and message else kind or message)
    status = "timeout" if any(_TIMEOUT.search(clue) for clue in clues if clue) else "error"
    return status, span.status_message or exception or error_type


def tool_row(
    span: SpanRecord,
    convention: str,
    tool: str,
    *,
    call_id: Any = None,
    args: Any = MISSING,
    output: Any = MISSING,
    agent: Any = None,
) -> ToolCallRow:
    """The ``ToolCallRow`` of one tool span, its content read by the shared rules.

    Args:
        span: The span.
        convention: Which instrumentation the row was read from.
        tool: The tool name.
        call_id: The model's tool call id, when the span carries one.
        args: The raw arguments (string or structured), or ``MISSING``.
        output: The raw output (string or structured), or ``MISSING``.
        agent: The agent name, when the span carries one.
    """
    attrs = span.attributes
    status, error_message = span_status(span)
    row = ToolCallRow(
        trace_id=span.trace_id,
        span_id=span.span_id,
        episode_id=episode_id(attrs),
        service=span.service_name,
        tool=tool,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        convention=convention,
        call_id=text(call_id),
        parent_span_id=span.parent_span_id,
        agent=text(agent) or text(attrs.get(c.GEN_AI_AGENT_NAME)),
        model=text(attrs.get(c.GEN_AI_REQUEST_MODEL)),
        status=status,
        error_message=error_message,
        tokens_in=typed_int(attrs, c.GEN_AI_USAGE_INPUT_TOKENS) or 0,
        tokens_out=typed_int(attrs, c.GEN_AI_USAGE_OUTPUT_TOKENS) or 0,
        cost_usd=as_float(attrs.get(c.COST_USD)),
    )
    if args is not MISSING or output is not MISSING:
        row.args_text = canonical_json({} if args is MISSING else parse_args(args))
        row.content_captured = True
    if output is not MISSING:
        set_output(row, output if isinstance(output, str) else output_text(output))
    return row


def set_output(row: ToolCallRow, shown: str) -> None:
    """Record the model-visible output text, its hash and size on ``row``."""
    row.output_text = shown
    row.output_hash = output_hash(shown)
    row.output_size = len(shown)
    row.content_captured = True


def tool_message(value: Any) -> tuple[Any, str | None] | None:
    """``(content, tool_call_id)`` of a LangChain ``ToolMessage``, serialised or dumped.

    Recognises ``to_json()`` output (``{"lc": 1, "kwargs": {"content": ...}}``) and
    ``model_dump()`` output (``{"type": "tool", "content": ..., "tool_call_id": ...}``).
    """
    if not isinstance(value, dict):
        return None
    fields = value.get("kwargs") if "lc" in value else value
    if not isinstance(fields, dict) or "content" not in fields:
        return None
    if "lc" not in value and fields.get("type") != "tool" and "tool_call_id" not in fields:
        return None
    return fields["content"], text(fields.get("tool_call_id"))
