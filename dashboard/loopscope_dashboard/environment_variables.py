"""The dashboard's settings from the environment, each spelled once (standard library only, so
``loopscope dashboard`` can read them without importing Streamlit)."""

from typing import Final

COLLECTOR_URL_ENV: Final = "LOOPSCOPE_COLLECTOR_URL"
"""Base URL of a running collector (default ``http://127.0.0.1:4318``)."""
SNAPSHOT_ENV: Final = "LOOPSCOPE_DB_SNAPSHOT"
"""A loopscope DuckDB file to read instead of a collector; wins over the URL."""
LAKE_ENV: Final = "LOOPSCOPE_LAKE"
"""A DuckLake catalog to read instead of a collector (with ``LAKE_DATA_ENV``): every
collector's rows; the same names as ``loopscope collector --lake``'s defaults."""
LAKE_DATA_ENV: Final = "LOOPSCOPE_LAKE_DATA"
"""Where that lake's Parquet files are (a directory or an s3:// URL)."""
TOKEN_ENV: Final = "LOOPSCOPE_AUTH_TOKEN"
"""The collector's bearer token, when it was started with one."""
DEFAULT_COLLECTOR_URL: Final = "http://127.0.0.1:4318"
