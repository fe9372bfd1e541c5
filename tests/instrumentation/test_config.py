"""loopscope.instrument(): one processor, loud setup errors, environment variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import loopscope
from loopscope import _config
from loopscope import conventions as c
from loopscope.testing import capture_spans


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own LOOPSCOPE_*/OTEL_* settings must not leak into these tests."""
    for name in ("LOOPSCOPE_MODE", "LOOPSCOPE_POLICY", "LOOPSCOPE_CAPTURE_CONTENT",
                 "LOOPSCOPE_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)


def _processors() -> tuple[Any, ...]:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    return provider._active_span_processor._span_processors


def _memory() -> tuple[InMemorySpanExporter, SimpleSpanProcessor]:
    exporter = InMemorySpanExporter()
    return exporter, SimpleSpanProcessor(exporter)


def _one_call() -> None:
    @loopscope.tool
    def ping(n: int) -> str:
        return f"pong {n}"

    with loopscope.episode():
        ping(1)


def test_instrument_twice_adds_exactly_one_processor() -> None:
    """A second instrument() would double-export every span. loopscope adds one processor of
    its own to a provider, once, and swaps what it hands spans to."""
    loopscope.instrument(span_processor=_memory()[1])  # make sure the SDK provider exists
    _config.reset_for_tests()
    before = _processors()
    assert sum(isinstance(p, _config.SwitchProcessor) for p in before) == 1
    loopscope.instrument(endpoint="http://127.0.0.1:9")
    installed = _config._STATE.processor
    assert installed is not None and _processors() == before
    loopscope.instrument(endpoint="http://127.0.0.1:9", mode="warn")
    assert _processors() == before
    assert _config._STATE.processor is installed
    assert _config.settings().mode == "warn"
    loopscope.instrument(endpoint="http://127.0.0.1:10")  # a new endpoint replaces it
    assert _processors() == before
    assert _config._STATE.processor is not installed
    switch = next(p for p in before if isinstance(p, _config.SwitchProcessor))
    assert switch.inner is _config._STATE.processor


def test_second_instrument_keeps_the_capture_processor_and_exports_once() -> None:
    """Re-instrumenting inside a capture would add a processor and export spans twice."""
    with capture_spans(mode="observe") as spans:
        loopscope.instrument(mode="warn")
        _one_call()
        assert len(spans.tool_spans()) == 1
        assert spans.tool_spans()[0]["attributes"][c.GUARD_MODE] == "warn"
    with capture_spans() as again:
        _one_call()
    assert len(again.tool_spans()) == 1
    assert len(spans.tool_spans()) == 1  # the first capture got nothing more


def test_replacing_the_span_processor_detaches_the_old_one() -> None:
    """Spans would keep flowing into a processor the user replaced."""
    old_exporter, old = _memory()
    new_exporter, new = _memory()
    loopscope.instrument(span_processor=old)
    loopscope.instrument(span_processor=new)
    _one_call()
    assert old not in _processors()
    assert len(new_exporter.get_finished_spans()) == 2
    assert old_exporter.get_finished_spans() == ()


def test_instrument_twice_with_the_same_processor_keeps_exporting() -> None:
    """'Safe to call twice' would silently drop every span after the second call."""
    exporter, processor = _memory()
    loopscope.instrument(span_processor=processor)
    loopscope.instrument(span_processor=processor, mode="warn")
    _one_call()
    assert len(exporter.get_finished_spans()) == 2


def test_capture_spans_leaves_no_processor_behind() -> None:
    """Each capture_spans block would leave a dead processor that warns on every span."""
    loopscope.instrument(span_processor=_memory()[1])
    _config.reset_for_tests()
    before = len(_processors())
    for _ in range(3):
        with capture_spans():
            _one_call()
    assert len(_processors()) == before


def test_bad_mode_argument_names_value_and_source() -> None:
    """A typo'd mode would silently run in observe (no protection)."""
    with pytest.raises(ValueError, match=r"'enforced'.*argument mode"):
        loopscope.instrument(mode="enforced", span_processor=_memory()[1])


def test_bad_mode_from_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user could not tell the bad mode came from $LOOPSCOPE_MODE."""
    monkeypatch.setenv("LOOPSCOPE_MODE", "shouty")
    with pytest.raises(ValueError, match=r"'shouty'.*\$LOOPSCOPE_MODE"):
        loopscope.instrument(span_processor=_memory()[1])


def test_mode_from_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """$LOOPSCOPE_MODE would be ignored."""
    monkeypatch.setenv("LOOPSCOPE_MODE", "enforce")
    with capture_spans():
        assert _config.settings().mode == "enforce"
        with loopscope.episode() as ep:
            assert ep.mode == "enforce"


def test_failed_instrument_keeps_the_previous_settings() -> None:
    """A rejected call would half-apply its settings."""
    loopscope.instrument(mode="enforce", span_processor=_memory()[1])
    with pytest.raises(ValueError):
        loopscope.instrument(mode="nope")
    assert _config.settings().mode == "enforce"


def test_bad_endpoint_is_rejected() -> None:
    """A non-HTTP endpoint would fail later, in the export thread, unseen."""
    with pytest.raises(ValueError, match="endpoint"):
        loopscope.instrument(endpoint="127.0.0.1:4318")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read"),
        ("{not json", "not valid JSON"),
        ('{"repeat_treshold": 3}', "repeat_treshold"),
        ("[1, 2]", "JSON object"),
        ('{"repeat_threshold": -1}', "repeat_threshold"),
    ],
    ids=["missing", "not-json", "unknown-key", "not-an-object", "bad-value"],
)
def test_bad_policy_file_names_the_file(tmp_path: Path, content: str | None,
                                        expected: str) -> None:
    """A broken policy file would be ignored, or fail without saying which file."""
    path = tmp_path / "policy.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        loopscope.instrument(policy=path, span_processor=_memory()[1])
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_bad_policy_file_from_environment(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad $LOOPSCOPE_POLICY would be silently skipped."""
    path = tmp_path / "env-policy.json"
    path.write_text('{"bogus": 1}', encoding="utf-8")
    monkeypatch.setenv("LOOPSCOPE_POLICY", str(path))
    with pytest.raises(ValueError, match="bogus") as info:
        loopscope.instrument(span_processor=_memory()[1])
    assert str(path) in str(info.value)


def test_policy_file_is_applied(tmp_path: Path) -> None:
    """A valid policy file would be read but not used by the guard."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"budgets": {"tool_calls": 1}}), encoding="utf-8")

    @loopscope.tool
    def ping(n: int) -> str:
        return "pong"

    with capture_spans(mode="enforce", policy=str(path)):
        assert _config.settings().policy.budgets.tool_calls == 1
        with pytest.raises(loopscope.LoopDetected, match="tool_calls"), loopscope.episode():
            ping(1)
            ping(2)


def test_service_name_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """$OTEL_SERVICE_NAME would be ignored; the argument must still win over it."""
    monkeypatch.setenv("OTEL_SERVICE_NAME", "billing-agent")
    assert loopscope.instrument(span_processor=_memory()[1]).service_name == "billing-agent"
    assert loopscope.instrument(service_name="explicit",
                                span_processor=_memory()[1]).service_name == "explicit"
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    assert loopscope.instrument(span_processor=_memory()[1]).service_name == "agent"


def test_service_name_reaches_the_resource_of_a_fresh_process(tmp_path: Path) -> None:
    """The provider loopscope creates would export spans under the wrong service."""
    script = textwrap.dedent("""
        import loopscope
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        loopscope.instrument(span_processor=SimpleSpanProcessor(exporter))
        with loopscope.episode():
            pass
        print(exporter.get_finished_spans()[0].resource.attributes["service.name"])
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPSCOPE_"))}
    env["OTEL_SERVICE_NAME"] = "resource-check"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "resource-check"


@pytest.mark.parametrize(("raw", "captured"), [("true", True), ("1", True), ("no", False),
                                                ("", False)])
def test_capture_content_from_environment(monkeypatch: pytest.MonkeyPatch, raw: str,
                                          captured: bool) -> None:
    """$LOOPSCOPE_CAPTURE_CONTENT would be ignored (content leaking, or missing)."""
    monkeypatch.setenv("LOOPSCOPE_CAPTURE_CONTENT", raw)
    with capture_spans() as spans:
        _one_call()
    attrs = spans.tool_spans()[0]["attributes"]
    assert attrs[c.CONTENT_CAPTURED] is captured
    assert (c.GEN_AI_TOOL_CALL_ARGUMENTS in attrs) is captured
    assert (c.GEN_AI_TOOL_CALL_RESULT in attrs) is captured


def test_capture_content_argument_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit capture_content=False would be overridden by the environment."""
    monkeypatch.setenv("LOOPSCOPE_CAPTURE_CONTENT", "true")
    with capture_spans(capture_content=False) as spans:
        _one_call()
    assert c.GEN_AI_TOOL_CALL_ARGUMENTS not in spans.tool_spans()[0]["attributes"]


def test_bad_capture_content_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo'd flag would silently default to off (or on)."""
    monkeypatch.setenv("LOOPSCOPE_CAPTURE_CONTENT", "sometimes")
    with pytest.raises(ValueError, match=r"LOOPSCOPE_CAPTURE_CONTENT.*'sometimes'"):
        loopscope.instrument(span_processor=_memory()[1])


def test_a_users_own_agents_module_is_not_taken_for_the_openai_agents_sdk(
        tmp_path: Path) -> None:
    """``instrument()`` finds frameworks by import name; a script's own ``agents.py`` beside it
    has the OpenAI Agents SDK's name but is not its: it is neither imported (run twice) nor
    instrumented, and the real frameworks still are."""
    (tmp_path / "agents.py").write_text(
        "import pathlib\npathlib.Path('imported.txt').write_text('yes')\n")
    script = textwrap.dedent("""
        import loopscope
        from loopscope.integrations import installed
        loopscope.instrument(service_name="t")
        print(",".join(installed()))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    found = done.stdout.strip().split(",")
    assert "openai_agents" not in found and "langchain" in found
    assert not (tmp_path / "imported.txt").exists()


def test_a_misspelt_option_is_refused_naming_it_and_the_options() -> None:
    """``instrument()``'s options are stated once (``_config.Options``); a misspelt one is a
    TypeError, as a misspelt keyword argument is, naming it and what is taken."""
    with pytest.raises(TypeError, match=r"servce_name; it takes frameworks, capture_content"):
        loopscope.instrument(servce_name="x")  # type: ignore[call-arg]
