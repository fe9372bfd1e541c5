"""``--lake`` and ``--lake-data``: the options of every command that opens a store, for a
store in a DuckLake (docs/deploy.md). Light to import (``loopscope --help`` imports it
without the collector's extra): the lake itself is ``storage.ducklake``."""

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


def install_hint(args: argparse.Namespace) -> str:
    """What to install for a command that ``args`` give, when its dependencies are missing:
    the lake extra when it names a lake (the lake's DuckDB with its extensions:
    docs/deploy.md), the collector extra otherwise."""
    extra = "lake" if getattr(args, "lake", None) else "collector"
    return f"pip install 'loopscope[{extra}]'"


def lake_of(args: argparse.Namespace, command: str) -> Any:
    """The ``storage.ducklake.Lake`` that ``--lake``/``--lake-data`` name, or None; exits with
    status 2 and a message naming what is wrong."""
    if not getattr(args, "lake", None):
        if getattr(args, "lake_data", None):
            print(f"loopscope {command}: error: --lake-data needs --lake (the catalog)",
                  file=sys.stderr)
            raise SystemExit(2)
        return None
    from .storage.ducklake import Lake, LakeError

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
    from .storage import LakeError, SchemaError, open_lake
    from .storage.errors import StoreError

    try:
        return open_lake(lake)
    except (LakeError, SchemaError, StoreError) as exc:
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


MIN_KEEP: Final = "1h"
MIN_KEEP_S: Final = 3600
"""The shortest ``--lake-keep`` (collector) and ``--keep`` (``lake maintain``) taken without
``--unsafe-lake-keep`` / ``--unsafe-keep``. The housekeeping deletes a Parquet file once no
snapshot has needed it for that long, whoever is still scanning it: a read that began before
another collector's merge then fails (503), as a batch's commit would. So the keep must outlast
the longest transaction on the lake. Measured (BENCHMARKS.md, docs/deploy.md): a batch's commit
0.2-0.7 s (retried up to 5 times after a conflict), a housekeeping run 1.4-2.5 s, the nine
dashboard reads 5.75 s over a lake of 600 unmerged commits, ``compute_metrics`` over 1,000,000
calls 0.54 s. ``loopscope export`` and ``lake import`` read a whole table in one transaction,
which takes as long as the table is large, and a reader outside loopscope (a DuckDB shell on
the lake) as long as it likes. An hour is over 600 times the longest read or batch measured
and leaves room for an export or an import of a large table; what it costs is the disk of the
files replaced in the last hour. DuckLake's own advice is days, and the default is 1d."""


def _interval_seconds(sql_interval: str) -> tuple[int, str]:
    """``"30 minutes"`` (an ``interval``) as (1800, "30m")."""
    number, name = sql_interval.split()
    unit, seconds = next((u, s) for u, (n, s) in _UNITS.items() if n == name)
    return int(number) * seconds, f"{number}{unit}"


def check_keep(keep: str, *, option: str, unsafe: bool, override: str, command: str) -> None:
    """Exit with status 2, as argparse does, when ``keep`` (an ``interval``) is under
    ``MIN_KEEP`` and ``unsafe`` (``override``, the option that says so) is not set; the
    message names ``option``, the minimum, why, and ``override``."""
    seconds, given = _interval_seconds(keep)
    if unsafe or seconds >= MIN_KEEP_S:
        return
    print(f"loopscope {command}: error: {option} {given} is below the minimum of {MIN_KEEP}: "
          "the housekeeping deletes the Parquet files a merge replaced once they are that old, "
          "and a read or a batch on the lake still scanning one then fails (a read answers "
          f"503). Pass {override} to use it anyway, when no read or write on the lake lasts "
          "that long", file=sys.stderr)
    raise SystemExit(2)
