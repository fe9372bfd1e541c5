"""How long the dashboard's overview takes to render over a store of 1,000,000 tool calls.

Builds the store with ``bench_metrics.build_store`` (50,000 episodes of 20 calls, flags,
guard decisions, labels, costs, UNKNOWN writes), then renders the real app's overview page
with Streamlit's ``AppTest`` reading the file as a snapshot, caches cleared before every run
(a cold render: every read runs). The baseline, in the same run, is the same app rendering
the Import page, which reads nothing: what Streamlit itself costs.

Run:  .venv/bin/python benchmarks/bench_dashboard.py [--calls 1000000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_metrics import build_store


def render_seconds(page: str | None, runs: int) -> list[float]:
    """Cold renders of ``page`` (None: the default page, the overview)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import loopscope_dashboard

    app = str(Path(loopscope_dashboard.__file__).parent / "app.py")
    times = []
    for _ in range(runs):
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(app, default_timeout=120)
        if page is None:
            start = time.perf_counter()
            at.run()
        else:
            at.run()
            st.cache_data.clear()
            start = time.perf_counter()
            at.switch_page(page).run()
        times.append(time.perf_counter() - start)
        if at.exception:
            raise SystemExit(f"the page raised: {at.exception[0].value}")
    return times


def timed_store(store: Path, calls: int) -> Path:
    """Build the store of ``calls`` tool calls at ``store``; say on stderr how long it took."""
    start = time.perf_counter()
    build_store(store, calls)
    print(f"built a store of {calls:,} tool calls in {time.perf_counter() - start:.1f} s",
          file=sys.stderr)
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = timed_store(Path(tmp) / "dashboard.duckdb", args.calls)
        os.environ["LOOPSCOPE_DB_SNAPSHOT"] = str(store)
        overview = render_seconds(None, args.runs)
        baseline = render_seconds("views/importer.py", args.runs)
    o, b = statistics.median(overview), statistics.median(baseline)
    print(f"overview, cold, median of {args.runs}: {o:.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in overview)}); target < 2 s")
    print(f"baseline (a page that reads nothing): {b:.2f} s; overview / baseline: {o / b:.1f}x")


if __name__ == "__main__":
    main()
