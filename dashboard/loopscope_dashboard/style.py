"""The few CSS rules the dashboard adds to Streamlit's, applied once per run by the entrypoint.

Streamlit cuts a metric card's label and value with an ellipsis when they do not fit on one
line ("Enforce mode would have" / "done the same" at 1,400 px, four cards a row); a card
whose words are cut says less than it should, so cards wrap their text instead.
"""

from __future__ import annotations

from typing import Final

import streamlit as st

WRAPPING_CARDS: Final = """<style>
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] *,
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * {
    white-space: normal !important;
    overflow: visible !important;
    text-overflow: clip !important;
    overflow-wrap: anywhere;
}
</style>"""


def apply() -> None:
    """Add the rules to the page (an ``st.html`` holding only a style draws nothing)."""
    st.html(WRAPPING_CARDS)
