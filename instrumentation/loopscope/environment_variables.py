"""The environment variables loopscope reads, each once, with its default.

Precedence is always: the argument to ``loopscope.instrument()``, then the variable, then the
default. The standard ``OTEL_*`` variables (``OTEL_SERVICE_NAME``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_TIMEOUT``,
``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, ``OTEL_BSP_SCHEDULE_DELAY``, ``OTEL_BSP_MAX_QUEUE_SIZE``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_EXPORTER`` (``none``: no exporter),
``OTEL_SDK_DISABLED``) are honoured as the OpenTelemetry SDK defines them (the timeouts in
seconds, as its Python SDK reads them); a timeout or queue size that is not a positive number
is a ``ValueError`` from ``instrument()``.
"""

from typing import Final

LOOPSCOPE_MODE: Final = "LOOPSCOPE_MODE"
"""Guard mode: ``observe``, ``warn`` or ``enforce``. Default ``observe``. Argument: ``mode``."""

DEFAULT_HTTP_PORT: Final = 4318
"""The collector's OTLP/HTTP port (and reads, /metrics, /healthz): OTLP's own default."""
DEFAULT_GRPC_PORT: Final = 4317
"""The collector's OTLP/gRPC port: OTLP's own default."""
DEFAULT_ENDPOINT: Final = f"http://127.0.0.1:{DEFAULT_HTTP_PORT}"
"""Where an agent sends its spans, and where the dashboard and ``loopscope metrics`` look for
a collector, unless told otherwise: the one address every part shares."""

LOOPSCOPE_ENDPOINT: Final = "LOOPSCOPE_ENDPOINT"
"""Collector base URL for OTLP/HTTP. Default: ``OTEL_EXPORTER_OTLP_ENDPOINT``, then
``http://127.0.0.1:4318``. Argument: ``endpoint``."""

LOOPSCOPE_CAPTURE_CONTENT: Final = "LOOPSCOPE_CAPTURE_CONTENT"
"""``true`` records tool arguments and outputs (truncated) on spans. Default ``false``: only
hashes and sizes leave the process. Argument: ``capture_content``."""

OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: Final = (
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
"""The OpenTelemetry GenAI instrumentations' content switch, read when
``LOOPSCOPE_CAPTURE_CONTENT`` is not set. By default it is ``true`` or ``false``; when
``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai_latest_experimental`` it is read as the
latest conventions define it: ``SPAN_ONLY`` or ``SPAN_AND_EVENT`` record arguments and
outputs on spans, ``NO_CONTENT`` (the default) or ``EVENT_ONLY`` do not (loopscope writes no
content events)."""

LOOPSCOPE_POLICY: Final = "LOOPSCOPE_POLICY"
"""Path of a JSON file with policy settings (see ``loopscope.detect.Policy``). Argument:
``policy``."""

LOOPSCOPE_RAISE_INTERNAL_ERRORS: Final = "LOOPSCOPE_RAISE_INTERNAL_ERRORS"
"""``1`` makes loopscope's own bugs raise instead of being logged. The test suite sets it;
production never should."""
