"""The named reads: a stage of their own, over a store (a DuckDB file, or a lake), served by
the HTTP server (``receive``) and run by ``loopscope metrics``, the dashboard and exports."""

from .named import READS, NamedRead, UnknownRead, fragment, read, read_table, run_read, snapshot

__all__ = ["READS", "NamedRead", "UnknownRead", "fragment", "read", "read_table", "run_read",
           "snapshot"]
