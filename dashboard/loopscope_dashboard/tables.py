"""How tall a table is drawn: tall enough for its rows, up to ``MOST_ROWS`` (then it scrolls).

Streamlit draws every ``st.dataframe`` about ten rows tall by default, so a page of 50 runs
showed a fifth of them in a small box; a table of three rows showed seven empty ones.
"""

from __future__ import annotations

from typing import Final

import pandas as pd

ROW_PX: Final = 35
"""Streamlit's data-grid row height, in pixels (its header row is the same)."""
MOST_ROWS: Final = 25


def height(frame: pd.DataFrame) -> int:
    """The pixel height that shows ``frame``'s rows (at least one, at most ``MOST_ROWS``)."""
    rows = max(1, min(len(frame), MOST_ROWS))
    return ROW_PX * (rows + 1) + 3  # the header row, and the grid's border
