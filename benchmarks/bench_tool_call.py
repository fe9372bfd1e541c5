"""Cost of one tool call: bare function, bare OTel span, loopscope-instrumented.

All three run in one process, interleaved round by round, against one TracerProvider with
one BatchSpanProcessor and one exporter (which counts and discards, so the network is not
what is measured). The bare span sets the same attributes loopscope sets, as constants. The
number that matters is the ratio instrumented / bare span (target: at most 1.2): absolute
times drift with the machine, ratios measured in the same run do not.

Run:  .venv/bin/python benchmarks/bench_tool_call.py [--calls 2000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import loopscope
from loopscope import conventions as c


class CountingExporter(SpanExporter):
    """Counts spans and drops them: the export path runs, the network does not."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


WORDS = (
    "mug",
    "lamp",
    "desk",
    "chair",
    "pen",
    "cable",
    "phone",
    "case",
    "bag",
    "shoe",
    "hat",
    "sock",
    "cup",
    "plate",
    "fork",
    "book",
    "card",
    "fan",
    "rug",
    "bowl",
    "jar",
    "tray",
)


_rng = random.Random(7)
OUTPUTS = [
    {
        "orders": [
            {"id": f"o-{i}-{k}", "item": item, "status": "shipped"}
            for k, item in enumerate(_rng.sample(WORDS, 6))
        ]
    }
    for i in range(4096)
]


def search_orders(query: str, limit: int = 20) -> dict:
    """The tool: a small structured result that differs per query, as a real read's does."""
    return OUTPUTS[int(query.rsplit(" ", 1)[-1]) % len(OUTPUTS)]


START_ATTRS = {
    c.GEN_AI_OPERATION_NAME: c.OP_EXECUTE_TOOL,
    c.GEN_AI_TOOL_NAME: "search_orders",
    c.GEN_AI_TOOL_CALL_ID: "call_0123456789abcdef",
    c.GEN_AI_TOOL_TYPE: "function",
    c.EPISODE_ID: "0" * 32,
    c.STEP: 1,
    c.SIGNATURE: "ddc71acbcfe5aac0",
    c.ARGS_SIZE: 23,
    c.GUARD_MODE: "enforce",
    c.CONTENT_CAPTURED: False,
    c.TOOL_KIND: "read",
}
END_ATTRS = {
    c.STATUS: "ok",
    c.OUTPUT_HASH: "4f10330beb9d0ff6",
    c.OUTPUT_SIZE: 200,
    c.PROGRESS: "new_info",
    c.STREAK: 0,
    c.GUARD_ACTION: "allow",
    c.GUARD_DECISION: "allow",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    exporter = CountingExporter()
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    loopscope.instrument(
        service_name="bench",
        mode="enforce",
        span_processor=BatchSpanProcessor(exporter, max_queue_size=1 << 16),
    )
    tracer = trace.get_tracer("bench")
    instrumented = loopscope.tool(kind="read")(search_orders)

    def bare(n: int) -> None:
        for i in range(n):
            search_orders(f"customer {i}")

    def bare_span(n: int) -> None:
        for i in range(n):
            with tracer.start_as_current_span(
                "execute_tool search_orders", attributes=START_ATTRS
            ) as span:
                search_orders(f"customer {i}")
                span.set_attributes(END_ATTRS)

    def guarded(n: int) -> None:
        with loopscope.episode(task="bench", task_type="lookup"):
            for i in range(n):
                instrumented(f"customer {i}")

    variants: dict[str, Callable[[int], None]] = {
        "bare_function": bare,
        "bare_span": bare_span,
        "loopscope": guarded,
    }
    per_call: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm up
        fn(200)
    for _ in range(args.rounds):
        for name, fn in variants.items():
            start = time.perf_counter_ns()
            fn(args.calls)
            per_call[name].append((time.perf_counter_ns() - start) / args.calls)
    provider.force_flush()
    median = {name: statistics.median(v) for name, v in per_call.items()}
    result = {
        "calls_per_round": args.calls,
        "rounds": args.rounds,
        "median_ns_per_call": {k: round(v) for k, v in median.items()},
        "ratio_loopscope_vs_bare_span": round(median["loopscope"] / median["bare_span"], 3),
        "ratio_bare_span_vs_bare_function": round(median["bare_span"] / median["bare_function"], 1),
        "spans_exported": exporter.count,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"median per call over {args.rounds} rounds of {args.calls} calls:")
    for name, ns in result["median_ns_per_call"].items():
        print(f"  {name:<14} {ns / 1000:8.2f} µs")
    print(f"loopscope / bare span: {result['ratio_loopscope_vs_bare_span']:.3f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
