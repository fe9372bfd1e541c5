"""``--lake`` and ``--lake-data``: the options of every command that opens a store, for a
store in a DuckLake (docs/deploy.md). Light to import (``loopscope --help`` imports it
without the collector's extra): the lake itself is ``storage.lake``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Final

from . import environment_variables as env


def add_lake_options(p: argparse._ActionsContainer, what: str) -> None:
    """``--lake`` and ``--lake-data`` (docs/deploy.md), for every command that opens a store."""
    p.add_argument("--lake", metavar="CATALOG", default=os.environ.get(env.LAKE_ENV),
                   help=f"{what}: a DuckLake catalog such as 'ducklake:postgres:dbname=loopscope "
                        f"host=db.internal user=loopscope' (default: ${env.LAKE_ENV})")
    p.add_argument("--lake-data", metavar="DIR_OR_S3_URL",
                   default=os.environ.get(env.LAKE_DATA_ENV),
                   help="where the lake's Parquet files are: a shared directory or s3://bucket/"
                        "prefix/ (credentials from AWS_* variables; default: "
                        f"${env.LAKE_DATA_ENV})")


def lake_of(args: argparse.Namespace, command: str) -> Any:
    """The ``storage.lake.Lake`` that ``--lake``/``--lake-data`` name, or None; exits with
    status 2 and a message naming what is wrong."""
    if not getattr(args, "lake", None):
        if getattr(args, "lake_data", None):
            print(f"loopscope {command}: error: --lake-data needs --lake (the catalog)",
                  file=sys.stderr)
            raise SystemExit(2)
        return None
    from .storage.lake import Lake, LakeError

    try:
        return Lake.parse(args.lake, args.lake_data)
    except LakeError as exc:
        print(f"loopscope {command}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def required_lake(args: argparse.Namespace, command: str) -> Any:
    """``lake_of``, exiting with status 2 when no ``--lake`` is given."""
    lake = lake_of(args, command)
    if lake is None:
        print(f"loopscope {command}: error: give --lake (and --lake-data)", file=sys.stderr)
        raise SystemExit(2)
    return lake


def open_named_lake(lake: Any, command: str) -> Any:
    """``storage.open_lake(lake)``, exiting with status 1 and a message naming the lake and
    why when it cannot be opened."""
    import duckdb

    from .storage import LakeError, SchemaError, open_lake

    try:
        return open_lake(lake)
    except (LakeError, SchemaError, duckdb.Error) as exc:
        print(f"loopscope {command}: error: cannot open the lake {lake}: {exc}",
              file=sys.stderr)
        raise SystemExit(1) from None


_UNITS: Final = {"s": ("seconds", 1), "m": ("minutes", 60), "h": ("hours", 3600),
                  "d": ("days", 86400)}


def _duration(text: str, example: str) -> tuple[int, str]:
    """``30m`` as (30, "m"); anything else refused by name, ``example`` saying what to write."""
    number, unit = text[:-1], text[-1:]
    if not number.isdigit() or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say {example})")
    return int(number), unit


def interval(text: str) -> str:
    """An argparse type: ``30m``, ``6h``, ``1d`` as an SQL interval (``--keep``,
    ``--lake-keep``)."""
    number, unit = _duration(text, "30m, 6h or 1d")
    return f"{number} {_UNITS[unit][0]}"


def every(text: str) -> float:
    """An argparse type: ``30s``, ``5m``, ``1h`` as seconds, ``0`` as never
    (``--lake-maintain-every``)."""
    if text.strip() == "0":
        return 0.0
    number, unit = _duration(text, "30s, 5m or 1h; 0 for never")
    return float(number * _UNITS[unit][1])
