"""A store like ``loopscope up --demo`` builds: every scenario shape of the demo's library,
in observe and enforce mode, content captured (the demo's scripts are synthetic, so the
demo records tasks, arguments and outputs, and the pages show words), through the
collector's real ``Pipeline``.

Stored runs still lack the model's messages where the agent does not record them, which is
where the collector's own verdicts, and a replay of the stored runs, can differ from the
guard's recorded decisions."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from loopscope.offline.demo import drive
from loopscope.offline.scenarios import generate
from loopscope.testing import capture_spans
from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.receive.decode import decode_request
from loopscope_collector.storage import open_database

DEMO_BUDGET = {"budgets": {"tool_calls": 40}}
"""The demo agents' policy (``loopscope demo``): the defaults and a tool-call budget."""


def demo_spans(*, capture_content: bool = True, per_shape: int = 2) -> list[ReadableSpan]:
    """The SDK spans of the demo's scripts (``per_shape`` of each scenario shape), each driven
    once in observe and enforce mode (``capture_content``: as the demo does; False: as an
    agent with ``instrument()``'s default)."""
    scripts = generate(seed=0, per_shape=per_shape)
    with capture_spans(service_name="loopscope-demo", capture_content=capture_content,
                       policy=DEMO_BUDGET) as captured:
        for mode in ("observe", "enforce"):
            for script in scripts:
                drive(script, mode=mode, service="demo")
        return list(captured.spans())


def build_demo_store(path: Path, spans: list[ReadableSpan]) -> Path:
    """``spans`` through the collector's pipeline into a new store at ``path``."""
    body = encode_spans(spans).SerializeToString()
    records = decode_request(body, content_type="application/x-protobuf",
                             content_encoding=None, max_bytes=len(body) + 1)
    db = open_database(path)
    pipeline = Pipeline(db).start()
    try:
        pipeline.submit(records).wait(120)
    finally:
        pipeline.stop(120)
        db.close()
    return path


def otlp_json(spans: list[ReadableSpan]) -> str:
    """``spans`` as one line of OTLP JSON, as the OpenTelemetry Collector's ``file`` exporter
    writes an ``ExportTraceServiceRequest`` (ids in hex): what ``loopscope analyze`` reads."""
    import base64
    import json

    from google.protobuf.json_format import MessageToDict

    def hexed(value: object) -> object:
        if isinstance(value, dict):
            return {k: base64.b64decode(v).hex()
                    if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else hexed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [hexed(v) for v in value]
        return value

    return json.dumps(hexed(MessageToDict(encode_spans(spans)))) + "\n"
