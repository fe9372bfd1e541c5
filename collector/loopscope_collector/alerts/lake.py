"""``loopscope alerts --lake …``: no-progress spikes evaluated once, on the union of what N
collectors store in one lake (docs/deploy.md).

Collectors writing a lake do not evaluate spikes themselves (each sees only its share: a spike
would fire once per collector, or not at all under the minimum volume). This one process
does, with the collector's own rule (``manager.AlertManager``, the same settings and sinks):
about once a ``--alert-window`` bucket it reads the tool calls the lake received since its last
look (with a margin for transactions that committed late: each call counts once) and feeds
their verdicts to the manager, which records alerts in the lake's ``alerts`` table, the log
and each ``--webhook``. Run one per lake.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

from ..lake_options import add_lake_options, open_named_lake, required_lake
from .options import add_alert_options, alert_settings

LATE_COMMIT_S: Final = 120.0
"""How far back each look reaches before the last one: a batch's rows carry the time its
transaction began, and a transaction may commit that long after (retries, a slow catalog)."""

HELP = """\
Evaluate no-progress spike alerts once, over every collector writing one lake.

Collectors started with --lake leave alerts to this process: run one per lake. It applies
the collector's rule (the same --alert-* options and defaults as `loopscope collector`) to the
union of the calls the collectors store, records alerts in the lake (GET /v1/reads/alerts on
any collector, the dashboard's Alerts page) and sends them to the log and each --webhook.

Example:
  loopscope alerts --lake "$LAKE" --lake-data /shared/lake --webhook https://hooks.example/x
"""


def register(sub: Any) -> None:
    """Add ``alerts`` to the ``loopscope`` command's subparsers."""
    p = sub.add_parser("alerts", help="evaluate spike alerts once over a lake's collectors",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_lake_options(p, "the lake the collectors write")
    p.add_argument("--webhook", metavar="URL", action="append", default=[],
                   help="POST alerts here as JSON with a Slack-compatible 'text' (repeatable)")
    add_alert_options(p)
    p.set_defaults(func=cmd_alerts)


@dataclass(frozen=True, slots=True)
class _Row:
    span_id: str
    end_ns: int
    service: str
    episode_id: str


@dataclass(frozen=True, slots=True)
class _Verdict:
    row: _Row
    progress: str | None
    streak: int


@dataclass(frozen=True, slots=True)
class _Result:
    verdicts: list[_Verdict]


@dataclass(frozen=True, slots=True)
class _Reader:
    """What the manager asks of the pipeline: a cursor to record alerts on."""

    cursor: Any


class LakeAlerts:
    """Reads what the lake received since the last look and feeds it to ``manager``."""

    def __init__(self, db: Any, manager: Any) -> None:
        self.db = db
        self.manager = manager
        self.cursor = db.cursor()
        self._since: Any = None

    def look(self) -> int:
        """One look: feed the calls received since the last (with ``LATE_COMMIT_S`` of
        margin); returns how many were read."""
        cur = self.cursor
        since = self._since
        with self.db.failures():  # (the store's own errors: the catalog away is StoreDown)
            until = cur.execute("select now()::timestamp").fetchall()[0][0]
            rows = cur.execute(
                "select t.span_id, t.end_ns, t.service, t.episode_id, t.collector_progress, "
                "coalesce(t.collector_streak, 0) from tool_calls t "
                "join spans s on s.trace_id = t.trace_id and s.span_id = t.span_id "
                "where t.collector_progress is not null and s.received_at >= "
                "$since::timestamp - to_seconds($late::double) order by t.end_ns",
                {"since": since or datetime.datetime(1970, 1, 1),  # noqa: DTZ001 (naive)
                 "late": LATE_COMMIT_S}).fetchall()
        verdicts = [_Verdict(_Row(span, end, service, episode),
                             None if progress == "none" else progress, int(streak))
                    for span, end, service, episode, progress, streak in rows]
        self.manager(_Reader(cur), [_Result(verdicts)])
        self._since = until
        return len(verdicts)


def cmd_alerts(args: argparse.Namespace) -> int:
    """``loopscope alerts``: look about once a bucket until SIGINT or SIGTERM."""
    from ..storage.errors import StoreError
    from .manager import AlertManager
    from .sinks import build_sink

    lake = required_lake(args, "alerts")
    try:
        manager = AlertManager(alert_settings(args), build_sink(args.webhook))
    except ValueError as exc:
        print(f"loopscope alerts: error: {exc}", file=sys.stderr)
        return 2
    db = open_named_lake(lake, "alerts")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    watcher = LakeAlerts(db, manager)
    print(f"loopscope alerts: evaluating spikes over {lake}", file=sys.stderr, flush=True)
    try:
        while not stop.is_set():
            started = time.monotonic()
            try:
                watcher.look()
            except StoreError as exc:  # the catalog away for a while: try again next time
                logging.getLogger(__name__).warning("loopscope alerts: cannot read the lake "
                                                    "now: %s", exc)
            stop.wait(max(0.0, manager.settings.bucket_s - (time.monotonic() - started)))
    finally:
        manager.close()
        db.close()
    return 0
