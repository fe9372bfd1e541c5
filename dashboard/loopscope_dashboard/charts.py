"""Pure Plotly builders: a DataFrame in, a ``go.Figure`` out, no Streamlit.

Each chart is a function of the rows a named read returns, so it can be tested on a small
hand-made DataFrame. Colours carry meaning and are the same on every page: a call signature
seen more than once in a run gets a colour of its own (a repeat stands out), a signature seen
once is grey, and loop segments are shaded red (oscillation cycles purple).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import truth

PALETTE: Final = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                  "#e377c2", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31")
UNIQUE_COLOR: Final = "#c7c7c7"
"""A signature called once in the run: nothing to see."""
LOOP_FILL: Final = "rgba(214, 39, 40, 0.15)"
CYCLE_FILL: Final = "rgba(148, 103, 189, 0.22)"
ALERT_COLOR: Final = "#d62728"
GAP_FILL: Final = "rgba(127, 127, 127, 0.12)"
"""Calls the agent made whose spans never arrived (``truth.missing_calls``)."""
WOULD_COLOR: Final = "#7f7f7f"
"""A would-be action (what enforce would have done; the call ran): hollow and grey."""
NO_PROGRESS: Final = "none"
"""``collector_progress`` of a call that made no progress."""
_GUARD_SYMBOLS: Final = {"warn": "diamond", "block": "x", "stop": "square"}


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of calls (call ordinals ``start``..``end`` inclusive) without progress, and why."""

    start: int
    end: int
    kind: str

    @property
    def is_cycle(self) -> bool:
        """An oscillation: A→B→A→B, drawn in its own colour."""
        return self.kind == "oscillation"


def signature_colors(calls: pd.DataFrame) -> dict[str, str]:
    """A colour per signature, in order of first appearance; grey for signatures seen once."""
    if calls.empty:
        return {}
    counts = calls["signature"].value_counts()
    colors: dict[str, str] = {}
    repeated = 0
    for signature in dict.fromkeys(calls["signature"]):
        if counts[signature] > 1:
            colors[signature] = PALETTE[repeated % len(PALETTE)]
            repeated += 1
        else:
            colors[signature] = UNIQUE_COLOR
    return colors


def loop_segments(calls: pd.DataFrame, detections: pd.DataFrame) -> list[Segment]:
    """The loop segments of one run: each stretch of two or more consecutive calls without
    progress that holds a flag, named by that flag's kind, plus each flag outside any such
    stretch as a one-call segment.

    ``calls`` needs ``call`` (the tool-call ordinal), ``span_id`` and ``collector_progress``;
    ``detections`` needs ``span_id`` and ``kind`` (flags are placed by span). Calls that never
    arrived (a gap in the agent's numbers) end a stretch: nothing is known of them.
    """
    if calls.empty:
        return []
    ordinal_of = dict(zip(calls["span_id"], calls["call"], strict=True))
    flags: dict[int, str] = {}
    if not detections.empty:
        for span_id, kind in zip(detections["span_id"], detections["kind"], strict=True):
            if span_id in ordinal_of:
                flags.setdefault(int(ordinal_of[span_id]), str(kind))
    stretches: list[tuple[int, int]] = []
    start: int | None = None
    end = 0
    ordered = calls.sort_values("call")
    for ordinal, progress in zip(ordered["call"], ordered["collector_progress"], strict=True):
        if start is not None and int(ordinal) != end + 1:  # a gap: the stretch ends there
            stretches.append((start, end))
            start = None
        if progress == NO_PROGRESS:
            start = int(ordinal) if start is None else start
            end = int(ordinal)
            continue
        if start is not None:
            stretches.append((start, end))
        start = None
    if start is not None:
        stretches.append((start, end))
    segments: list[Segment] = []
    covered: set[int] = set()
    for first, last in stretches:
        inside = [flags[o] for o in sorted(flags) if first <= o <= last]
        if last > first and inside:
            kind = "oscillation" if "oscillation" in inside else inside[0]
            segments.append(Segment(first, last, kind))
            covered.update(range(first, last + 1))
    segments += [Segment(o, o, k) for o, k in sorted(flags.items()) if o not in covered]
    return sorted(segments, key=lambda s: s.start)


