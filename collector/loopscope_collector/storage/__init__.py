"""The collector's DuckDB store: one file, one writer; or a DuckLake that N collectors write
and every reader reads (``storage.ducklake``). The named reads over either are ``reads``.

``open_database(path)`` opens (and migrates) the file read-write for the collector, which is
its only writer; ``open_database(path, read_only=True)`` opens a copy or a stopped
collector's file for reading after the fact. ``open_lake(lake)`` attaches a lake (and
migrates it), for writing and reading alike. Each reader thread takes its own ``cursor()``.
"""

from __future__ import annotations

from .database import Database
from .duckdb_file.open import open_database
from .ducklake import Lake, LakeError
from .ducklake.open import open_lake
from .port import Store
from .schema import SchemaError

__all__ = ["Database", "Lake", "LakeError", "SchemaError", "Store", "open_database", "open_lake"]
