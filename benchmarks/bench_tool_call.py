"""Cost of one tool call: bare function, bare OTel span, loopscope-instrumented.

All three run in one process, interleaved round by round, against one TracerProvider with
one BatchSpanProcessor and one exporter: by default the real OTLP/HTTP exporter, sending to a
sink in another process that answers 200 (``--exporter discard`` counts and drops instead).
The bare span sets the same attributes loopscope sets, as constants. Two rows in between
separate what any recording of a call signature and output hash costs from what the guard
costs: the standard library's JSON and SHA-256 of arguments and result beside the bare span
(the floor), and loopscope's own signature and output hash functions. The number that matters
is the ratio instrumented / bare span (target: at most 1.2): absolute times drift with the
machine, ratios measured in the same run do not.

With ``--against CHECKOUT`` (another checkout, e.g. ``git worktree add --detach /tmp/before
<commit>``) that checkout's ``loopscope`` package is loaded beside this one under another name
and its ``@loopscope.tool`` is timed in the same rounds, on the same provider and processor:
a before/after ratio that holds on a noisy machine. Times are this process's CPU time.

Run:  .venv/bin/python benchmarks/bench_tool_call.py [--calls 2000] [--rounds 15]
          [--exporter discard] [--against DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from _against import load_package
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import loopscope
from loopscope import conventions as c
from loopscope.detect.fingerprint import call_signature, canonical_json, output_hash, output_text


class CountingExporter(SpanExporter):
    """Counts spans, then hands them to ``inner`` (the real OTLP exporter) or drops them."""

    def __init__(self, inner: SpanExporter | None = None) -> None:
        self.count = 0
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return self.inner.export(spans) if self.inner else SpanExportResult.SUCCESS


WORDS = [
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
]
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
"""Precomputed results, different for every call, so the guard sees a healthy run."""


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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int) -> None:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the OTLP sink did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--exporter",
        choices=("otlp", "discard"),
        default="otlp",
        help="otlp: the real OTLP/HTTP exporter to a local sink process "
        "(default); discard: count and drop",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout whose @loopscope.tool is timed in the same rounds",
    )
    args = parser.parse_args()

    sink = None
    inner: SpanExporter | None = None
    if args.exporter == "otlp":
        port = _free_port()
        sink = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_sink.py")), str(port)]
        )
        _wait_for_port(port)
        inner = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
    exporter = CountingExporter(inner)
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

    def floor_span(n: int) -> None:
        """The bare span plus the least any Python instrumentation recording the two content
        attributes must compute, with the standard library and no loopscope code: JSON of
        the arguments (sorted keys) and of the result, and their SHA-256. The values are
        dropped (the bare span's attributes already hold constants of the same size). This
        is the floor of the ratio for a tool call whose signature and output hash are
        recorded in Python."""
        for i in range(n):
            query = f"customer {i}"
            with tracer.start_as_current_span(
                "execute_tool search_orders", attributes=START_ATTRS
            ) as span:
                hashlib.sha256(json.dumps({"query": query, "limit": 20}, sort_keys=True,
                                          separators=(",", ":")).encode()).hexdigest()
                result = search_orders(query)
                hashlib.sha256(json.dumps(result, sort_keys=True,
                                          separators=(",", ":")).encode()).hexdigest()
                span.set_attributes(END_ATTRS)

    def hashed_span(n: int) -> None:
        """The bare span plus computing its two content attributes (what any instrumentation
        recording a call signature and an output hash must do): canonical JSON and SHA-256 of
        the arguments, JSON and SHA-256 of the result. No guard."""
        for i in range(n):
            query = f"customer {i}"
            with tracer.start_as_current_span(
                "execute_tool search_orders", attributes=START_ATTRS
            ) as span:
                span.set_attribute(
                    c.SIGNATURE,
                    call_signature("search_orders", canonical_json({"query": query, "limit": 20})),
                )
                result = search_orders(query)
                span.set_attributes(END_ATTRS)
                span.set_attribute(c.OUTPUT_HASH, output_hash(output_text(result)))

    def guarded(n: int) -> None:
        with loopscope.episode(task="bench", task_type="lookup"):
            for i in range(n):
                instrumented(f"customer {i}")

    variants: dict[str, Callable[[int], None]] = {
        "bare_function": bare,
        "bare_span": bare_span,
        "stdlib_floor": floor_span,
        "span_and_hashes": hashed_span,
        "loopscope": guarded,
    }
    if args.against is not None:
        other = load_package(args.against.resolve(), "instrumentation/loopscope",
                             "loopscope_against")
        # Its spans go through this provider and processor too; the processor it is given
        # (every setup needs one) does nothing, and every variant's spans pass it alike.
        other.instrument(service_name="bench", mode="enforce", span_processor=SpanProcessor())
        other_instrumented = other.tool(kind="read")(search_orders)

        def against(n: int) -> None:
            with other.episode(task="bench", task_type="lookup"):
                for i in range(n):
                    other_instrumented(f"customer {i}")

        variants["against"] = against
    per_call: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for fn in variants.values():  # warm up
            fn(200)
        for _ in range(args.rounds):
            for name, fn in variants.items():
                start = time.process_time_ns()
                fn(args.calls)
                per_call[name].append((time.process_time_ns() - start) / args.calls)
        provider.force_flush()
    finally:
        if sink is not None:
            sink.terminate()
    median = {name: statistics.median(v) for name, v in per_call.items()}
    result = {
        "exporter": args.exporter,
        "calls_per_round": args.calls,
        "rounds": args.rounds,
        "median_ns_per_call": {k: round(v) for k, v in median.items()},
        "ratio_loopscope_vs_bare_span": round(median["loopscope"] / median["bare_span"], 3),
        "ratio_stdlib_floor_vs_bare_span": round(
            median["stdlib_floor"] / median["bare_span"], 3
        ),
        "ratio_span_and_hashes_vs_bare_span": round(
            median["span_and_hashes"] / median["bare_span"], 3
        ),
        "spans_exported": exporter.count,
    }
    if "against" in median:
        result["ratio_against_vs_bare_span"] = round(median["against"] / median["bare_span"], 3)
        # paired by round (the two ran moments apart): steadier than a ratio of medians
        result["ratio_loopscope_vs_against_paired"] = round(statistics.median(
            mine / theirs for mine, theirs in zip(per_call["loopscope"], per_call["against"],
                                                  strict=True)
        ), 3)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"median per call over {args.rounds} rounds of {args.calls} calls "
        f"({args.exporter} exporter):"
    )
    for name, ns in result["median_ns_per_call"].items():
        print(f"  {name:<14} {ns / 1000:8.2f} µs")
    print(f"stdlib floor / bare span: {result['ratio_stdlib_floor_vs_bare_span']:.3f}x")
    print(f"span + hashes / bare span: {result['ratio_span_and_hashes_vs_bare_span']:.3f}x")
    print(f"loopscope / bare span: {result['ratio_loopscope_vs_bare_span']:.3f}x (target <= 1.2x)")
    if "ratio_against_vs_bare_span" in result:
        print(f"--against / bare span: {result['ratio_against_vs_bare_span']:.3f}x; "
              f"loopscope / --against, paired by round: "
              f"{result['ratio_loopscope_vs_against_paired']:.3f}x (below 1: this checkout "
              "costs less)")


if __name__ == "__main__":
    main()
