"""The ``messages`` table: the conversation's messages, for detection and its rebuilds.

Only the pipeline thread calls this, inside its transaction, on its own cursor. The SQL is in
``sql/writes/messages.sql``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

import duckdb
import pyarrow as pa

from ...normalize.rows import MessageRow
from ..arrow import schema
from ..queries import by_episode, insert_rows, statements

MESSAGES: Final = schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("episode_id", pa.string()),
    ("service", pa.string()), ("role", pa.string()), ("start_ns", pa.int64()),
    ("step", pa.int32()), ("content", pa.string()), ("content_hash", pa.string()),
    ("tokens", pa.int64()),
])
_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(MessageRow))
_SQL: Final = statements("messages")


def insert_messages(cur: duckdb.DuckDBPyConnection, rows: Sequence[MessageRow]) -> int:
    """Store new messages (spans already stored are not passed in again)."""
    return insert_rows(cur, "messages", [dataclasses.asdict(r) for r in rows], MESSAGES)


def load_messages(
    cur: duckdb.DuckDBPyConnection, episode_ids: Sequence[str]
) -> dict[str, list[MessageRow]]:
    """The stored messages of these episodes (to rebuild their detection state), in one
    query; episodes with none are absent from the result."""
    return by_episode(cur, _SQL["load"], episode_ids, _FIELDS, lambda data: MessageRow(**data))
