"""Download buttons for the tables a page shows: CSV and Parquet of exactly that frame.

Pages call ``offer(frame, name, key=...)`` under a table. The bytes are built from the frame
the page already holds, so a download is what the person sees, not a second read.
"""

from __future__ import annotations

import io

import pandas as pd
import streamlit as st


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as UTF-8 CSV with a header row, no index."""
    return frame.to_csv(index=False).encode("utf-8")


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as a Parquet file (list and mixed columns are written as text)."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object:
            safe[column] = safe[column].map(
                lambda v: v if v is None or isinstance(v, str) else str(
                    list(v) if hasattr(v, "tolist") else v))
    buffer = io.BytesIO()
    safe.to_parquet(buffer, index=False)
    return buffer.getvalue()


def offer(frame: pd.DataFrame, name: str, *, key: str) -> None:
    """Two small buttons, CSV and Parquet, for ``frame`` (nothing when it is empty)."""
    if frame.empty:
        return
    # One row sized to the buttons' own text: fixed column ratios squeezed them to "C." and
    # "P." inside a half-width column (the Flags / Guard decisions row).
    with st.container(horizontal=True, gap="small"):
        st.download_button("CSV", csv_bytes(frame), f"{name}.csv", "text/csv",
                           key=f"download_{key}_csv", icon=":material/download:")
        st.download_button("Parquet", parquet_bytes(frame), f"{name}.parquet",
                           "application/vnd.apache.parquet",
                           key=f"download_{key}_parquet", icon=":material/download:")
