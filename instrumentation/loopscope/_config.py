"""``configure()``, beneath ``loopscope.instrument()``: resolve settings, join or create the OTel
provider, once.

Setup fails loudly (``ValueError`` naming the setting and where the bad value came from);
everything after setup fails quietly. loopscope adds an exporter of its own only where nobody
else decides where spans go: not with ``OTEL_TRACES_EXPORTER=none``, nor to a provider that
already has span processors (unless ``endpoint=`` is passed). Its exporter (``_export``) costs
a dead collector's agent only dropped spans, which are counted, never time; it retries a busy
one, and bounds the flush at exit.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict, Unpack

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from . import environment_variables as env
from ._export import ExportProcessor, ExportStats, ResilientExporter
from ._export_report import INSTANCE_ID
from .conventions import SERVICE_INSTANCE_ID, gen_ai_latest_experimental
from .detect import Policy
from .detect.events import MODES
from .policy_file import load_policy

logger = logging.getLogger("loopscope")

MODE_CHOICES: Final = f"{', '.join(map(repr, MODES[:-1]))} or {MODES[-1]!r}"
"""The guard modes as a message names them: 'observe', 'warn' or 'enforce'."""
DEFAULT_ENDPOINT: Final = env.DEFAULT_ENDPOINT
DEFAULT_SERVICE_NAME: Final = "agent"
SCHEDULE_DELAY_MS: Final = 200
"""Batch delay: short, so a flag reaches the collector well within a second."""
MAX_QUEUE_SPANS: Final = 16_384
"""Spans the batch processor holds before it drops (the SDK's default is 2,048): an agent
that makes many fast tool and model calls outruns a 2,048-span queue, and the span it drops
may be its run's root, which carries the outcome."""
DEFAULT_EXPORT_TIMEOUT_S: Final = 10.0
"""OpenTelemetry's export timeout, used unless ``$OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` or
``$OTEL_EXPORTER_OTLP_TIMEOUT`` sets one (in seconds, as OpenTelemetry's Python SDK reads them):
a busy collector's ``Retry-After`` is waited out within it."""
MAX_CONTENT_CHARS: Final = 4096


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved configuration of this process."""

    service_name: str = DEFAULT_SERVICE_NAME
    endpoint: str = DEFAULT_ENDPOINT
    mode: str = "observe"
    policy: Policy = field(default_factory=Policy)
    capture_content: bool = False
    max_content_chars: int = MAX_CONTENT_CHARS


class SwitchProcessor(SpanProcessor):
    """The one span processor loopscope adds to a provider: it hands every span to the
    processor installed now (none: to nobody). A second ``instrument()`` that changes where
    spans go swaps what this one holds, with the provider's public API only (a provider has
    no public way to remove a processor)."""

    def __init__(self) -> None:
        self.inner: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        inner = self.inner
        if inner is not None:
            inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        inner = self.inner
        if inner is not None:
            inner.on_end(span)

    def shutdown(self) -> None:
        inner, self.inner = self.inner, None
        if inner is not None:
            inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        inner = self.inner
        return inner.force_flush(timeout_millis) if inner is not None else True


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    settings: Settings = field(default_factory=Settings)
    processor: SpanProcessor | None = None
    """The processor spans go to now (through ``switch``)."""
    switch: tuple[TracerProvider, SwitchProcessor] | None = None
    """The one processor loopscope added to a provider, and that provider."""
    stats: ExportStats = field(default_factory=ExportStats)
    instrumented: bool = False


_STATE: Final = _State()


def settings() -> Settings:
    """The settings in force (defaults until ``instrument()`` is called)."""
    return _STATE.settings


def export_stats() -> dict[str, int]:
    """Counters of spans exported and dropped by loopscope's exporter."""
    return _STATE.stats.as_dict()


class Options(TypedDict, total=False):
    """What ``instrument()`` configures, stated once: ``configure`` takes these and
    ``instrument()`` takes these and ``frameworks`` (its docstring documents each)."""

    service_name: str | None
    endpoint: str | None
    mode: str | None
    policy: Policy | Mapping[str, Any] | str | os.PathLike[str] | None
    capture_content: bool | None
    span_processor: SpanProcessor | None


