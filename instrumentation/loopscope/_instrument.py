"""``loopscope.instrument()``: the one call a user makes. It configures this process
(``_config.configure``: settings, joining or creating an OpenTelemetry provider) and then
instruments the agent frameworks it finds installed (``integrations``). Kept apart from
``_config`` because the integrations themselves read the settings ``_config`` holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from ._config import Options, Settings, configure
from .integrations import instrument_frameworks

__all__ = ["instrument"]


def instrument(*, frameworks: Sequence[str] | None = None, **options: Unpack[Options]
               ) -> Settings:
    """Connect this process to loopscope. Call once, early; calling again updates settings.

    Creates an OpenTelemetry ``TracerProvider`` with an OTLP/HTTP exporter, or joins the
    existing one (adding one span processor). It adds no exporter where the process already
    decides where spans go: a provider that already has span processors (yours), or
    ``$OTEL_TRACES_EXPORTER=none`` (an ``endpoint`` argument adds one all the same); the guard
    works either way. Safe to call twice: the second call changes settings and never adds a
    second processor. docs/agent-export.md says what the exporter does when the collector is
    down, busy or slow, and what ``loopscope.export_stats()`` counts.

    Args:
        service_name: ``service.name`` of a provider loopscope creates. Defaults to
            ``$OTEL_SERVICE_NAME``, then ``"agent"``.
        endpoint: Collector base URL (``/v1/traces`` is appended). Defaults to
            ``$LOOPSCOPE_ENDPOINT``, then ``$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as
            is), then ``$OTEL_EXPORTER_OTLP_ENDPOINT``, then ``http://127.0.0.1:4318``. Passed
            here, it also adds loopscope's exporter where it would add none (above).
        mode: ``"observe"`` (record what the guard would do), ``"warn"`` (inject the
            correction into the tool result) or ``"enforce"`` (block repeated reads, raise
            ``LoopDetected`` on a stop). Defaults to ``$LOOPSCOPE_MODE``, then ``"observe"``.
        policy: A ``loopscope.detect.Policy``, a mapping of its fields, or the path of a JSON
            file of them. Defaults to ``$LOOPSCOPE_POLICY``, then the defaults of docs/detection.md.
        capture_content: Record tool arguments and outputs (truncated) on spans. Defaults
            to ``$LOOPSCOPE_CAPTURE_CONTENT``, then the OpenTelemetry GenAI variable
            ``$OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (read as the version of
            the conventions ``$OTEL_SEMCONV_STABILITY_OPT_IN`` picks), then ``False``: only
            hashes and sizes.
        span_processor: Use this processor instead of the OTLP exporter (tests pass an
            in-memory one).
        frameworks: Agent frameworks whose tool calls to trace and guard: ``None`` (the
            default) instruments every supported framework installed (OpenAI Agents SDK,
            LangChain / LangGraph, MCP clients), a list names some (``["mcp"]``), ``[]``
            none.

    Raises:
        ValueError: a setting is invalid; the message names it and its source. This is the
            only place loopscope raises on bad configuration.
    """
    resolved = configure(**options)
    instrument_frameworks(frameworks)
    return resolved
