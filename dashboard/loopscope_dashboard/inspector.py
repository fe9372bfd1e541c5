"""The span inspector: one span as the store holds it, drawn where a page shows a selected
span (the Episode page under its trace, the Spans page under its table).

Its trace and span ids in copyable boxes, what the span is (service, kind, status, duration,
start, the run and call it belongs to), its input and output when content was captured, its
attributes as a table and as JSON, its events, and the resource that sent it. The pure parts
(``attribute_rows``, ``event_rows``, ``content``) take the stored JSON and return frames and
text, so they are tested without Streamlit.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pandas as pd
import streamlit as st

from loopscope import conventions as c

from . import queries, state, tables

INPUTS: Final = (c.GEN_AI_TOOL_CALL_ARGUMENTS, "gen_ai.input.messages", "input.value",
                 "traceloop.entity.input", c.TASK)
"""Where a span's input is, by convention, first found first: a tool call's arguments, a
model call's messages (GenAI, OpenInference, OpenLLMetry), a run's task."""
OUTPUTS: Final = (c.GEN_AI_TOOL_CALL_RESULT, "gen_ai.output.messages", "output.value",
                  "traceloop.entity.output", c.MESSAGE_CONTENT)
"""Where its output is: a tool call's result, a model call's answer, a message's text."""


def attribute_rows(attributes: dict[str, Any]) -> pd.DataFrame:
    """One row per attribute, by key: ``key``, ``value`` (text; a list as JSON), ``type``."""
    rows = [{"key": key, "value": _text(value), "type": _type(value)}
            for key, value in sorted(attributes.items())]
    return pd.DataFrame(rows, columns=["key", "value", "type"])


def event_rows(events: list[dict[str, Any]], start_ns: int) -> pd.DataFrame:
    """One row per event, in time order: ``at_ms`` (from the span's start), ``name``,
    ``attributes`` (JSON text)."""
    rows = [{"at_ms": (int(e.get("time_ns") or start_ns) - start_ns) / 1e6,
             "name": str(e.get("name", "")),
             "attributes": json.dumps(e.get("attributes") or {}, ensure_ascii=False)}
            for e in sorted(events, key=lambda e: int(e.get("time_ns") or 0))]
    return pd.DataFrame(rows, columns=["at_ms", "name", "attributes"])


def content(attributes: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str] | None:
    """(key, text) of the first of ``keys`` the span carries, its text pretty-printed when
    it is JSON; None when it carries none (content not captured, or none to capture)."""
    for key in keys:
        value = attributes.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:
                return key, value
            value = parsed if isinstance(parsed, dict | list) else value
        if isinstance(value, dict | list):
            return key, json.dumps(value, indent=2, ensure_ascii=False)
        return key, str(value)
    return None


def show(span_id: str, trace_id: str | None = None) -> None:
    """Draw the inspector for one span, or say that the store has no such span."""
    row = queries.span(span_id, trace_id)
    if row is None:
        st.warning(f"This store has no span {span_id!r}"
                   + (f" in trace {trace_id!r}" if trace_id else "")
                   + ". Pick one on the trace or in a table, or check the link.")
        return
    attributes = _loads(row.get("attributes"), {})
    events = _loads(row.get("events"), [])
    resource = _loads(row.get("resource"), {})
    st.subheader(f"Span: {row['name']}")
    facts = [f"service **{row['service']}**", f"kind {row['kind']}",
             f"status **{row['status']}**", f"{float(row['duration_ms']):,.1f} ms",
             "started " + pd.Timestamp(int(row["start_ns"]), unit="ns").strftime(
                 "%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"]
    if row.get("episode_id"):
        run = f"run [{row['episode_id']}]({state.episode_link(row['episode_id'])})"
        call = row.get("call_ordinal")
        facts.append(run + (f", call {int(call)}" if isinstance(call, int | float)
                            and not pd.isna(call) else ""))
    st.markdown(" · ".join(facts))
    if row["status"] == "error" and row.get("status_message"):
        st.error(row["status_message"])
    ids = st.columns(3)
    for column, label, value in ((ids[0], "trace id", row["trace_id"]),
                                 (ids[1], "span id", row["span_id"]),
                                 (ids[2], "parent span id", row["parent_span_id"] or "— (root)")):
        column.caption(label)
        column.code(value, language=None)

    given, made = content(attributes, INPUTS), content(attributes, OUTPUTS)
    if given or made:
        sides = st.columns(2)
        for column, label, found in ((sides[0], "Input", given), (sides[1], "Output", made)):
            with column:
                st.markdown(f"**{label}**" + (f" · `{found[0]}`" if found else ""))
                if found:
                    st.code(found[1], language=_language(found[1]), wrap_lines=True,
                            height=min(320, 24 * (found[1].count("\n") + 2)))
                else:
                    st.caption("—")
    elif attributes.get(c.CONTENT_CAPTURED) is False:
        st.caption("Input and output were not captured: start the agent with "
                   "`loopscope.instrument(capture_content=True)` to keep them on its spans.")

    table, raw, listed, sender = st.tabs([f"Attributes ({len(attributes)})", "JSON",
                                          f"Events ({len(events)})", "Resource"])
    with table:
        shown = attribute_rows(attributes)
        tables.show(shown, hide_index=True, height=tables.height(shown), key="span_attributes",
                    column_config={"value": st.column_config.TextColumn(width="large")})
    with raw:
        st.json({"trace_id": row["trace_id"], "span_id": row["span_id"],
                 "parent_span_id": row["parent_span_id"], "name": row["name"],
                 "kind": row["kind"], "start_ns": row["start_ns"], "end_ns": row["end_ns"],
                 "status": {"code": row["status"], **({"message": row["status_message"]}
                                                      if row.get("status_message") else {})},
                 "attributes": attributes, "events": events, "scope": row.get("scope"),
                 "resource": resource}, expanded=2)
    with listed:
        if events:
            tables.show(event_rows(events, int(row["start_ns"])), hide_index=True,
                        key="span_events", column_config={
                            "at_ms": st.column_config.NumberColumn(
                                "at", format="%.3f ms", help="From the span's start."),
                            "attributes": st.column_config.TextColumn(width="large")})
        else:
            st.caption("This span has no events.")
    with sender:
        tables.show(attribute_rows(resource), hide_index=True, key="span_resource")


def _loads(text: Any, empty: Any) -> Any:
    if not isinstance(text, str) or not text:
        return empty
    try:
        return json.loads(text)
    except ValueError:
        return empty


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    return "list" if isinstance(value, list) else "string"


def _language(text: str) -> str | None:
    return "json" if text[:1] in ("{", "[") else None
