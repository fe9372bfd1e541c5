"""The collector's settings from the environment, each spelled once with its default
(standard library only, so every command's flags can read them without the collector's
dependencies): the ``loopscope collector``, ``metrics`` and ``up`` commands and the dashboard.
"""

from __future__ import annotations

import os
from typing import Final

DB_ENV: Final = "LOOPSCOPE_DB"
"""The collector's DuckDB file, for every command that takes ``--db``."""
DEFAULT_DB: Final = "loopscope.duckdb"
"""The store's file name when neither ``--db`` nor ``LOOPSCOPE_DB`` names one."""
TOKEN_ENV: Final = "LOOPSCOPE_AUTH_TOKEN"
"""The collector's bearer token (``--auth-token``), for it and for its clients."""
LAKE_ENV: Final = "LOOPSCOPE_LAKE"
"""A DuckLake catalog (``--lake``), for the collectors writing it and the commands reading it."""
LAKE_DATA_ENV: Final = "LOOPSCOPE_LAKE_DATA"
"""Where that lake's Parquet files are (``--lake-data``: a directory or an s3:// URL)."""
INSTANCE_ENV: Final = "LOOPSCOPE_INSTANCE"
"""This collector's name among those writing one lake (``--instance``)."""


def default_db() -> str:
    """The store's path when ``--db`` is not given: ``$LOOPSCOPE_DB``, else ``DEFAULT_DB``."""
    return os.environ.get(DB_ENV, DEFAULT_DB)
