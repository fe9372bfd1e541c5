"""Where the collector pipeline spends its time, per tool span, section by section.

Builds the same load as ``bench_collector.py`` and times each stage on its own, in one thread:
decoding, normalising, building and inserting the ``spans`` rows, detection, building and
inserting the ``tool_calls`` rows. Absolute microseconds drift with the machine; the split
between stages is what to read.

Run:  .venv/bin/python benchmarks/bench_pipeline_sections.py [--spans 20000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "collector"))

from bench_collector import build_requests

from loopscope_collector.normalize.dispatch import normalize_span
from loopscope_collector.pipeline.detection import StreamingDetector
from loopscope_collector.receive.decode import decode_request
from loopscope_collector.storage import open_database
from loopscope_collector.storage import writes as tables
from loopscope_collector.storage.queries import insert_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    n = parser.parse_args().spans
    bodies = build_requests(n, 500, seed=1)
    timings: dict[str, float] = {}

    def timed(name: str, fn):
        start = time.perf_counter()
        value = fn()
        timings[name] = (time.perf_counter() - start) / n * 1e6
        return value

    batches = timed("decode", lambda: [decode_request(
        b, content_type="application/x-protobuf", content_encoding=None, max_bytes=1 << 30)
        for b in bodies])
    spans = [s for batch in batches for s in batch]
    normalized = timed("normalize", lambda: [normalize_span(s) for s in spans])
    span_rows = timed("spans rows", lambda: [tables.span_row(s) for s in spans])
    with tempfile.TemporaryDirectory() as tmp:
        db = open_database(Path(tmp) / "sections.duckdb")
        cur = db.cursor()
        warm = span_rows[: len(span_rows) // 10]  # the first insert into a new file costs more
        insert_rows(cur, "spans", warm, tables.SPANS)
        timed("spans insert", lambda: insert_rows(cur, "spans", span_rows[len(warm):],
                                                  tables.SPANS))
        calls = [r.tool_call for r in normalized if r.tool_call is not None]
        by_episode: dict[str, list] = {}
        for row in calls:
            row.episode_id = row.episode_id or row.trace_id
            by_episode.setdefault(row.episode_id, []).append(row)
        detector = StreamingDetector()
        results = timed("detection", lambda: [detector.add(e, rows, stored=())
                                              for e, rows in by_episode.items()])
        verdicts = {v.row.span_id: v for r in results for v in r.verdicts}
        timed("tool_calls rows + insert",
              lambda: tables.insert_tool_calls(cur, calls, verdicts, {}))
        db.close()
    total = sum(timings.values())
    print(f"{n} spans, µs per span:")
    for name, us in timings.items():
        print(f"  {name:<26} {us:7.1f}  ({us / total:5.1%})")
    print(f"  {'total':<26} {total:7.1f}  -> {1e6 / total:,.0f} spans/s on one core")


if __name__ == "__main__":
    main()
