"""The collector's neutral span record: what an OTLP span becomes after decoding.

Protobuf and JSON requests both decode to ``SpanRecord`` (``decode.py``), and everything
downstream (normalising, storing, detecting) reads only this type. Attribute values are plain
Python: str, bool, int, float, bytes, list and dict (an OTLP ``kvlistValue``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SpanEvent:
    """A span event: name, time and attributes."""

    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """One decoded span with its resource and scope.

    ``trace_id`` and ``span_id`` are lower-case hex (32 and 16 characters);
    ``parent_span_id`` is ``""`` for a root span. ``status_code`` is OTLP's enum:
    0 unset, 1 ok, 2 error. ``kind`` is OTLP's SpanKind (0..5).
    """

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    kind: int = 0
    status_code: int = 0
    status_message: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""

    @property
    def service_name(self) -> str:
        """``service.name`` of the resource, or ``unknown_service``."""
        value = self.resource.get("service.name")
        return value if isinstance(value, str) and value else "unknown_service"


class Decoded(list[SpanRecord]):
    """The spans of one export request, and ``set_aside``: for each value a typed column could
    not hold, where it was and what was wrong (``typed_attributes.set_aside_unstorable``;
    its span is stored), for the answer's ``partial_success``."""

    def __init__(self, spans: Iterable[SpanRecord] = ()) -> None:
        super().__init__(spans)
        self.set_aside: list[str] = []

    def partial_success_message(self) -> str:
        """The ``partial_success.error_message`` for this request ("" when nothing was set
        aside): how many values, and the first few by path."""
        if not self.set_aside:
            return ""
        shown = "; ".join(self.set_aside[:3])
        more = f" (and {len(self.set_aside) - 3} more)" if len(self.set_aside) > 3 else ""
        return (f"{len(self.set_aside)} attribute value(s) stored as unknown (kept as text under "
                f"loopscope.unstorable.<key>), every span stored: {shown}{more}")

