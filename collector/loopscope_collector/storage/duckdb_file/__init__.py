"""The embedded store: one DuckDB file, one writer (the collector); or a copy or a stopped
collector's file opened for reading after the fact. ``open.open_database`` opens it as a
``Store``; ``connect`` holds the file's own rules (what DuckDB would not store into, a crash-safe
migration, room to checkpoint)."""
