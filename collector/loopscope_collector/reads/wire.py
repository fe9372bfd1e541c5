"""A read's rows on the wire as Arrow: the read API sends them as one Arrow IPC stream to a
client whose ``Accept`` prefers it (``serve.reads``), and the dashboard takes them in here.

Over a million-call store the Policy page's ``replay_calls`` read is 40,000 rows of 29
columns: 27 MB of JSON, made and parsed in about 0.3 s on each side, against 11 MB of Arrow
written in milliseconds (BENCHMARKS.md). The values arrive as the store holds them (a
timestamp a ``datetime``, a map a ``dict``, a NaN a NaN): what ``read`` returns over a file,
where JSON would have made a timestamp text and a NaN ``null``.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa

__all__ = ["ARROW_STREAM", "prefers_arrow", "rows_of_stream", "to_stream"]

ARROW_STREAM: Final = "application/vnd.apache.arrow.stream"
"""Arrow's IPC streaming format (its IANA media type)."""


def prefers_arrow(accept: str | None) -> bool:
    """Whether an ``Accept`` header takes Arrow's IPC stream at least as gladly as JSON (by
    the media types' ``q``): JSON when the header is absent or does not name Arrow."""
    weights: dict[str, float] = {}
    for part in (accept or "").split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        media = media.lower()
        weights[media] = max(weights.get(media, 0.0), weight)
    arrow = weights.get(ARROW_STREAM, 0.0)
    json_weight = max(weights.get(m, 0.0) for m in ("application/json", "application/*", "*/*"))
    return arrow > 0 and arrow >= json_weight


def to_stream(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def rows_of_stream(raw: bytes) -> list[dict[str, Any]]:
    """The rows of one Arrow IPC stream, as ``read`` returns them (a map as a ``dict``).

    Raises:
        pyarrow.ArrowInvalid: ``raw`` is not an Arrow IPC stream.
    """
    table = pa.ipc.open_stream(raw).read_all()
    # maps as dicts only where there is one: it makes pyarrow take every value ~4x slower
    if any(_has_map(f.type) for f in table.schema):
        return table.to_pylist(maps_as_pydicts="strict")
    return table.to_pylist()


def _has_map(kind: pa.DataType) -> bool:
    return pa.types.is_map(kind) or any(_has_map(kind.field(i).type)
                                         for i in range(kind.num_fields))
