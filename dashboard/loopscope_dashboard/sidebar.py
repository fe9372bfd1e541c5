"""The filters every page shares, drawn once in the sidebar by the entrypoint.

Each widget writes its ``state`` key; pages read them back through ``state.filters()``. Each
is bound to the URL query parameter of the same name, so a copied URL reopens the same view.
"""

from __future__ import annotations

import streamlit as st

from loopscope_dashboard import queries, state

_CHOICES = (
    ("Service", state.SERVICE, "service"),
    ("Agent", state.AGENT, "agent"),
    ("Model", state.MODEL, "model"),
    ("Tool", state.TOOL, "tool"),
    ("Outcome", state.OUTCOME, "outcome"),
)


def render() -> None:
    """Draw the filter widgets and say where the data comes from."""
    options = queries.filter_options()
    with st.sidebar:
        st.selectbox("Time range", list(state.TIME_RANGES), key=state.TIME_RANGE,
                     bind="query-params")
        for label, key, dimension in _CHOICES:
            values = [state.ANY, *options.get(dimension, [])]
            if st.session_state.get(key, state.ANY) not in values:
                st.session_state[key] = state.ANY  # a value that left the store
            st.selectbox(label, values, key=key, bind="query-params")
        st.caption(f"Data: {queries.source_description()}")
