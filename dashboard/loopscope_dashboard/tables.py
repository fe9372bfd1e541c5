"""How a table is drawn: tall enough for its rows, up to ``MOST_ROWS`` (then it scrolls), and
headed in words; a ranking is a table too, its bars drawn in the cells.

Streamlit draws every ``st.dataframe`` about ten rows tall by default, so a page of 50 runs
showed a fifth of them in a small box; a table of three rows showed seven empty ones. A
column's header is its field name in docs/glossary.md's words (``stop_reason`` reads "stop
reason"), unless the page gives it a label of its own; downloads keep the field names. An
empty cell reads "—", not Streamlit's "None" (``show``); the column's help says when it is
empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import pandas as pd
import streamlit as st

EMPTY: Final = "—"
"""What a missing value reads in a table (Streamlit's grid draws it "None" by default)."""
ROW_PX: Final = 35
"""Streamlit's data-grid row height, in pixels (its header row is the same)."""
MOST_ROWS: Final = 25


def show(data: Any, *, into: Any = st, **options: Any) -> Any:
    """``into.dataframe(data, **options)`` (``into``: ``st`` or a column), an empty cell drawn
    as ``EMPTY``. Every table of the dashboard is drawn through here."""
    return into.dataframe(data, placeholder=EMPTY, **options)


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


RANKED: Final = 15
"""The rows a ranking keeps, largest first."""


def ranking(frame: pd.DataFrame, *, key: str, value: str) -> pd.DataFrame:
    """``frame``'s ``key`` and ``value`` where ``value`` is above zero, largest first, at most
    ``RANKED`` rows; a missing key reads "—"."""
    if frame.empty:
        return pd.DataFrame(columns=[key, value])
    shown = frame[frame[value] > 0].sort_values([value, key], ascending=[False, True])
    shown = shown.head(RANKED)[[key, value]].copy()
    shown[key] = shown[key].fillna("—").astype(str)
    return shown.reset_index(drop=True)


def bar(label: str, values: pd.Series, number: str = "%d", **more: Any) -> Any:
    """A column drawn as a bar in each cell, full at the column's largest value (a ranking
    without a chart: Plotly's script, 4.7 MB, held the Loops page back by about a second in a
    fresh browser, bench_pages.py)."""
    most = float(values.max()) if len(values) else 0.0
    return st.column_config.ProgressColumn(label, format=number, min_value=0,
                                           max_value=most if most > 0 else 1, **more)
