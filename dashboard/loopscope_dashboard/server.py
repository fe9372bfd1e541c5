"""``python -m loopscope_dashboard.server run APP ...``: Streamlit's command line, with the
modules the pages need imported on a thread once the server has started.

Streamlit imports a page's modules in the script thread of the first visit: pandas, pyarrow,
Plotly's figures, DuckDB and this package took about 2 s there (the Overview's first visit,
before it read anything, on a loaded 2-core machine). Imported here, as soon as the server
runs (its own start is not delayed: the thread waits for Streamlit's runtime, which this
package's ``st.cache_data`` functions want too), the first visit finds them loaded.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
from typing import Final

logger = logging.getLogger(__name__)

LIBRARIES: Final = ("pandas", "pyarrow", "duckdb", "plotly.graph_objects", "plotly.io")
"""The libraries the pages use, imported first."""
MODULES: Final = ("loopscope_dashboard.queries", "loopscope_dashboard.charts",
                  "loopscope_dashboard.replay_jobs", "loopscope_dashboard.cards",
                  "loopscope_dashboard.calibrations", "loopscope_dashboard.waterfall",
                  "loopscope_dashboard.inspector", "loopscope_dashboard.uploads",
                  "loopscope_collector.metrics.compute", "streamlit.dataframe_util")
"""Then the dashboard's own modules."""
RUNTIME_WAIT_S: Final = 60.0


def warm_imports() -> None:
    """Once Streamlit's runtime exists, import ``LIBRARIES`` and ``MODULES`` and draw one
    small figure and table the way the pages do (the lazy parts of Plotly and Arrow)."""
    try:
        from streamlit import runtime

        deadline = time.monotonic() + RUNTIME_WAIT_S
        while not runtime.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for name in (*LIBRARIES, *MODULES):
            importlib.import_module(name)
        import pandas as pd
        import plotly.graph_objects as go
        from streamlit import dataframe_util

        go.Figure(go.Scatter(x=[0, 1], y=[0, 1])).to_json()
        dataframe_util.convert_pandas_df_to_arrow_bytes(pd.DataFrame({"a": [1], "b": ["x"]}))
    except Exception:  # a warm-up only: the page imports what it needs anyway
        logger.exception("importing the dashboard's modules ahead of the first visit failed")


def main() -> None:
    """Start ``warm_imports`` on a thread, then run Streamlit's command line (``sys.argv``
    after this module's name: ``run APP --server.port ...``)."""
    threading.Thread(target=warm_imports, name="loopscope-warm-imports", daemon=True).start()
    from streamlit.web.cli import main as streamlit

    sys.argv[0] = "streamlit"
    streamlit(prog_name="streamlit")


if __name__ == "__main__":
    main()
