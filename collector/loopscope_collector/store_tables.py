"""What ``loopscope export`` can write, stated once (standard library only: the command line
reads it without importing a store)."""

from typing import Final

FORMATS: Final = ("parquet", "csv")
TABLES: Final = ("episodes", "tool_calls", "messages", "detections", "guard_decisions",
                 "unknown_writes", "reconciles", "alerts", "labels", "export_reports",
                 "incomplete_runs", "spans")
"""What ``export`` writes by default, in this order (the store's own tables)."""
