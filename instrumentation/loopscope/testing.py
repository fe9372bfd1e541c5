"""Test helpers for agents that use loopscope: capture spans in memory, as plain dicts.

Example (pytest)::

    from loopscope.testing import capture_spans

    def test_my_agent_stops_spinning():
        with capture_spans(mode="enforce") as spans:
            run_my_agent()
        tools = [s for s in spans.as_dicts() if s["name"].startswith("execute_tool")]
        assert tools[-1]["attributes"]["loopscope.guard.action"] == "stop"
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ._config import reset_for_tests
from ._instrument import instrument


class CapturedSpans:
    """The finished spans of a ``capture_spans`` block."""

    __test__ = False

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Finished spans, in the order they ended."""
        return tuple(self.exporter.get_finished_spans())

    def as_dicts(self) -> list[dict[str, Any]]:
        """Finished spans as plain dicts: name, attributes, status, parent and events."""
        return [
            {
                "name": span.name,
                "attributes": dict(span.attributes or {}),
                "status": span.status.status_code.name,
                "trace_id": f"{span.context.trace_id:032x}" if span.context else None,
                "span_id": f"{span.context.span_id:016x}" if span.context else None,
                "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
                "events": [event.name for event in span.events],
            }
            for span in self.spans()
        ]

    def tool_spans(self) -> list[dict[str, Any]]:
        """Only the ``execute_tool`` spans."""
        return [s for s in self.as_dicts() if s["name"].startswith("execute_tool")]

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()


@contextlib.contextmanager
def capture_spans(**settings: Any) -> Iterator[CapturedSpans]:
    """Instrument with an in-memory exporter for the block; ``settings`` go to ``instrument``.

    Restores loopscope's settings afterwards. The OTel global provider can only be set once
    per process; the first call sets it and later calls reuse it.
    """
    exporter = InMemorySpanExporter()
    instrument(span_processor=SimpleSpanProcessor(exporter), **settings)
    try:
        yield CapturedSpans(exporter)
    finally:
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        reset_for_tests()
