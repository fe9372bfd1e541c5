"""The embedded store's settings the command line names, stated once (standard library only:
``loopscope collector --help`` reads them without importing a store)."""

from typing import Final

CHECKPOINT_BYTES: Final = 64 * 1024 * 1024
"""The write-ahead log is checkpointed into the file past this size (``--checkpoint-bytes``),
by the pipeline thread rather than by DuckDB at a commit: see
``storage.duckdb_file.connect.checkpoint_shortfall``. Four times DuckDB's own default: a
checkpoint's time grows with the store, not with the log (0.1 s on a new store, 0.6 s past
200,000 spans), so at 16 MB (one every 20,000 spans or so) they took 8% of ingest and at 64 MB
2.5%; the price is a longer log to replay after a crash (about 1.5 s at 64 MB) and that much
more disk (BENCHMARKS.md, "Checkpoints")."""