def configure(**options: Unpack[Options]) -> Settings:
    """``loopscope.instrument()`` without the agent frameworks: the settings and the span
    processor (the options are ``instrument()``'s, which documents them).

    Raises:
        ValueError: a setting is invalid; the message names it and its source.
    """
    unknown = sorted(set(options) - Options.__optional_keys__)
    if unknown:  # (as a misspelt keyword argument would be)
        raise TypeError(f"instrument() got unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"it takes frameworks, {', '.join(sorted(Options.__optional_keys__))}")
    span_processor = options.get("span_processor")
    resolved = Settings(
        service_name=options.get("service_name") or os.environ.get("OTEL_SERVICE_NAME")
        or DEFAULT_SERVICE_NAME,
        endpoint=_endpoint(options.get("endpoint")),
        mode=_mode(options.get("mode")),
        policy=_policy(options.get("policy")),
        capture_content=_capture_content(options.get("capture_content")),
    )
    sending = None if span_processor is not None else _sending()  # (checked before any change)
    with _STATE.lock:
        previous = _STATE.settings
        _STATE.settings = resolved
        if span_processor is not None:
            _install(span_processor, resolved)
        elif sending is not None and (not _STATE.instrumented
                                      or previous.endpoint != resolved.endpoint):
            why_not = _why_no_exporter(explicit_endpoint=options.get("endpoint") is not None)
            if why_not:
                logger.info("loopscope: adding no exporter of its own: %s", why_not)
            else:
                _install(_otlp_processor(resolved, *sending), resolved)
        _STATE.instrumented = True
    return resolved


def _why_no_exporter(*, explicit_endpoint: bool) -> str | None:
    """Why loopscope adds no exporter of its own, or ``None`` when it does: the SDK is
    disabled; ``$OTEL_TRACES_EXPORTER`` is ``none``; or the provider already has span
    processors someone else added (their exporters decide where spans go). An ``endpoint``
    argument overrides the last two."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "$OTEL_SDK_DISABLED is true"
    if explicit_endpoint:
        return None
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "").lower().replace(" ", "").split(",")
    if "none" in exporters:
        return "$OTEL_TRACES_EXPORTER is none"
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider) and _has_processors_of_others(provider):
        return ("the TracerProvider already has span processors, whose exporters send the "
                "spans (pass endpoint= to add loopscope's beside them)")
    return None


def _has_processors_of_others(provider: TracerProvider) -> bool:
    """Whether span processors other than loopscope's are on ``provider``. The SDK has no
    public way to list them; its multi-processor holds them in ``_span_processors`` (a
    provider without that attribute counts as having none)."""
    active = getattr(provider, "_active_span_processor", None)
    processors = getattr(active, "_span_processors", ())
    return any(not isinstance(p, SwitchProcessor) for p in processors)


def _install(processor: SpanProcessor, resolved: Settings) -> None:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(resource=Resource.create({
            "service.name": resolved.service_name, SERVICE_INSTANCE_ID: INSTANCE_ID}))
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # someone else's non-SDK provider
        logger.warning(
            "loopscope: the global TracerProvider is not the OTel SDK's; spans cannot be exported"
        )
        return
    old = _STATE.processor
    if old is processor:
        return
    if _STATE.switch is None or _STATE.switch[0] is not provider:
        _STATE.switch = (provider, SwitchProcessor())
        provider.add_span_processor(_STATE.switch[1])
    _STATE.switch[1].inner = processor
    _STATE.processor = processor
    if old is not None:
        old.shutdown()


def _otlp_processor(resolved: Settings, timeout_s: float, max_queue: int) -> SpanProcessor:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from ._export_http import ObservedSession

    url = resolved.endpoint.rstrip("/") + "/v1/traces"
    traces_url = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces_url and resolved.endpoint == _endpoint(None):  # the variable, used as is
        url = traces_url
    # A credential provider's session (``OTEL_PYTHON_EXPORTER_OTLP_HTTP_*_CREDENTIAL_PROVIDER``)
    # wins over loopscope's: exports still work, only their failures are told less precisely.
    session = None if any(name.endswith("_CREDENTIAL_PROVIDER") and value
                          for name, value in os.environ.items()) else ObservedSession()
    exporter = ResilientExporter(OTLPSpanExporter(endpoint=url, timeout=timeout_s,
                                                  session=session),
                                 _STATE.stats, endpoint=url, timeout_s=timeout_s)
    if session is not None:
        session.observer = exporter.note
    return ExportProcessor(
        exporter, max_queue=max_queue,
        schedule_delay_millis=None if "OTEL_BSP_SCHEDULE_DELAY" in os.environ
        else SCHEDULE_DELAY_MS)


def _sending() -> tuple[float, int]:
    """The export timeout and the queue's size: ``$OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, then
    ``$OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds), then OpenTelemetry's 10 s; and
    ``$OTEL_BSP_MAX_QUEUE_SIZE``, then ``MAX_QUEUE_SPANS``."""
    timeout_s, max_queue = DEFAULT_EXPORT_TIMEOUT_S, MAX_QUEUE_SPANS
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = os.environ.get(name, "").strip()
        if raw:
            timeout_s = _positive(raw, name)
            break
    raw = os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE", "").strip()
    if raw:
        max_queue = int(_positive(raw, "OTEL_BSP_MAX_QUEUE_SIZE", whole=True))
    return timeout_s, max_queue


def _positive(raw: str, variable: str, *, whole: bool = False) -> float:
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = 0
    if not (value > 0 and math.isfinite(value)):
        kind = "a positive whole number" if whole else "a positive number of seconds"
        raise ValueError(f"${variable} must be {kind}, not {raw!r}")
    return value


def _endpoint(value: str | None) -> str:
    url = (
        value
        or os.environ.get(env.LOOPSCOPE_ENDPOINT)
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or DEFAULT_ENDPOINT
    )
    source = "argument endpoint" if value else "$LOOPSCOPE_ENDPOINT / $OTEL_EXPORTER_OTLP_ENDPOINT"
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"endpoint must be an http:// or https:// URL, not {url!r} ({source})")
    return url.rstrip("/")


def _mode(value: str | None) -> str:
    mode = value or os.environ.get(env.LOOPSCOPE_MODE) or "observe"
    if mode not in MODES:
        source = "argument mode" if value else "$LOOPSCOPE_MODE"
        raise ValueError(f"mode must be {MODE_CHOICES}, not {mode!r} ({source})")
    return mode


def _flag(value: bool | None, variable: str) -> bool:
    if value is not None:
        return bool(value)
    raw = os.environ.get(variable, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ValueError(f"${variable} must be true or false, not {raw!r}")


def _capture_content(value: bool | None) -> bool:
    if value is not None or os.environ.get(env.LOOPSCOPE_CAPTURE_CONTENT, "").strip():
        return _flag(value, env.LOOPSCOPE_CAPTURE_CONTENT)
    raw = os.environ.get(env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "").strip()
    if not gen_ai_latest_experimental():
        return _flag(None, env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)
    if raw.upper() in ("", "NO_CONTENT", "EVENT_ONLY"):
        return False
    if raw.upper() in ("SPAN_ONLY", "SPAN_AND_EVENT"):
        return True
    raise ValueError(
        f"${env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT} must be NO_CONTENT, "
        f"SPAN_ONLY, EVENT_ONLY or SPAN_AND_EVENT when $OTEL_SEMCONV_STABILITY_OPT_IN lists "
        f"gen_ai_latest_experimental, not {raw!r}")


def _policy(value: Policy | Mapping[str, Any] | str | os.PathLike[str] | None) -> Policy:
    if isinstance(value, Policy):
        return value
    if isinstance(value, Mapping):
        return Policy.from_mapping(value, source="argument policy")
    path = value if value is not None else os.environ.get(env.LOOPSCOPE_POLICY)
    if path is None or path == "":
        return Policy()
    return load_policy(path)


def reset_for_tests() -> None:
    """Forget the installed processor and settings (test isolation only)."""
    with _STATE.lock:
        if _STATE.switch is not None:
            _STATE.switch[1].inner = None
        if _STATE.processor is not None:
            _STATE.processor.shutdown()
        _STATE.processor = None
        _STATE.settings = Settings()
        _STATE.stats.reset()
        _STATE.instrumented = False
