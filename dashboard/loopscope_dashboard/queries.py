"""Every number the dashboard shows comes through this module.

Pages never know where data lives. Live, a ``HttpSource`` asks the collector's read API
(``GET /v1/reads/NAME``): the collector is the DuckDB file's only writer, so the dashboard
cannot open it. After the fact (a copied snapshot, an offline investigation, the test suite),
``LOOPSCOPE_DB_SNAPSHOT`` names a DuckDB file and a ``FileSource`` opens it read-only and runs
the same named reads from ``reads/sql/reads.sql``, so each read's SQL exists once.

Reads are cached with ``st.cache_data`` for two seconds (the live panels refresh every two
seconds), refreshed in the background: once an answer is older, the next call still returns it
at once and reads the new one behind it (for up to one more ``LIVE_TTL``, then it waits), so a
live page redraws from the cache instead of standing empty while a read runs. The reads
that count over every run (the metrics, the Loops page's rankings) are fresh for
``SUMMARY_TTL`` instead, shared by every page and session (each costs seconds over a million
calls). The source
itself is the one ``st.cache_resource``. A source that cannot answer
raises ``SourceError``, which the entrypoint shows as a message instead of a traceback.

A collector that stops answering mid-session is a fault the pages outlive: every read that
succeeded is kept (the last good answer per read and parameters, ``_LAST_GOOD``), and while the
collector is unreachable a read returns that answer instead of failing; ``connection()`` says
since when the data is stale, for the banner the entrypoint draws, and ``probe()`` notices the
collector is back (the stale answers are then dropped from Streamlit's cache).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import pandas as pd
import streamlit as st

from loopscope_collector.reads.filters import DIMENSIONS
from loopscope_collector.reads.filters import Filters as Filters  # the sidebar's (state)
from loopscope_collector.reads.span_filter import FIELDS, compile_filter
from loopscope_collector.reads.span_filter import SpanFilterError as SpanFilterError
from loopscope_collector.reads.wire import ARROW_STREAM, rows_of_stream

from . import truth
from .environment_variables import (
    COLLECTOR_URL_ENV,
    DEFAULT_COLLECTOR_URL,
    LAKE_DATA_ENV,
    LAKE_ENV,
    SNAPSHOT_ENV,
    TOKEN_ENV,
)

LIVE_TTL: Final = "2s"
SUMMARY_TTL: Final = "10s"
"""How long the reads that count over every run (the metrics, the Loops page's rankings) are
fresh: each costs seconds over a store of a million calls, so every page and session within
it shares one answer, refreshed behind the cache (the live Overview's cards follow the
store within this, its flagged list within ``LIVE_TTL``). A saved label clears them."""
_TIME_COLUMNS: Final = ("fired_at", "resolved_at", "detected_at", "labelled_at", "last_flag_at")


class SourceError(RuntimeError):
    """The data source cannot answer; the message says why and what to do."""


class CollectorUnreachable(SourceError):
    """The collector did not answer at all (stopped, restarting, network down)."""


class LabelsUnavailable(SourceError):
    """Labels are written by the collector; a read-only snapshot cannot take them."""


class Source(Protocol):
    """Where the named reads run: a collector over HTTP, or a DuckDB file."""

    description: str
    live: bool

    def rows(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run the named read; ``None`` parameters mean "no filter"."""
        ...

    def save_label(self, label: Mapping[str, Any]) -> dict[str, Any]:
        """Store a human label; returns it as stored."""
        ...

    def send_traces(self, body: bytes) -> None:
        """Send one OTLP JSON export request to the collector."""
        ...

    def probe(self) -> None:
        """Return when the source answers; raise ``CollectorUnreachable`` when it does not."""
        ...


class HttpSource:
    """The collector's read API. Thread-safe: each call opens its own connection."""

    live = True

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.description = f"live collector at {self.url}"

    def _request(self, path: str, body: bytes | None = None,
                 content_type: str = "application/json", *, accept: str | None = None) -> Any:
        """The answer to ``path``: parsed JSON, rows when the collector sent Arrow, else
        text."""
        request = urllib.request.Request(self.url + path, data=body,
                                         method="POST" if body is not None else "GET")
        if body is not None:
            request.add_header("Content-Type", content_type)
        if accept is not None:
            request.add_header("Accept", accept)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
                kind = response.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            raise SourceError(f"the collector at {self.url} answered {exc.code} to {path}: "
                              f"{_error_text(exc.read())}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CollectorUnreachable(
                f"cannot reach the collector at {self.url} ({reason}). Start one with "
                f"`loopscope collector`, or browse a file with `loopscope dashboard --db FILE`"
            ) from None
        if kind == ARROW_STREAM:
            return rows_of_stream(raw)
        return json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()

    def rows(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``GET /v1/reads/NAME?param=value``; booleans are sent as ``true`` / ``false``. The
        rows come as Arrow (``reads.wire``: their values as over a file), or as JSON from a
        collector that sends only JSON."""
        query = urllib.parse.urlencode({
            k: (str(v).lower() if isinstance(v, bool) else v)
            for k, v in params.items() if v is not None
        })
        path = f"/v1/reads/{urllib.parse.quote(name)}" + (f"?{query}" if query else "")
        answer = self._request(path, accept=f"{ARROW_STREAM}, application/json;q=0.5")
        return answer if isinstance(answer, list) else list(answer["rows"])

    def save_label(self, label: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/labels``; the collector's pipeline writes it."""
        answer = self._request("/v1/labels", json.dumps(dict(label)).encode())
        return dict(answer["stored"])

    def send_traces(self, body: bytes) -> None:
        """``POST /v1/traces`` with an OTLP JSON body; returns once the spans are stored."""
        self._request("/v1/traces", body)

    def probe(self) -> None:
        """``GET /healthz``: any answer means the collector is there (a 503 says its store
        is failing, which its reads report themselves)."""
        try:
            self._request("/healthz")
        except CollectorUnreachable:
            raise
        except SourceError:
            pass


class FileSource:
    """A loopscope DuckDB file opened read-only; each read takes its own cursor."""

    live = False

    def __init__(self, path: str) -> None:
        from loopscope_collector.storage import SchemaError, open_database
        from loopscope_collector.storage.errors import StoreError

        try:
            self._db = open_database(path, read_only=True)
        except (FileNotFoundError, SchemaError) as exc:
            raise SourceError(f"cannot browse {path}: {exc}") from None
        except StoreError as exc:  # StoreLocked: a running collector holds the lock
            raise SourceError(
                f"cannot open {path} read-only ({exc}). If a collector is writing it, point "
                f"the dashboard at the collector instead: `loopscope dashboard --collector URL`"
            ) from None
        self.path = path
        self.description = f"snapshot file {path} (read-only)"

    def rows(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run the named read on a fresh cursor (the read's SQL is the collector's)."""
        from loopscope_collector.reads import read

        given = {k: v for k, v in params.items() if v is not None}  # as HttpSource sends them
        return read(self._db, name, given)

    def save_label(self, label: Mapping[str, Any]) -> dict[str, Any]:
        """Always raises: a snapshot is read-only, and the collector is the only writer."""
        raise LabelsUnavailable(
            f"labels need a live collector: {self.path} is opened read-only. Start "
            "`loopscope collector --db FILE` and `loopscope dashboard --collector URL`")

    def send_traces(self, body: bytes) -> None:
        """Always raises: only a live collector stores spans."""
        raise SourceError("sending runs needs a live collector; this dashboard reads a file")

    def probe(self) -> None:
        """A file opened once stays readable: nothing to check."""


class LakeSource(FileSource):
    """A DuckLake that collectors write, read with the same named reads (every collector's
    rows); each read takes its own cursor. Labels go through a live collector."""

    def __init__(self, catalog: str, data_path: str) -> None:
        from loopscope_collector.storage import LakeError, SchemaError, open_lake
        from loopscope_collector.storage.ducklake import Lake
        from loopscope_collector.storage.errors import StoreError

        try:
            lake = Lake.parse(catalog, data_path)
            self._db = open_lake(lake, read_only=True)
        except (LakeError, SchemaError) as exc:
            raise SourceError(f"cannot browse the lake: {exc}") from None
        except StoreError as exc:  # StoreDown: the catalog cannot be reached
            raise SourceError(f"cannot open the lake {catalog} ({exc})") from None
        self.path = str(lake)
        self.description = f"lake {lake} (read-only)"


def _error_text(raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("error") or json.loads(raw).get("message"))
    except (ValueError, AttributeError):
        return raw.decode(errors="replace")[:300]


@st.cache_resource(show_spinner=False)
def _source() -> Source:
    """Live: the collector's read API. Offline or in tests: a DuckDB file, read-only; or a
    lake, every collector's rows (read-only)."""
    if snapshot := os.environ.get(SNAPSHOT_ENV):
        return FileSource(snapshot)
    if catalog := os.environ.get(LAKE_ENV):
        return LakeSource(catalog, os.environ.get(LAKE_DATA_ENV, ""))
    return HttpSource(collector_url(), os.environ.get(TOKEN_ENV) or None)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for column in _TIME_COLUMNS:
        if column in frame.columns:
            frame[column] = pd.to_datetime(frame[column], format="mixed")
    return frame


@dataclass(frozen=True, slots=True)
class Connection:
    """How the source has answered: ``down_since`` (epoch seconds) is set while the collector
    is unreachable, ``last_good_at`` is the time of the last read it answered."""

    down_since: float | None = None
    last_good_at: float | None = None
    reason: str = ""


_LAST_GOOD: Final[OrderedDict[tuple[str, str, tuple[tuple[str, Any], ...]],
                              list[dict[str, Any]]]] = OrderedDict()
"""The last answer of each (source, read, parameters), newest last, at most
``_LAST_GOOD_ROWS`` rows in all (the oldest answers go first)."""
_LAST_GOOD_ROWS: Final = 200_000
_LOCK: Final = threading.Lock()
_connection = Connection()


def _rows(name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run a named read; while the collector is unreachable, its last good answer.

    Raises:
        CollectorUnreachable: the collector is unreachable and this read never answered.
        SourceError: the source refused the read.
    """
    source = _source()
    key = (source.description, name,
           tuple(sorted((k, v) for k, v in params.items() if v is not None)))
    try:
        rows = source.rows(name, params)
    except CollectorUnreachable as exc:
        _went_down(exc)
        with _LOCK:
            kept = _LAST_GOOD.get(key)
        if kept is None:
            raise
        return kept
    with _LOCK:
        _LAST_GOOD[key] = rows
        _LAST_GOOD.move_to_end(key)
        total = sum(len(answer) for answer in _LAST_GOOD.values())
        while total > _LAST_GOOD_ROWS and len(_LAST_GOOD) > 1:
            total -= len(_LAST_GOOD.popitem(last=False)[1])
    _answered(read=True)
    return rows


def _went_down(exc: CollectorUnreachable) -> None:
    global _connection
    with _LOCK:
        if _connection.down_since is None:
            _connection = Connection(time.time(), _connection.last_good_at, str(exc))


def _answered(*, read: bool) -> None:
    """The source answered (a read, or a probe); when it had been down, answers Streamlit
    cached meanwhile are stale and dropped."""
    global _connection
    with _LOCK:
        came_back = _connection.down_since is not None
        at = time.time() if read else _connection.last_good_at or time.time()
        _connection = Connection(None, at)
    if came_back:
        st.cache_data.clear()


def connection() -> Connection:
    """How the source has answered lately (for the unreachable-collector banner)."""
    return _connection


def probe() -> Connection:
    """Ask the source whether it answers now, and return the state it leaves.

    Called by the entrypoint's watcher every few seconds while a page is open, so a
    collector that stops is noticed without a read, and one that comes back clears the
    banner (cached answers from the outage are dropped).
    """
    try:
        _source().probe()
    except CollectorUnreachable as exc:
        _went_down(exc)
    else:
        _answered(read=False)
    return _connection


def _read(name: str, **params: Any) -> pd.DataFrame:
    return _frame(_rows(name, params))


def collector_url() -> str:
    """The collector's base URL as this dashboard was told it (OTLP/HTTP and reads share the
    port): what empty pages tell users to point their agents at."""
    return (os.environ.get(COLLECTOR_URL_ENV) or DEFAULT_COLLECTOR_URL).rstrip("/")


def source_description() -> str:
    """Where the data comes from, for the sidebar."""
    return _source().description


def source_is_live() -> bool:
    """True when a collector answers the reads (labels and sending runs work)."""
    return _source().live


# -- reads ------------------------------------------------------------------------------------


@st.cache_data(ttl="30s", show_spinner=False, refresh_mode="background")
def filter_options() -> dict[str, list[str]]:
    """The values each filter offers: {"service": [...], "agent": [...], ...}; the sidebar
    reads it on every page, so it refreshes behind the cache (``refresh_mode``)."""
    options: dict[str, list[str]] = {d: [] for d in DIMENSIONS}
    for row in _rows("filter_options", {}):
        options.setdefault(row["dimension"], []).append(str(row["value"]))
    return options


def store_is_empty() -> bool:
    """True when the store holds no run and no tool call yet (what a page's empty-store hint
    says), from the sidebar's cached ``filter_options``: no read over every call."""
    options = filter_options()
    return not options.get("service") and not options.get("tool")


@st.cache_data(ttl=SUMMARY_TTL, show_spinner=False, refresh_mode="background")
def metrics(*, service: str | None = None, agent: str | None = None, model: str | None = None,
            tool: str | None = None, since_ns: int | None = None,
            until_ns: int | None = None, outcome: str | None = None) -> dict[str, Any]:
    """The four metrics of docs/metrics.md with n and intervals, by the collector's own code."""
    from loopscope_collector.metrics.compute import collect

    params = Filters(service=service, agent=agent, model=model, tool=tool, outcome=outcome,
                     since_ns=since_ns, until_ns=until_ns).params()
    return collect(_rows, params)


def loops_by(dimension: str, **filters: Any) -> pd.DataFrame:
    """The metrics per ``dimension`` (service, agent, model, tool or kind): episodes, loops
    detected, kills, false kills, cost and cost after the first flag."""
    rows = metrics(**filters)["breakdown"].get(dimension, [])
    return pd.DataFrame([
        {"key": r["key"], "episodes": r["episodes"], "tool_calls": r["tool_calls"],
         "loops_detected": r["loops_detected"], "kills": r["kills"],
         "false_kills": r["false_kills"], "cost_usd": r["cost_usd"],
         "cost_in_loops_usd": r["cost_after_first_flag_usd"]}
        for r in rows
    ])


GLOSSARY_NAMES: Final = {"kills": "stops", "would_be_kills": "would_stops", "episodes": "runs",
                          "flagged_episodes": "flagged_runs"}
"""Columns of the run reads renamed to docs/glossary.md's words where a page shows them and
a download writes them (the reads keep the stored names)."""


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def episodes(*, flagged: bool | None = None, limit: int = 200, episode_id: str | None = None,
             **filters: Any) -> pd.DataFrame:
    """Runs newest first (``episode_list``), with what happened (``happened``, ``stops``)
    apart from what enforce would have done (``enforce_would``, ``would_stops``) and
    ``would_be`` ("would stop") where that is more; ``filters`` as ``state.Filters.params()``."""
    frame = _read("episode_list", flagged=flagged, limit=limit, episode_id=episode_id,
                  **filters).rename(columns=GLOSSARY_NAMES)
    if not frame.empty:
        frame["would_be"] = [truth.would_be(h, w) for h, w in
                             zip(frame["happened"], frame["enforce_would"], strict=True)]
    return frame


RUN_SORTS: Final = {"newest": "last activity", "started": "start", "calls": "tool calls",
                    "flags": "flags", "cost": "cost", "duration": "duration", "agent": "agent",
                    "service": "service"}
"""The orders the Runs page offers (``run_list``'s ``$sort``), with their labels."""
RUN_VERDICTS: Final = ("flagged", "not flagged", "stopped", "would stop")
"""``run_list``'s ``$verdict`` values."""
RUN_STATUSES: Final = ("running", "ended without a summary", "ended")
"""``run_list``'s ``$status`` values (the episode read's ``status``)."""
RUN_SILENT_S: Final = 300
"""A run without its final span is running until it has been silent this long, then ended
without a summary (the reads' ``$stale_s``)."""


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def runs(*, search: str | None = None, verdict: str | None = None, status: str | None = None,
         sort: str = "newest", ascending: bool = False, limit: int = 50, offset: int = 0,
         **filters: Any) -> tuple[pd.DataFrame, int]:
    """One page of every run (``run_list``) and how many match: ``search`` a piece of the
    task, agent, service, episode id or a tool's name; ``verdict`` one of ``RUN_VERDICTS``,
    ``status`` one of ``RUN_STATUSES``; ``filters`` as ``state.Filters.params()``. Rows carry
    ``started`` (a time), ``duration_s`` and ``would_be`` beside the read's columns."""
    frame = _read("run_list", search=search or None, verdict=verdict, status=status,
                  sort=sort, ascending=ascending, limit=limit, offset=offset,
                  stale_s=RUN_SILENT_S, **filters).rename(columns=GLOSSARY_NAMES)
    if frame.empty:
        return frame, 0
    total = int(frame["total"].iloc[0])
    frame["started"] = pd.to_datetime(frame["start_ns"].astype("float64"), unit="ns")
    frame["duration_s"] = (frame["end_ns"] - frame["start_ns"]) / 1e9
    frame["would_be"] = [truth.would_be(h, w) for h, w in
                         zip(frame["happened"], frame["enforce_would"], strict=True)]
    return frame.drop(columns=["total"]), total


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def episode_spans(episode_id: str) -> pd.DataFrame:
    """The spans of one run for its trace view (``episode_spans``), in start order."""
    return _read("episode_spans", episode_id=episode_id)


SPAN_FILTER_FIELDS: Final = FIELDS
"""The fields a Spans filter knows besides attribute keys, each with what it is."""


@st.cache_data(ttl=LIVE_TTL, show_spinner=False)
def spans(*, where: str = "", limit: int = 200, offset: int = 0, service: str | None = None,
          tool: str | None = None, since_ns: int | None = None,
          until_ns: int | None = None) -> tuple[pd.DataFrame, int]:
    """The newest spans that match the filter text ``where`` (``span_list``; the grammar is
    ``loopscope_collector.reads.span_filter``'s) in the service, tool and time window, at most
    ``limit`` from ``offset``, and how many match. Rows carry ``started`` (a time) beside the
    read's columns; ``attributes`` is JSON text.

    Raises:
        SpanFilterError: ``where`` is not a filter; the message says what and where.
    """
    frame = _read("span_list", where=compile_filter(where), limit=limit, offset=offset,
                  service=service, tool=tool, since_ns=since_ns, until_ns=until_ns)
    if frame.empty:
        return frame, 0
    total = int(frame["total"].iloc[0])
    frame["started"] = pd.to_datetime(frame["start_ns"].astype("float64"), unit="ns")
    return frame.drop(columns=["total"]), total


@st.cache_data(ttl=LIVE_TTL, show_spinner=False)
def span_latency(*, where: str = "", service: str | None = None, tool: str | None = None,
                 since_ns: int | None = None, until_ns: int | None = None) -> pd.DataFrame:
    """Latency percentiles of the spans ``spans`` matches with the same arguments
    (``span_latency``): per tool, then one row of every matching span (``every_span``).

    Raises:
        SpanFilterError: ``where`` is not a filter.
    """
    return _read("span_latency", where=compile_filter(where), service=service, tool=tool,
                 since_ns=since_ns, until_ns=until_ns)


@st.cache_data(ttl=LIVE_TTL, show_spinner=False)
def span(span_id: str, trace_id: str | None = None) -> dict[str, Any] | None:
    """One span as stored (``span_detail``), or None when the store has no such span; with
    ``trace_id`` None, the first span with that id."""
    rows = _rows("span_detail", {"span_id": span_id, "trace_id": trace_id or None})
    return rows[0] if rows else None


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def episode_tasks(*, flagged: bool | None = None, limit: int = 200,
                  **filters: Any) -> dict[str, str | None]:
    """The task each run's root span reported (only with content captured), by episode id,
    for the runs ``episodes`` lists with the same arguments."""
    frame = _read("episode_tasks", flagged=flagged, limit=limit, **filters)
    if frame.empty:
        return {}
    return {str(e): (t if isinstance(t, str) and t else None)
            for e, t in zip(frame["episode_id"], frame["task"], strict=True)}


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def no_progress_rate(*, bucket_s: int = 60, points: int | None = None,
                     **filters: Any) -> pd.DataFrame:
    """Calls and no-progress calls per time bucket and service, with ``bucket`` as a time;
    buckets of ``bucket_s`` seconds, or, with ``points``, as wide as it takes for at most that
    many per service (the width used is ``bucket_s`` on each row)."""
    frame = _read("no_progress_rate", bucket_s=bucket_s, points=points, **filters)
    if not frame.empty:
        frame["bucket"] = pd.to_datetime(frame["bucket_ns"].astype("int64"), unit="ns")
    return frame


_WINDOW_TEXT: Final = re.compile(r"in the last ([\d.]+) s\b")
_THRESHOLD_TEXT: Final = re.compile(r"threshold (\d+(?:\.\d+)?)%")


def alert_rule(alert: pd.Series | Mapping[str, Any]) -> dict[str, float]:
    """The rule an alert was judged by: ``window_s``, ``threshold`` (a fraction), ``factor``
    and ``floor``, as the collector stored them with the alert. An alert stored before the
    store kept its rule (schema version 10) has none: its message gives the window and, when
    it fired by threshold, the threshold; the rest are the collector's defaults."""
    from loopscope_collector.alerts.settings import AlertSettings

    defaults = AlertSettings()
    stored = {name: alert.get(name) for name in ("window_s", "threshold", "factor", "floor")}
    given = {name: float(value) for name, value in stored.items()
             if value is not None and not pd.isna(value)}
    if len(given) == len(stored):
        return given
    message = str(alert.get("message") or "")
    window = _WINDOW_TEXT.search(message)
    threshold = _THRESHOLD_TEXT.search(message)
    return {"window_s": float(window.group(1)) if window else defaults.window_s,
            "threshold": float(threshold.group(1)) / 100 if threshold else defaults.threshold,
            "factor": defaults.factor, "floor": defaults.floor}


def alert_series(alert: pd.Series | Mapping[str, Any], *, windows_before: int = 4,
                 windows_after: int = 2) -> pd.DataFrame:
    """The series the spike rule evaluates around ``alert``: the no-progress rate of its
    service over the rule's rolling window, ending at each ``bucket`` (a twelfth of the
    window), with ``calls`` and ``no_progress`` in the window; at the firing itself, the
    counts the rule judged (stored with the alert)."""
    window_s = alert_rule(alert)["window_s"]
    bucket_s = max(1, round(window_s / 12))
    at_ns = int(pd.Timestamp(alert["fired_at"]).value)
    span = int(window_s * 1e9)
    rates = no_progress_rate(bucket_s=bucket_s, service=alert.get("service"),
                             since_ns=at_ns - (windows_before + 1) * span,
                             until_ns=at_ns + windows_after * span)
    if rates.empty:
        return pd.DataFrame(columns=["bucket", "rate", "calls", "no_progress"])
    step = bucket_s * 1_000_000_000
    counts = rates.groupby("bucket_ns")[["calls", "no_progress"]].sum()
    grid = range(int(counts.index.min()), int(counts.index.max()) + step, step)
    counts = counts.reindex(grid, fill_value=0)
    buckets = max(1, round(window_s / bucket_s))
    rolled = counts.rolling(buckets, min_periods=1).sum()
    rolled = rolled[rolled.index >= at_ns - windows_before * span]
    rolled.index = rolled.index + step  # each value belongs to its bucket's end
    firing = _fired_counts(alert)
    if firing is not None:  # what the rule judged at the firing itself, often inside a bucket
        rolled.loc[at_ns] = firing
        rolled = rolled.sort_index()
    return pd.DataFrame({
        "bucket": pd.to_datetime(rolled.index, unit="ns"),
        "calls": rolled["calls"].astype(int).values,
        "no_progress": rolled["no_progress"].astype(int).values,
        "rate": (rolled["no_progress"] / rolled["calls"].where(rolled["calls"] > 0)).values,
    })


def _fired_counts(alert: pd.Series | Mapping[str, Any]) -> tuple[int, int] | None:
    """(calls, no-progress calls) the rule judged at the firing: the ``volume`` and ``rate``
    the collector stored with the alert. The store cannot count them again: the rule counts a
    call by its end, once it has arrived, in its first verdict, and the alert's time is kept
    to the microsecond (a call that ended in that microsecond may fall after it). None when
    the alert has no volume."""
    volume, rate = alert.get("volume"), alert.get("rate")
    if volume is None or rate is None or pd.isna(volume) or pd.isna(rate) or not int(volume):
        return None
    return int(volume), round(float(rate) * int(volume))


def alert_destinations(sent_to: Any) -> str:
    """An alert's ``sent_to`` (JSON list) in words: ``log, webhook hooks.example.com,
    Prometheus (/metrics)``; alerts stored before it was recorded say so."""
    if not isinstance(sent_to, str) or not sent_to:
        return "not recorded (a collector older than schema version 12)"
    try:
        names = json.loads(sent_to)
    except ValueError:
        return sent_to
    words = {"log": "the collector's log", "prometheus": "Prometheus (/metrics)"}
    return ", ".join(words.get(str(n), str(n)) for n in names)


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def alerts(*, service: str | None = None, limit: int = 200) -> pd.DataFrame:
    """No-progress spike alerts, newest first."""
    return _read("alerts", service=service, limit=limit)


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def episode(episode_id: str) -> dict[str, Any] | None:
    """One episode's row, or None when the store has no such episode."""
    rows = _rows("episode", {"episode_id": episode_id, "stale_s": RUN_SILENT_S})
    return rows[0] if rows else None


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def episode_tool_calls(episode_id: str) -> pd.DataFrame:
    """The episode's tool calls in order, with ``call`` (the tool-call ordinal: 1, 2, …)."""
    return truth.number_calls(_read("episode_tool_calls", episode_id=episode_id))


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def episode_detections(episode_id: str) -> pd.DataFrame:
    """The collector's flags on one episode, in step order."""
    return _read("episode_detections", episode_id=episode_id)


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def guard_decisions(*, episode_id: str | None = None, service: str | None = None,
                    limit: int = 500) -> pd.DataFrame:
    """Decisions in-process guards made, newest first."""
    return _read("guard_decisions", episode_id=episode_id, service=service, limit=limit)


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def unknown_writes(*, service: str | None = None, limit: int = 200) -> pd.DataFrame:
    """Writes whose result was UNKNOWN, unresolved first."""
    return _read("unknown_writes", service=service, limit=limit)


@st.cache_data(ttl=SUMMARY_TTL, show_spinner=False, refresh_mode="background")
def loops_by_tool(**filters: Any) -> pd.DataFrame:
    """Per tool: calls, runs, no-progress calls, flags and flagged runs."""
    return _read("loops_by_tool", **filters).rename(columns=GLOSSARY_NAMES)


@st.cache_data(ttl=SUMMARY_TTL, show_spinner=False, refresh_mode="background")
def looping_signatures(**filters: Any) -> pd.DataFrame:
    """The calls that looped, ranked: tool, arguments preview, runs, calls, cost in loops,
    first seen (``first_seen`` as a time), the newest run and its call strip."""
    frame = _read("looping_signatures", **filters)
    if not frame.empty:
        frame["first_seen"] = pd.to_datetime(frame["first_seen_ns"].astype("int64"), unit="ns")
    return frame


@st.cache_data(ttl="30s", show_spinner=False)
def replay_episodes(*, limit: int = 10_000, **filters: Any) -> pd.DataFrame:
    """The runs the Policy page replays (``replay_episodes``), newest first, with labels."""
    return _read("replay_episodes", limit=limit, **filters)


@st.cache_data(ttl="30s", show_spinner=False)
def replay_calls(*, limit: int = 10_000, **filters: Any) -> list[dict[str, Any]]:
    """The tool calls of those runs, as the collector's detection is fed them: plain rows,
    not a DataFrame (hundreds of thousands of them become ``Episode`` steps)."""
    return _rows("replay_calls", {"limit": limit, **filters})


@st.cache_data(ttl="30s", show_spinner=False, refresh_mode="background")
def guard_policies(*, limit: int = 10_000, **filters: Any) -> pd.DataFrame:
    """The policies the guards recorded on those runs (``guard_policies``), most used first:
    ``policy`` (a policy file's JSON), ``runs``, ``modes``, ``newest_ns``."""
    return _read("guard_policies", limit=limit, **filters)


@st.cache_data(ttl=LIVE_TTL, show_spinner=False, refresh_mode="background")
def labels(*, episode_id: str | None = None, limit: int = 200) -> pd.DataFrame:
    """Human labels, newest first."""
    return _read("label_list", episode_id=episode_id, limit=limit)


# -- writes (through the collector) -----------------------------------------------------------


def save_label(episode_id: str, label: str | None, *, span_id: str = "",
               note: str | None = None) -> dict[str, Any]:
    """Send a human verdict to the collector, which stores it; the metrics count it. A
    ``label`` of ``None`` removes the run's (or the call's) label: undo.

    Raises:
        LabelsUnavailable: the dashboard reads a snapshot file, which is read-only.
        SourceError: the collector refused the label or could not be reached.
    """
    stored = _source().save_label({"episode_id": episode_id, "span_id": span_id,
                                   "label": label, "note": note})
    labels.clear()
    metrics.clear()
    loops_by_tool.clear()
    looping_signatures.clear()
    return stored


def send_traces(bodies: list[bytes]) -> int:
    """Post OTLP JSON export requests to the collector; returns how many were sent.

    Raises:
        SourceError: not a live collector, or it refused a request.
    """
    source = _source()
    if not source.live:
        raise SourceError("sending runs needs a live collector; this dashboard reads a file")
    for body in bodies:
        source.send_traces(body)
    st.cache_data.clear()
    return len(bodies)
