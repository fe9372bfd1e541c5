"""How a table is drawn: tall enough for its rows, up to ``MOST_ROWS`` (then it scrolls), and
headed in words.

Streamlit draws every ``st.dataframe`` about ten rows tall by default, so a page of 50 runs
showed a fifth of them in a small box; a table of three rows showed seven empty ones. A
column's header is its field name in docs/glossary.md's words (``stop_reason`` reads "stop
reason"), unless the page gives it a label of its own; downloads keep the field names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import pandas as pd
import streamlit as st

ROW_PX: Final = 35
"""Streamlit's data-grid row height, in pixels (its header row is the same)."""
MOST_ROWS: Final = 25


def height(frame: pd.DataFrame) -> int:
    """The pixel height that shows ``frame``'s rows (at least one, at most ``MOST_ROWS``)."""
    rows = max(1, min(len(frame), MOST_ROWS))
    return ROW_PX * (rows + 1) + 3  # the header row, and the grid's border


UNITS: Final = ("_usd", "_ms", "_ns", "_s")
"""Suffixes that name a field's unit, not what it is: a header leaves them out."""


def header(name: str) -> str:
    """The header of the field ``name``: ``cost_saved_usd`` reads "cost saved"."""
    for unit in UNITS:
        if name.endswith(unit) and len(name) > len(unit):
            name = name[: -len(unit)]
            break
    return name.replace("_", " ")


def headers(columns: Iterable[object]) -> dict[str, Any]:
    """A ``column_config`` that heads every column of ``columns`` with ``header``; a page
    puts its own labels over it (``tables.headers(frame) | {...}``)."""
    return {str(c): st.column_config.Column(header(str(c))) for c in columns
            if str(c) != header(str(c))}
