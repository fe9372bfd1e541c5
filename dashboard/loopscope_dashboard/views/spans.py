"""Spans: every span the store holds, newest first, filtered by any attribute or field
(``gen_ai.tool.name == "search_orders" and duration > 200ms``), with the columns a person
picks, the latency percentiles of the matching spans per tool, and the span inspector for the
row picked. The filter, the columns and the picked span live in the URL
(``/spans?where=...&cols=...&span=ID&trace=ID``); filtering runs in the collector's SQL with
the filter's values bound (``span_list``), so only the rows shown reach the browser."""

import json
from functools import partial
from typing import Any

import pandas as pd
import streamlit as st

from loopscope_dashboard import downloads, hints, inspector, queries, state, tables

SHOWN = 200
# the span's own columns the chooser offers, with their headers; attribute keys follow (a
# comment, not a docstring: Streamlit's magic would draw a bare string on the page)
BUILT_IN = {"started": "started (UTC)", "name": "name", "service": "service",
            "duration_ms": "duration", "status": "status", "kind": "kind", "tool": "tool",
            "run": "run", "call_ordinal": "call", "events": "events", "trace_id": "trace id",
            "span_id": "span id", "parent_span_id": "parent span id"}
DEFAULT_COLUMNS = ["started", "name", "tool", "duration_ms", "status", "run"]
EXAMPLE = 'gen_ai.tool.name == "search_orders" and duration > 200ms'


def _pick(frame: pd.DataFrame) -> None:
    """The table's row selection becomes the inspected span (in the URL)."""
    rows = st.session_state["spans_table"]["selection"]["rows"]
    if rows:
        picked = frame.iloc[rows[0]]
        state.inspect_span(str(picked["trace_id"]), str(picked["span_id"]))


st.title("Spans")
where = st.text_input(
    "Filter", key=state.SPAN_FILTER, bind="query-params", placeholder=EXAMPLE,
    help="Conditions joined by `and`: a field or attribute key, an operator (==, !=, >, >=, "
         "<, <=, contains) and a value — text in quotes, a number, true or false; a key alone "
         "means the span has it. `duration` takes milliseconds or a unit (200ms, 1.5s). "
         "Fields: " + ", ".join(queries.SPAN_FILTER_FIELDS) + "; any other name is an "
         "attribute key.")
filters = state.filters()
scope: dict[str, Any] = {"service": filters.service, "tool": filters.tool, "since_ns": filters.since_ns,
         "until_ns": filters.until_ns}
try:
    frame, total = queries.spans(where=where or "", limit=SHOWN, **scope)
    latency = queries.span_latency(where=where or "", **scope)
except queries.SpanFilterError as exc:
    st.error(f"This filter does not parse: {exc}. For example: `{EXAMPLE}`.")
    st.stop()

if frame.empty:
    if queries.store_is_empty() and not where:
        st.info(hints.empty_store())
    else:
        st.info("No span matches — loosen the filter, or widen the sidebar's service, tool and "
                "time range.")
    st.stop()

every = latency[latency["every_span"]].iloc[0]
cards = st.columns(4)
cards[0].metric("Spans matching", f"{total:,}", border=True)
for card, name in zip(cards[1:], ("p50", "p90", "p99"), strict=True):
    card.metric(f"Latency {name}", f"{every[f'{name}_ms']:,.1f} ms", border=True,
                help=f"The {name[1:]}th percentile of the matching spans' durations.")

frame["run"] = [state.episode_link(e) if isinstance(e, str) and e else None
                for e in frame["episode_id"]]
attributes = [json.loads(a) if isinstance(a, str) else {} for a in frame["attributes"]]
keys = sorted({key for found in attributes for key in found})
chosen_before = [c for c in st.session_state.get(state.SPAN_COLUMNS, []) or []
                 if c not in BUILT_IN]
columns = st.multiselect(
    "Columns", [*BUILT_IN, *dict.fromkeys([*keys, *chosen_before])],
    default=DEFAULT_COLUMNS, key=state.SPAN_COLUMNS, bind="query-params",
    accept_new_options=True, format_func=lambda c: BUILT_IN.get(c, c),
    help="The span's own columns, then the attribute keys of the spans shown (type any other "
         "key).") or DEFAULT_COLUMNS
for key in columns:
    if key not in BUILT_IN:  # an attribute: its text (a list or a number as JSON)
        frame[key] = [None if (value := found.get(key)) is None
                      else value if isinstance(value, str) else json.dumps(value)
                      for found in attributes]

st.caption(f"The newest {len(frame):,} of {total:,} matching spans"
           f"{'' if len(frame) == total else ' (narrow the filter to see older ones)'}; the "
           "sidebar's service, tool and time range apply (agent, model and outcome are a "
           "run's, not a span's). Pick a row to inspect its span below.")
tables.show(
    frame, height=tables.height(frame), hide_index=True, key="spans_table",
    on_select=partial(_pick, frame), selection_mode="single-row",
    column_order=columns,
    column_config={
        **{key: st.column_config.TextColumn(label) for key, label in BUILT_IN.items()},
        "started": st.column_config.DatetimeColumn(BUILT_IN["started"],
                                                   format="YYYY-MM-DD HH:mm:ss.SSS"),
        "duration_ms": st.column_config.NumberColumn(BUILT_IN["duration_ms"],
                                                     format="%.1f ms"),
        "run": st.column_config.LinkColumn(BUILT_IN["run"], display_text=r"episode=(.*)$"),
        "call_ordinal": st.column_config.NumberColumn(
            BUILT_IN["call_ordinal"], help="The call's number in its run (call 1 is the "
            "run's first tool call)."),
        "events": st.column_config.NumberColumn(BUILT_IN["events"]),
    })
downloads.offer(frame[[c for c in columns if c in frame.columns]], "spans", key="spans")

picked = state.inspected_span()
if picked is not None:
    inspector.show(picked[1], picked[0])

st.subheader("Latency by tool")
by_tool = latency[~latency["every_span"]]
if by_tool.empty:
    st.caption("No tool call among the matching spans.")
else:
    tables.show(
        by_tool, hide_index=True, height=tables.height(by_tool), key="latency_table",
        column_order=["tool", "spans", "p50_ms", "p90_ms", "p99_ms", "max_ms"],
        column_config={
            "spans": st.column_config.NumberColumn("calls"),
            **{f"{name}_ms": st.column_config.NumberColumn(name, format="%.1f ms")
               for name in ("p50", "p90", "p99", "max")}})
