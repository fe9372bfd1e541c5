"""The dashboard's settings from the environment, each spelled once (standard library only, so
``loopscope dashboard`` can read them without importing Streamlit)."""

from typing import Final

from loopscope import environment_variables as agent_env
from loopscope_collector import environment_variables as collector_env

COLLECTOR_URL_ENV: Final = "LOOPSCOPE_COLLECTOR_URL"
"""Base URL of a running collector (default ``http://127.0.0.1:4318``)."""
SNAPSHOT_ENV: Final = "LOOPSCOPE_DB_SNAPSHOT"
"""A loopscope DuckDB file to read instead of a collector; wins over the URL."""
LAKE_ENV: Final = collector_env.LAKE_ENV
"""A DuckLake catalog to read instead of a collector (with ``LAKE_DATA_ENV``): every
collector's rows."""
LAKE_DATA_ENV: Final = collector_env.LAKE_DATA_ENV
"""Where that lake's Parquet files are (a directory or an s3:// URL)."""
TOKEN_ENV: Final = collector_env.TOKEN_ENV
"""The collector's bearer token, when it was started with one."""
DEFAULT_COLLECTOR_URL: Final = agent_env.DEFAULT_ENDPOINT
REPLAY_CACHE_ENV: Final = "LOOPSCOPE_REPLAY_CACHE"
"""The folder where the Policy page keeps its replays across dashboard restarts (default
``$XDG_CACHE_HOME/loopscope/replays``, else ``~/.cache/loopscope/replays``); set empty to keep
none."""
UP_STATUS_ENV: Final = "LOOPSCOPE_UP_STATUS"
"""Set by ``loopscope up`` for its dashboard: the JSON file naming the parts ``up`` restarted
(``restarts.py``), which the banner shows. Unset: the banner shows no restarts."""
