"""How a chart is drawn: ``show``, through which every Plotly chart of the dashboard goes.

The browser loads Plotly's script (4.7 MB) when a page first draws a chart, and until it has
loaded it Streamlit's frontend shows none of the elements that came with the chart: the whole
page waited for it. On the Overview, opened in a fresh browser on the demo's store (2 cores),
the cards and the table came at 4.8 s with the chart and at 2.6-3.4 s without it.

So a session's first run draws each chart as a placeholder of its height, and ``finish`` ends
the run with a signal that the browser sends back once it has put the page on screen; the run
that follows draws the charts, while the page's words and tables are already there. (The run
cannot simply follow at once: the browser, still drawing the first, held the whole page back
again, 4 of 4 times; a second later, 1 of 4.) Every later run of the session draws its charts
at once: the browser has Plotly by then.
"""

from __future__ import annotations

from typing import Any, Final

import plotly.graph_objects as go
import streamlit as st

from . import state

DEFAULT_HEIGHT_PX: Final = 450
"""Plotly's height for a figure that does not set one."""
_ON_SCREEN: Final = st.components.v2.component(
    "loopscope_on_screen",
    js="export default function (component) { component.setTriggerValue('shown', true); }")
"""Mounted (so run) by the browser once the page is on screen: asks for the next run."""


def show(figure: go.Figure, *, key: str, **options: Any) -> Any:
    """``st.plotly_chart(figure, key=key, **options)``; in a session's first run, a
    placeholder of the figure's height instead (``finish`` has the chart drawn)."""
    if st.session_state.get(state.CHARTS_DRAWN):
        return st.plotly_chart(figure, key=key, **options)
    st.session_state[state.CHARTS_WAITING] = True
    with st.container(height=int(figure.layout.height or DEFAULT_HEIGHT_PX), border=False):
        st.caption("Drawing the chart…")
    return None


def finish() -> None:
    """At the end of a page's run: if it held a chart back (``show``), the signal that reruns
    the page once the browser has drawn it. (A fragment's rerun never needs it: the session's
    first run is a page's.)"""
    if st.session_state.pop(state.CHARTS_WAITING, False):
        _ON_SCREEN(key=state.CHARTS_SIGNAL, on_shown_change=_draw_charts)


def _draw_charts() -> None:
    st.session_state[state.CHARTS_DRAWN] = True