def tool_timeline(calls: pd.DataFrame, detections: pd.DataFrame | None = None,
                  *, budget_limit: float | None = None,
                  missing: list[tuple[int, int]] | None = None) -> go.Figure:
    """The run's tool calls, call ordinal across and tool down, one trace per signature; loop
    segments shaded; below, the calls used against the budget with what the guard did
    (filled: warned, blocked, stopped) apart from what enforce would have done where that is
    more (hollow: would warn, would block, would stop).

    ``calls`` is ``queries.episode_tool_calls``: ``call``, ``tool``, ``signature``,
    ``collector_progress``, ``guard_action`` / ``guard_decision``, ``status``, and
    ``args_text`` when content was captured (then it names the signatures). ``missing``
    (``truth.missing_calls``) are the agent's calls that never arrived: grey bands, named.
    The calls used are the agent's count at each call (its number), what a budget counts.
    """
    detections = detections if detections is not None else pd.DataFrame()
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28],
                        vertical_spacing=0.06)
    if calls.empty:
        return _empty(fig, "no tool calls in this run")
    colors = signature_colors(calls)
    for signature, color in colors.items():
        group = calls[calls["signature"] == signature]
        stuck = group["collector_progress"].eq(NO_PROGRESS)
        fig.add_trace(go.Scatter(
            x=group["call"], y=group["tool"], mode="markers",
            name=signature_label(group.iloc[0]),
            legendgroup=signature, showlegend=color != UNIQUE_COLOR,
            marker={"color": color, "size": 13,
                    "symbol": ["circle-open" if s else "circle" for s in stuck],
                    "line": {"width": 2, "color": color}},
            customdata=group[["signature", "status", "collector_progress"]].fillna("").values,
            hovertemplate=("call %{x}: %{y}<br>signature %{customdata[0]}<br>status "
                           "%{customdata[1]}, progress %{customdata[2]}<extra></extra>"),
        ), row=1, col=1)
    for segment in loop_segments(calls, detections):
        fig.add_vrect(x0=segment.start - 0.45, x1=segment.end + 0.45, line_width=0,
                      fillcolor=CYCLE_FILL if segment.is_cycle else LOOP_FILL,
                      annotation_text=segment.kind, annotation_position="top left",
                      row=1, col=1)
    for first, last in missing or ():
        fig.add_vrect(x0=first - 0.45, x1=last + 0.45, line_width=0, fillcolor=GAP_FILL,
                      annotation_text=truth.gap_text([(first, last)]).replace(
                          " not received", "<br>not received"),
                      annotation_position="bottom left", row=1, col=1)
    used = calls["call"].astype(int)
    fig.add_trace(go.Scatter(x=calls["call"], y=used, mode="lines", name="tool calls used",
                             line={"color": "#555", "shape": "hv"}), row=2, col=1)
    if budget_limit is not None:
        fig.add_hline(y=budget_limit, line_dash="dot", line_color=ALERT_COLOR,
                      annotation_text=f"budget {budget_limit:g}", row=2, col=1)
    done, would = _guard_marks(calls)
    for action, rows in done.items():
        fig.add_trace(go.Scatter(
            x=calls.loc[rows, "call"], y=used[rows], mode="markers", name=truth.DONE[action],
            marker={"symbol": _GUARD_SYMBOLS[action], "size": 11, "color": ALERT_COLOR},
            hovertemplate=f"call %{{x}}: the guard {truth.DONE[action]} it<extra></extra>",
        ), row=2, col=1)
    for action, rows in would.items():
        fig.add_trace(go.Scatter(
            x=calls.loc[rows, "call"], y=used[rows], mode="markers",
            name=f"{truth.WOULD[action]} (enforce)",
            marker={"symbol": _GUARD_SYMBOLS[action] + "-open", "size": 11,
                    "color": WOULD_COLOR, "line": {"width": 2, "color": WOULD_COLOR}},
            hovertemplate=(f"call %{{x}}: enforce mode {truth.WOULD[action]}; the call ran"
                           "<extra></extra>"),
        ), row=2, col=1)
    fig.update_yaxes(title_text="tool", row=1, col=1, type="category")
    fig.update_yaxes(title_text="calls", row=2, col=1, rangemode="tozero")
    fig.update_xaxes(title_text="call", row=2, col=1,
                     dtick=1 if int(calls["call"].max()) <= 40 else None)
    fig.update_layout(height=520, margin={"t": 30, "b": 30}, legend_title_text="signature")
    return fig


