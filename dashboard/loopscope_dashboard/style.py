"""The few CSS rules the dashboard adds to Streamlit's, applied once per run by the entrypoint.

Streamlit cuts a metric card's label and value with an ellipsis when they do not fit on one
line ("Enforce mode would have" / "done the same" at 1,400 px, four cards a row); a card
whose words are cut says less than it should, so cards wrap their text instead.

While a script or fragment reruns, Streamlit fades what it has not yet redrawn (to a third of
its strength, from 0.5 s in). The Overview redraws itself every 2 s from a live collector, from
reads that answer from the cache: on a busy machine a redraw passes 0.5 s and its cards faded
with every refresh, though the numbers shown were the latest known. What is inside the
``LIVE`` container keeps full strength and is replaced in place.
"""

from __future__ import annotations

from typing import Final

import streamlit as st

LIVE: Final = "live_in_place"
"""The key of a container whose elements are not faded while it redraws."""

RULES: Final = """<style>
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] *,
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * {
    white-space: normal !important;
    overflow: visible !important;
    text-overflow: clip !important;
    overflow-wrap: anywhere;
}
.st-key-%s [data-stale="true"] {
    opacity: 1 !important;
    transition: none !important;
}
</style>""".replace("%s", LIVE)


def apply() -> None:
    """Add the rules to the page (an ``st.html`` holding only a style draws nothing)."""
    st.html(RULES)
