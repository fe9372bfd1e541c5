"""Session-state keys, each spelled once, and the typed getters pages use to read them.

The sidebar's filter widgets write these keys (``key=``); every page reads the same
``Filters`` through ``filters()``, so a filter set on one page holds on the next.
"""

from __future__ import annotations

import time
from typing import Any, Final

import streamlit as st

from .queries import Filters

SERVICE: Final = "service"
AGENT: Final = "agent"
MODEL: Final = "model"
TOOL: Final = "tool"
OUTCOME: Final = "outcome"
TIME_RANGE: Final = "range"
"""The sidebar's filters; each key is also its URL query parameter (``bind="query-params"``),
so a copied URL reopens the same view."""
RUN_SEARCH: Final = "q"
RUN_VERDICT: Final = "verdict"
RUN_STATUS: Final = "status"
RUN_SORT: Final = "sort"
RUN_ASCENDING: Final = "asc"
RUN_PAGE: Final = "page"
"""The Runs page's search, verdict, status, order and page (URL query parameters too)."""
SOURCE_DOWN: Final = "source_down_since"
"""When this session last saw the collector go down (None: up), so the watcher reruns the
page once when that changes."""
EPISODE: Final = "episode_id"
"""The episode the Episode page shows (also its ``?episode=`` query parameter)."""
SPAN: Final = "span"
TRACE: Final = "trace"
"""The span the inspector shows, on the Episode and Spans pages: its ``?span=`` (span id) and
``?trace=`` (trace id) query parameters, set by a click on the trace or a table's row."""
SPAN_FILTER: Final = "where"
SPAN_COLUMNS: Final = "cols"
"""The Spans page's filter and chosen columns (URL query parameters too)."""
IMPORT_RESULT: Final = "import_result"
"""The Import page's last analysis: an ``uploads.Analysis``."""
POLICY_RECORDED: Final = "policy_recorded"
"""Which of the policies the guards recorded the Policy page compares against (an index)."""
POLICY_RESULT: Final = "policy_result"
"""The Policy page's last valid request: (``replay_jobs.View``, current policy, candidate),
what it shows while a field holds invalid JSON (the replays themselves are process-wide)."""
POLICY_CANDIDATE: Final = "policy_candidate"
POLICY_EDIT: Final = "policy_edit"
"""The Policy page's candidate as plain data (``replays.plain``) when it is not the current
policy, kept while its editor is closed, and whether the editor (drawn only when open) is."""
POLICY_SWEEP: Final = "policy_sweep"
"""The Policy page's last sweep: (key, the data version and finish time of the replay it
swept, DataFrame)."""
POLICY_SCOPE: Final = "policy_scope"
POLICY_CURRENT_JSON: Final = "policy_current_json"
POLICY_CANDIDATE_JSON: Final = "policy_candidate_json"
POLICY_EVERY_RUN: Final = "policy_every_run"
"""Whether the Policy page's expanders that draw only when open are open (the current and the
candidate policy as JSON, every run's verdict): their content is left out of the page until a
click asks for it, which keeps the browser's first draw of the page lighter."""
POLICY_CALIBRATION: Final = "policy_calibration"
"""The Policy page's last calibration from labels: (key, the data version and finish time
of the replay it ran on, ``calibrations.Calibration`` and the runs whose verdict it changes,
or the too-few-labels message)."""
CHARTS_DRAWN: Final = "charts_drawn"
CHARTS_WAITING: Final = "charts_waiting"
CHARTS_SIGNAL: Final = "charts_signal"
"""Whether this session draws its charts (the browser has shown a page drawn without them),
whether the run under way held one back, and the key of the signal the browser sends once it
has shown the page (``plots``)."""
LABEL_EPISODE: Final = "label_episode"
LABEL_FLAG: Final = "label_flag"
LABEL_UNDO: Final = "label_undo"
"""The Labels page's last change, to undo: (episode id, span id, label before, note before)."""
LABEL_SAVED: Final = "label_saved"
"""What the Labels page's last save or undo did, shown once on its next run."""
LABEL_NEXT: Final = "label_next"
"""The run the Labels page's picker moves to on its next run (set after a save or an undo)."""

ANY: Final = "(all)"
TIME_RANGES: Final[dict[str, int | None]] = {
    "All time": None,
    "Last 15 minutes": 15 * 60,
    "Last hour": 3600,
    "Last 24 hours": 24 * 3600,
    "Last 7 days": 7 * 24 * 3600,
}
SPANS_PAGE: Final = "spans"
"""URL path of the Spans page: ``/spans?where=FILTER&span=ID``."""
EPISODE_PAGE: Final = "episode"
"""URL path of the Episode page (``st.Page(url_path=...)``): deep links are
``/episode?episode=ID``."""


def _chosen(key: str) -> str | None:
    value = st.session_state.get(key)
    return None if value in (None, ANY) else str(value)


def filters() -> Filters:
    """The sidebar's filters as they stand in this session."""
    seconds = TIME_RANGES.get(st.session_state.get(TIME_RANGE) or "All time")
    since = None
    if seconds is not None:
        since = (int(time.time()) - seconds) * 1_000_000_000  # whole seconds: cache-friendly
    return Filters(_chosen(SERVICE), _chosen(AGENT), _chosen(MODEL), _chosen(TOOL),
                   _chosen(OUTCOME), since, None)


EPISODE_COLUMNS: Final[dict[str, Any]] = {
    "open": st.column_config.LinkColumn("run", display_text=r"episode=(.*)$",
                                        help="The run's episode id: opens its Episode page."),
    "guard_mode": st.column_config.TextColumn("mode"),
    "happened": st.column_config.TextColumn(
        "happened", help="What the guard really did to the run: stopped, blocked, warned or "
        "allowed (loopscope.guard.action and the run's real stop)."),
    "would_be": st.column_config.TextColumn(
        "enforce would", help="What enforce mode would have done, where it is more than what "
        "happened (observe and warn mode record it; the calls ran)."),
    "stops": st.column_config.NumberColumn(
        "stops", help="Calls the guard really blocked or stopped (docs/glossary.md)."),
    "would_stops": st.column_config.NumberColumn(
        "would-stops", help="Calls enforce mode would have blocked or stopped, which ran "
        "(observe and warn mode)."),
    "cost_usd": st.column_config.NumberColumn("cost", format="$%.4f"),
    "last_flag_at": st.column_config.DatetimeColumn("last flag (UTC)"),
}
"""Column headers and help of an episode list (``queries.episodes``), the same on every page."""


def episode_link(episode_id: str) -> str:
    """A relative deep link to the Episode page for ``episode_id``."""
    from urllib.parse import quote

    return f"{EPISODE_PAGE}?episode={quote(str(episode_id), safe='')}"


def inspect_span(trace_id: str, span_id: str) -> None:
    """Show the span ``span_id`` of ``trace_id`` in the page's inspector (URL included)."""
    st.query_params[SPAN] = span_id
    st.query_params[TRACE] = trace_id


def inspected_span() -> tuple[str | None, str] | None:
    """(trace id or None, span id) of the span the URL names, or None."""
    span_id = st.query_params.get(SPAN)
    return (st.query_params.get(TRACE) or None, span_id) if span_id else None