def signature_label(call: pd.Series) -> str:
    """A signature as a person reads it: ``tool(arguments…)`` when content was captured, else
    ``tool · short hash``."""
    args = call.get("args_text")
    if isinstance(args, str) and args:
        return f"{call['tool']}({args[:40]}{'…' if len(args) > 40 else ''})"
    return f"{call.get('tool', '')} · {_short(call.get('signature'))}"


def _guard_marks(calls: pd.DataFrame) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Rows by what the guard did (warn, block, stop), and by what enforce would have done
    where that is more than what happened."""
    done: dict[str, list[Any]] = {}
    would: dict[str, list[Any]] = {}
    action = calls.get("guard_action", pd.Series(index=calls.index, dtype=object))
    decision = calls.get("guard_decision", pd.Series(index=calls.index, dtype=object))
    blocked = calls.get("status", pd.Series(index=calls.index, dtype=object)).eq("blocked")
    for index in calls.index:
        did = action[index] if isinstance(action[index], str) else None
        if did is None and blocked[index]:
            did = "block"
        if did in _GUARD_SYMBOLS:
            done.setdefault(did, []).append(index)
        wanted = decision[index] if isinstance(decision[index], str) else None
        if wanted in _GUARD_SYMBOLS and truth.rank(wanted) > truth.rank(did):
            would.setdefault(wanted, []).append(index)
    return done, would


def rate_over_time(rates: pd.DataFrame, alerts: pd.DataFrame | None = None) -> go.Figure:
    """No-progress rate per time bucket, one line per service, alerts as red markers.

    ``rates`` is ``queries.no_progress_rate`` (``bucket``, ``service``, ``rate``, ``calls``);
    ``alerts`` is ``queries.alerts`` (``fired_at``, ``service``, ``rate``, ``message``).
    """
    fig = go.Figure()
    if rates.empty:
        return _empty(fig, "no tool calls in this time range")
    for service, group in rates.groupby("service", sort=True):
        fig.add_trace(go.Scatter(
            x=group["bucket"], y=group["rate"], mode="lines+markers", name=str(service),
            customdata=group[["calls", "no_progress"]].values,
            hovertemplate=("%{x}<br>%{y:.0%} without progress (%{customdata[1]} of "
                           "%{customdata[0]} calls)<extra>" + str(service) + "</extra>"),
        ))
    if alerts is not None and not alerts.empty:
        fig.add_trace(go.Scatter(
            x=alerts["fired_at"], y=alerts["rate"], mode="markers", name="alert fired",
            marker={"symbol": "triangle-up", "size": 14, "color": ALERT_COLOR},
            text=alerts["message"], hovertemplate="%{x}<br>%{text}<extra>alert</extra>",
        ))
    fig.update_yaxes(title_text="no-progress rate", tickformat=".0%", rangemode="tozero")
    width = f", per {_duration(int(rates['bucket_s'].iloc[0]))}" if "bucket_s" in rates else ""
    fig.update_xaxes(title_text=f"time (UTC){width}")
    fig.update_layout(height=340, margin={"t": 30, "b": 30})
    return fig


def _duration(seconds: int) -> str:
    """``60`` → ``1 min``, ``10800`` → ``3 h``, ``172800`` → ``2 days``: a bucket's width."""
    for unit, name in ((86400, "day"), (3600, "h"), (60, "min")):
        if seconds >= unit and seconds % unit == 0:
            count = seconds // unit
            return f"{count} {name}" + ("s" if name == "day" and count > 1 else "")
    return f"{seconds} s"


