"""The trace view: a run's spans as a waterfall, built with Plotly from DataFrames (no
Streamlit), as ``charts`` builds the other figures.

One bar per span, in start order, from its start to its end on a time axis that starts at the
run's first span: the agent's root span, model turns, the conversation's messages, tool calls
(labelled by their call number: call 1 is the run's first tool call, as in every table). Each bar's hover gives its
duration, tokens and cost. A tool call the collector flagged, or at which a guard acted, gets a
marker at its end: filled and red for what the guard really did (◆ warned, ✕ blocked,
■ stopped), hollow and grey for what enforce mode would have done where the call ran, an
orange ● for a flag with no guard action. Every bar and marker carries its span's trace and
span ids last in its ``customdata``, so a click on it names the span (``picked_span``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, SupportsInt

import pandas as pd
import plotly.graph_objects as go

from . import truth

COLORS: Final = {"agent": "#9467bd", "model": "#1f77b4", "message": "#17becf",
                 "tool": "#2ca02c", "failed": "#d62728", "other": "#a0a0a0"}
"""Bar colours by what a span is: the agent's root, a model turn, a message of the
conversation (loopscope's ``message {role}`` spans), a tool call, a failed span (status
ERROR), anything else (HTTP, database, ...)."""
_NAMES: Final = {"agent": "agent run", "model": "model turn", "message": "message",
                 "tool": "tool call", "failed": "failed span", "other": "other span"}
_SYMBOLS: Final = {"warn": "diamond", "block": "x", "stop": "square"}
_ACTED: Final = "#d62728"
_WOULD: Final = "#7f7f7f"
_FLAGGED: Final = "#ff7f0e"
_MODEL_OPERATIONS: Final = ("chat", "text_completion", "generate_content", "embeddings")


def span_rows(spans: pd.DataFrame, calls: pd.DataFrame,
              detections: pd.DataFrame) -> pd.DataFrame:
    """``spans`` (``queries.episode_spans``) as the waterfall's rows: ``label``, ``what``
    (agent, model, tool, other), ``start_ms`` from the first span, ``duration_ms``, the call
    number, what the guard did and enforce would have done there, and the flag kinds."""
    if spans.empty:
        return spans.assign(label=[], what=[], start_ms=[], duration_ms=[])
    rows = spans.sort_values("start_ns", kind="stable").reset_index(drop=True)
    origin = int(rows["start_ns"].min())
    rows["start_ms"] = (rows["start_ns"] - origin) / 1e6
    rows["duration_ms"] = (rows["end_ns"] - rows["start_ns"]) / 1e6
    by_span = calls.set_index("span_id") if not calls.empty else pd.DataFrame()
    rows["call"] = [_ordinal(by_span, s) for s in rows["span_id"]]
    rows["guard_action"] = [_at(by_span, s, "guard_action") for s in rows["span_id"]]
    rows["guard_decision"] = [_at(by_span, s, "guard_decision") for s in rows["span_id"]]
    flags: dict[str, list[str]] = {}
    strongest: dict[str, str] = {}
    for _, flag in (detections.iterrows() if not detections.empty else iter(())):
        flags.setdefault(flag["span_id"], []).append(str(flag["kind"]))
        if truth.rank(flag["action"]) > truth.rank(strongest.get(flag["span_id"])):
            strongest[flag["span_id"]] = str(flag["action"])
    rows["flags"] = [", ".join(dict.fromkeys(flags.get(s, []))) for s in rows["span_id"]]
    rows["decided"] = [_stronger(d, strongest.get(s)) for s, d in
                       zip(rows["span_id"], rows["guard_decision"], strict=True)]
    rows["what"] = [_what(r) for r in rows.itertuples()]
    rows["label"] = [_label(r) for r in rows.itertuples()]
    return rows.reset_index(drop=True)


def trace_waterfall(spans: pd.DataFrame, calls: pd.DataFrame,
                    detections: pd.DataFrame) -> go.Figure:
    """The waterfall of one run's spans; guard actions and flags marked at the calls' ends."""
    rows = span_rows(spans, calls, detections)
    labels = [f"{i + 1:>3}. {label}" for i, label in enumerate(rows["label"])]
    shortest = max(float(rows["duration_ms"].max() or 0) / 250, 0.001)  # a visible sliver
    fig = go.Figure()
    for what, color in COLORS.items():
        part = rows[rows["what"] == what]
        if part.empty:
            continue
        fig.add_trace(go.Bar(
            name=_NAMES[what],
            y=[labels[i] for i in part.index], x=part["duration_ms"].clip(lower=shortest),
            base=part["start_ms"], orientation="h", marker_color=color,
            customdata=list(zip(part["duration_ms"], part["tokens_in"].fillna(0),
                                part["tokens_out"].fillna(0),
                                part["cost_usd"].map(_money), part["flags"].replace("", "—"),
                                part["trace_id"], part["span_id"], strict=True)),
            hovertemplate="%{y}<br>%{customdata[0]:,.1f} ms<br>tokens in %{customdata[1]:,}"
                          " / out %{customdata[2]:,}<br>cost %{customdata[3]}<br>flags "
                          "%{customdata[4]}<extra></extra>",
        ))
    _mark(fig, rows, labels)
    fig.update_layout(
        barmode="overlay", height=max(260, 22 * len(rows) + 120),
        xaxis_title="milliseconds since the run's first span",
        yaxis={"autorange": "reversed", "type": "category", "categoryorder": "array",
               "categoryarray": labels},  # start order, whatever the trace a bar is in
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
    )
    return fig


def picked_span(point: Mapping[str, Any]) -> tuple[str, str] | None:
    """(trace id, span id) of a clicked bar or marker (a point of Streamlit's selection
    state), or None for a point that carries no span."""
    data = point.get("customdata")
    if not isinstance(data, list | tuple) or len(data) < 2:
        return None
    trace_id, span_id = data[-2], data[-1]
    return (trace_id, span_id) if isinstance(span_id, str) and span_id else None


def _ids(rows: pd.DataFrame, part: pd.DataFrame) -> list[list[str]]:
    return [[str(rows.at[i, "trace_id"]), str(rows.at[i, "span_id"])] for i in part.index]


def _mark(fig: go.Figure, rows: pd.DataFrame, labels: list[str]) -> None:
    ends = rows["start_ms"] + rows["duration_ms"]
    for action, symbol in _SYMBOLS.items():
        acted = rows[rows["guard_action"] == action]
        if not acted.empty:
            fig.add_trace(go.Scatter(
                name=f"guard {truth.DONE[action]}", mode="markers",
                x=ends[acted.index], y=[labels[i] for i in acted.index],
                customdata=_ids(rows, acted),
                marker={"symbol": symbol, "size": 11, "color": _ACTED},
                hovertemplate=f"%{{y}}: the guard {truth.DONE[action]} this call"
                              "<extra></extra>"))
        would = rows[(rows["decided"] == action)
                     & (rows["guard_action"].map(truth.rank) < truth.rank(action))]
        if not would.empty:
            fig.add_trace(go.Scatter(
                name=f"enforce {truth.WOULD[action]}", mode="markers",
                x=ends[would.index], y=[labels[i] for i in would.index],
                customdata=_ids(rows, would),
                marker={"symbol": f"{symbol}-open", "size": 11, "color": _WOULD},
                hovertemplate=f"%{{y}}: enforce mode {truth.WOULD[action]} here (the call "
                              "ran)<extra></extra>"))
    flagged = rows[(rows["flags"] != "") & (rows["decided"].map(truth.rank) == 0)
                   & (rows["guard_action"].map(truth.rank) == 0)]
    if not flagged.empty:
        fig.add_trace(go.Scatter(
            name="flagged", mode="markers", x=ends[flagged.index],
            y=[labels[i] for i in flagged.index], customdata=_ids(rows, flagged),
            marker={"symbol": "circle", "size": 9, "color": _FLAGGED},
            hovertemplate="%{y}: flagged<extra></extra>"))


def _ordinal(frame: pd.DataFrame, span_id: str) -> int | None:
    """The tool-call ordinal of ``span_id``; None for a span that is not a tool call."""
    if span_id not in frame.index:
        return None
    value = frame.at[span_id, "call"]
    return int(value) if isinstance(value, SupportsInt) else None


def _at(frame: pd.DataFrame, span_id: str, column: str) -> str | None:
    if span_id not in frame.index or column not in frame.columns:
        return None
    value = frame.at[span_id, column]
    return value if isinstance(value, str) else None


def _stronger(a: str | None, b: str | None) -> str | None:
    return a if truth.rank(a) >= truth.rank(b) and a is not None else b


def _what(row: object) -> str:
    if getattr(row, "status_code", 0) == 2:
        return "failed"
    if getattr(row, "is_call", False):
        return "tool"
    operation = getattr(row, "operation", None)
    if operation == "invoke_agent" or not getattr(row, "parent_span_id", ""):
        return "agent"
    if operation == "message" or str(getattr(row, "name", "")).startswith("message "):
        return "message"
    if operation in _MODEL_OPERATIONS:
        return "model"
    return "tool" if operation == "execute_tool" else "other"


def _label(row: object) -> str:
    call = getattr(row, "call", None)
    if call is not None and not pd.isna(call):
        return f"call {int(call)} · {getattr(row, 'tool', '') or getattr(row, 'name', '')}"
    return str(getattr(row, "name", ""))


def _money(value: object) -> str:
    if not isinstance(value, int | float) or pd.isna(value):
        return "—"
    return f"${float(value):.4f}"
