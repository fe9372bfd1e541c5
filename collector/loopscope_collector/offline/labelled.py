"""``loopscope calibrate --db FILE`` and ``--lake CATALOG``: a store's labelled runs to
calibrate on.

The SDK's ``calibrate`` command never imports the collector; the collector offers this
``LabelledRuns`` through the ``loopscope.labelled_runs`` entry point. The runs are read the way
the dashboard's Policy page reads them (the ``replay_episodes`` and ``replay_calls`` reads, one
snapshot of the store) and become episodes by the same conversion (``runs.stored``), carrying
the labels the metrics count: a human label from the Labels page, else the run's scenario
label. Only runs calibration can judge are returned: labelled ones and successful ones.

Light at import time (every ``loopscope`` command loads it to build its options): duckdb and
the row assembly are imported when a store is read.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from loopscope.detect.replay import EpisodeRecord
from loopscope.offline.calibration import LabelledRuns

from ..lake_options import add_lake_options, lake_of

if TYPE_CHECKING:
    from ..storage import Store

__all__ = ["LABELLED_RUNS", "add_arguments", "episodes"]

NEWEST: Final = 10_000
"""Stored runs read by default, the newest first (as the Policy page's default scope)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--db``, ``--lake``/``--lake-data`` and ``--newest``: a store's labelled runs."""
    group = parser.add_argument_group(
        "a store's runs (human labels from the Labels page, else scenario labels)")
    group.add_argument("--db", metavar="STORE",
                       help="a loopscope DuckDB store, opened read-only (a copy, or the file "
                            "of a stopped collector)")
    add_lake_options(group, "instead of --db, the runs of every collector writing this DuckLake")
    group.add_argument("--newest", metavar="N", type=int, default=NEWEST,
                       help=f"read the store's newest N runs (default: {NEWEST:,})")


def episodes(args: argparse.Namespace) -> list[EpisodeRecord] | None:
    """The labelled and the successful runs of the store ``--db`` (else ``--lake``) names,
    as episodes with their labels; None when neither was given.

    Raises:
        ValueError: the store cannot be opened or read (the message names the file or the
            lake, and why).
    """
    path: str | None = getattr(args, "db", None)
    lake = None if path else lake_of(args, "calibrate")  # (--db wins, as for metrics, export)
    if not path and lake is None:
        return None
    from ..runs.stored import build_episodes, labelled_episode, stored_runs

    db = _open(path, lake)
    where = path or str(lake)
    try:
        rows, calls = _read(db, where, getattr(args, "newest", NEWEST))
    finally:
        db.close()
    runs = [run for run in stored_runs(rows, calls)
            if run.label is not None or run.human_false_kill or run.outcome == "success"]
    build_episodes(runs)
    return [labelled_episode(run) for run in runs]


def _open(path: str | None, lake: Any) -> Store:
    """The store, read-only; a ValueError naming it when it cannot be opened."""
    from ..storage import LakeError, SchemaError, open_database, open_lake
    from ..storage.errors import StoreError, StoreLocked

    if lake is not None:
        try:
            return open_lake(lake, read_only=True)
        except (LakeError, SchemaError, StoreError) as exc:
            raise ValueError(f"cannot open the lake {lake}: {exc}") from None
    assert path is not None
    if not Path(path).is_file():
        raise ValueError(f"no such store file: {path}")
    try:
        return open_database(path, read_only=True)
    except SchemaError as exc:
        raise ValueError(f"cannot open the store {path}: {exc}") from None
    except StoreLocked as exc:
        hint = (" (locked by a running collector? calibrate on a copy of the file)"
                if exc.held else "")
        raise ValueError(f"cannot open the store {path}{hint}: {exc}") from None
    except StoreError as exc:
        raise ValueError(f"cannot open the store {path}: not a readable DuckDB file "
                         f"({exc})") from None


def _read(db: Store, where: str,
          newest: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``replay_episodes`` and ``replay_calls`` rows of the newest runs, from one
    snapshot (so the calls belong to the runs listed)."""
    from ..reads import snapshot
    from ..storage.errors import StoreError

    if newest < 1:
        raise ValueError(f"--newest must be at least 1, not {newest}")
    try:
        with snapshot(db) as read:
            return (read("replay_episodes", {"limit": newest}),
                    read("replay_calls", {"limit": newest}))
    except StoreError as exc:
        raise ValueError(f"cannot read the runs of {where} ({exc}); is it a loopscope "
                         "store?") from None


LABELLED_RUNS: Final = LabelledRuns(add_arguments=add_arguments, episodes=episodes)
"""What the ``loopscope.labelled_runs`` entry point loads."""