def alert_context(series: pd.DataFrame, alert: pd.Series, rule: dict[str, float],
                  firings: pd.DataFrame | None = None) -> go.Figure:
    """The series one spike alert was judged on, with the rule drawn on it.

    ``series`` is ``queries.alert_series`` (the rolling-window rate: ``bucket``, ``rate``,
    ``calls``); ``rule`` is ``queries.alert_rule`` (``threshold``, ``window_s``, ``factor``,
    ``floor``). Draws the threshold, the baseline and the firing level it gives when the alert
    had a baseline, every firing of the service in range (``firings``, as ``queries.alerts``)
    and the resolution.
    """
    fig = go.Figure()
    if series.empty:
        return _empty(fig, "no tool calls around this alert")
    window = f"{rule['window_s']:g} s"
    fig.add_trace(go.Scatter(
        x=series["bucket"], y=series["rate"], mode="lines", name=f"no-progress rate ({window})",
        line={"color": "#1f77b4", "shape": "hv"},
        customdata=series[["no_progress", "calls"]].values,
        hovertemplate=("%{x}<br>%{y:.0%} of the calls in the last " + window
                       + " (%{customdata[0]} of %{customdata[1]})<extra></extra>")))
    fig.add_hline(y=rule["threshold"], line_dash="dash", line_color=ALERT_COLOR,
                  annotation_text=f"threshold {rule['threshold']:.0%}",
                  annotation_position="top left")
    baseline = alert.get("baseline")
    if baseline is not None and not pd.isna(baseline):
        level = min(rule["threshold"], max(baseline * rule["factor"], rule["floor"]))
        fig.add_hline(y=baseline, line_dash="dot", line_color="#7f7f7f",
                      annotation_text=f"baseline {baseline:.0%}",
                      annotation_position="bottom left")
        if level < rule["threshold"]:
            fig.add_hline(y=level, line_dash="dashdot", line_color="#ff7f0e",
                          annotation_text=f"fires at {level:.0%} ({rule['factor']:g}× baseline)",
                          annotation_position="top right")
    marks = firings if firings is not None and not firings.empty else pd.DataFrame([alert])
    fig.add_trace(go.Scatter(
        x=marks["fired_at"], y=marks["rate"], mode="markers", name="fired",
        marker={"symbol": "triangle-up", "size": 14, "color": ALERT_COLOR},
        text=marks["message"], hovertemplate="%{x}<br>%{text}<extra>fired</extra>"))
    resolved = alert.get("resolved_at")
    if resolved is not None and not pd.isna(resolved):
        fig.add_vline(x=resolved, line_color="#2ca02c", line_dash="dash")
    fig.update_yaxes(title_text="no-progress rate", tickformat=".0%", rangemode="tozero")
    fig.update_xaxes(title_text="time (UTC)")
    fig.update_layout(height=300, margin={"t": 30, "b": 30}, showlegend=True)
    return fig


def _short(signature: object) -> str:
    text = str(signature or "")
    return text[:10] if text else "(no signature)"


def _empty(fig: go.Figure, message: str) -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper",
                       yref="paper", font={"size": 14, "color": "#888"})
    fig.update_layout(height=220)
    return fig


def sweep_chart(sweep: pd.DataFrame, setting: str) -> go.Figure:
    """Loops caught and false stops for each value of one policy setting (the Policy page's
    sweep): a good value catches many loops for few false stops.

    ``sweep`` has the ``setting`` column and ``caught``, ``labelled_loops``, ``false_stops``;
    values named in its ``policy`` column (current, candidate) get a dotted line and a note.
    """
    fig = go.Figure()
    if sweep.empty:
        return _empty(fig, "no runs to replay")
    x = sweep[setting].astype(str)
    fig.add_trace(go.Scatter(x=x, y=sweep["caught"], mode="lines+markers",
                             name="loops caught", line={"color": "#2ca02c"},
                             customdata=sweep[["labelled_loops"]].values,
                             hovertemplate=f"{setting} %{{x}}: %{{y}} of %{{customdata[0]}} "
                                           "labelled loops caught<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=sweep["false_stops"], mode="lines+markers",
                             name="false stops", line={"color": ALERT_COLOR},
                             hovertemplate=f"{setting} %{{x}}: %{{y}} false stops"
                                           "<extra></extra>"))
    if "policy" in sweep.columns:  # the current and candidate values, marked
        # by position: on a category axis Plotly reads a number-like name ("3") as a position
        for position, mark in enumerate(sweep["policy"]):
            if mark:
                fig.add_annotation(x=position, y=1, yref="paper", text=mark, showarrow=False,
                                   yanchor="bottom", font={"size": 11})
                fig.add_shape(type="line", x0=position, x1=position, y0=0, y1=1,
                              yref="paper", line={"dash": "dot", "width": 1, "color": "#888"})
    fig.update_xaxes(title_text=setting, type="category")
    fig.update_yaxes(title_text="runs", rangemode="tozero")
    fig.update_layout(height=320, margin={"t": 40, "b": 30}, hovermode="x unified")
    return fig
