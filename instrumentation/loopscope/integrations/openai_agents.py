"""The OpenAI Agents SDK (``openai-agents``): every function tool call guarded, every run an episode.

``instrument()`` patches three places of the SDK, all restored by ``uninstrument()``:

- ``agents.run_internal.tool_execution._invoke_function_tool_with_metadata``, the one call
  through which the run loop invokes a ``FunctionTool`` (after its input guardrails and
  ``on_tool_start`` hooks, before its output guardrails). Each invocation becomes a
  ``ToolCallScope`` named after the tool, with the parsed JSON arguments and the SDK's tool
  call id (parallel calls pair). A blocked call does not run: the model gets the correction
  (plus the cached last result) as the tool's output. A tool failure the SDK turned into a
  message for the model (its default ``failure_error_function``, or a timeout) is recorded
  as an error (a timeout as ``timeout``); the model sees the SDK's message unchanged.
- ``AgentRunner.run`` (behind ``Runner.run`` and ``Runner.run_sync``) and
  ``AgentRunner.run_streamed``: a run is a ``loopscope.episode(task=<input if a string>,
  agent_name=agent.name)`` unless an episode is already active (then the run, and nested
  agent-as-tool runs, join it). The run's ``hooks`` are wrapped (the caller's hooks still get
  every call): ``on_llm_start`` checks the episode's budgets and ends the run on a pending
  stop; ``on_llm_end`` records the response's token usage and the model name.

A stop (enforce mode) ends the run cleanly: the tool call that triggered it returns its
output to the SDK like any other call, so the ``function_call`` keeps its
``function_call_output`` in the run's items and the session; then, before the model would
be called again, ``Runner.run`` raises ``loopscope.LoopDetected`` (``.diagnostic``:
``terminated_by``, ``tool``, ``count``, ...; ``.output``: the last tool output). A run that
ends without another model call (``tool_use_behavior="stop_on_first_tool"``) raises it
after the SDK returns. A streamed run raises it from ``stream_events()``.
"""

from __future__ import annotations

try:
    import agents  # the OpenAI Agents SDK
except ImportError as exc:
    raise RuntimeError(
        "loopscope.instrument_openai_agents() needs the OpenAI Agents SDK. "
        "Install it with:  pip install 'loopscope[openai-agents]'"
    ) from exc

import asyncio
import contextvars
import dataclasses
import json
import threading
from typing import Any, Final

from .._call import ToolCallScope
from .._errors import LoopDetected, swallow_internal_errors
from ..episode import Episode, active_episode, current_episode, episode

TASK_CHARS: Final = 500
"""A string input longer than this is cut to it for the episode's task."""

_MARK: Final = "__loopscope_wrapped__"
_lock = threading.Lock()
_originals: dict[str, Any] = {}


class ToolError(Exception):
    """A tool failure the SDK turned into a message for the model (recorded, never raised)."""


def _internals() -> tuple[Any, Any, Any]:
    """The SDK objects patched: (tool_execution module, AgentRunner, invocation result type)."""
    try:
        from agents import run as run_module
        from agents import tool as tool_module
        from agents.run_internal import tool_execution
    except ImportError as exc:  # pragma: no cover - depends on the SDK version
        raise RuntimeError(f"unsupported openai-agents version ({exc})") from exc
    runner = getattr(run_module, "AgentRunner", None)
    result_type = getattr(tool_module, "_FunctionToolInvocationResult", None)
    missing = [
        name
        for name, found in (
            (
                "run_internal.tool_execution._invoke_function_tool_with_metadata",
                getattr(tool_execution, "_invoke_function_tool_with_metadata", None),
            ),
            ("run.AgentRunner", runner),
            ("tool._FunctionToolInvocationResult", result_type),
        )
        if found is None
    ]
    if missing:
        version = getattr(agents, "__version__", "?")
        raise RuntimeError(
            f"unsupported openai-agents version {version}: agents.{', agents.'.join(missing)} "
            "not found"
        )
    return tool_execution, runner, result_type


def instrument() -> None:
    """Route every function tool call and run of the Agents SDK through loopscope. Idempotent."""
    with _lock:
        if _originals:
            return
        tool_execution, runner, result_type = _internals()
        invoke = tool_execution._invoke_function_tool_with_metadata
        run = runner.run
        run_streamed = runner.run_streamed
        tool_execution._invoke_function_tool_with_metadata = _wrap_invoke(invoke, result_type)
        runner.run = _wrap_run(run)
        runner.run_streamed = _wrap_run_streamed(run_streamed)
        _originals.update(invoke=invoke, run=run, run_streamed=run_streamed)


def uninstrument() -> None:
    """Put the SDK's own functions back. Idempotent."""
    with _lock:
        if not _originals:
            return
        tool_execution, runner, _ = _internals()
        tool_execution._invoke_function_tool_with_metadata = _originals["invoke"]
        runner.run = _originals["run"]
        runner.run_streamed = _originals["run_streamed"]
        _originals.clear()


# -- function tools ---------------------------------------------------------------------------


def _arguments(raw: Any) -> Any:
    """The call's JSON arguments as an object; the raw text when they are not JSON."""
    if not isinstance(raw, str):
        return raw if raw is not None else {}
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {"arguments": raw}


def _failure(function_tool: Any, output: Any) -> BaseException:
    """The exception to record for an SDK-generated error output (a timeout or a failure)."""
    text = str(output)
    timeout = getattr(function_tool, "timeout_seconds", None)
    if timeout is not None:
        message = getattr(agents.tool, "default_tool_timeout_error_message", None)
        expected = (
            message(tool_name=function_tool.name, timeout_seconds=timeout)
            if message is not None
            else None
        )
        if text == expected:
            return TimeoutError(text)
    return ToolError(text)


def _wrap_invoke(original: Any, result_type: Any) -> Any:
    async def invoke(*, function_tool: Any, context: Any, arguments: str, **more: Any) -> Any:
        call: ToolCallScope | None = None
        with swallow_internal_errors("starting an OpenAI Agents tool call"):
            call = ToolCallScope(
                str(getattr(function_tool, "name", None) or "tool"),
                _arguments(arguments),
                call_id=getattr(context, "tool_call_id", None) or None,
            )
        if call is None:
            return await original(
                function_tool=function_tool, context=context, arguments=arguments, **more
            )
        try:
            call.start()
        except LoopDetected as stop:  # a stop before the call: the model gets the correction
            return result_type(stop.output)
        if call.blocked:
            return result_type(call.result)
        call.activate()
        try:
            result = await original(
                function_tool=function_tool, context=context, arguments=arguments, **more
            )
        except BaseException as exc:
            call.fail(exc)
            raise
        output = getattr(result, "output", result)
        if getattr(result, "is_sdk_generated_error", False):
            call.fail(_failure(function_tool, output))
            return result
        try:
            shown = call.finish(output)
        except LoopDetected as stop:  # recorded; the run ends before the next model call
            shown = stop.output
        if shown is output:
            return result
        try:
            return dataclasses.replace(result, output=shown)
        except TypeError:  # not the SDK's dataclass: keep the result as it was
            return result

    setattr(invoke, _MARK, original)
    return invoke


# -- runs -------------------------------------------------------------------------------------


def _model_name(agent: Any, run_config: Any) -> str | None:
    """The model of a call: the run config's, else the agent's (a name or a Model's ``.model``)."""
    configured = (
        run_config.get("model")
        if isinstance(run_config, dict)
        else getattr(run_config, "model", None)
    )
    for model in (configured, getattr(agent, "model", None)):
        if isinstance(model, str) and model:
            return model
        name = getattr(model, "model", None)
        if isinstance(name, str) and name:
            return name
    return None


class _Hooks(agents.RunHooks):
    """The caller's run hooks plus loopscope's model-call bookkeeping."""

    def __init__(self, inner: Any, run_config: Any, episode: Episode) -> None:
        self._loopscope_inner = inner
        self._loopscope_run_config = run_config
        self._loopscope_episode = episode
        self._loopscope_stop_before = episode.stop  # a stop of an earlier run is not ours

    def _loopscope_pending_stop(self) -> LoopDetected | None:
        stop = self._loopscope_episode.stop
        return stop if stop is not None and stop is not self._loopscope_stop_before else None

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        stop = self._loopscope_pending_stop()
        if stop is not None:
            raise stop
        self._loopscope_episode.before_model_call()
        await self._loopscope_inner.on_llm_start(context, agent, *args, **kwargs)

    async def on_llm_end(
        self, context: Any, agent: Any, response: Any, *args: Any, **kwargs: Any
    ) -> None:
        with swallow_internal_errors("recording an OpenAI Agents model response"):
            usage = getattr(response, "usage", None)
            self._loopscope_episode.record_model_call(
                input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
                output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
                model=_model_name(agent, self._loopscope_run_config),
            )
        await self._loopscope_inner.on_llm_end(context, agent, response, *args, **kwargs)


def _forward(name: str) -> Any:
    def method(self: _Hooks, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._loopscope_inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in dir(agents.lifecycle.RunHooksBase):  # every other hook goes to the caller's
    if _name.startswith("on_") and _name not in vars(_Hooks):
        setattr(_Hooks, _name, _forward(_name))


def _with_hooks(kwargs: dict[str, Any], ep: Episode) -> _Hooks | None:
    """Wrap the caller's hooks (None or RunHooks); anything else is left for the SDK to refuse."""
    hooks = kwargs.get("hooks")
    if isinstance(hooks, _Hooks):
        return hooks
    if hooks is None:
        hooks = agents.RunHooks()
    elif not isinstance(hooks, agents.lifecycle.RunHooksBase):
        return None
    wrapped = _Hooks(hooks, kwargs.get("run_config"), ep)
    kwargs["hooks"] = wrapped
    return wrapped


def _task(input: Any) -> str:
    return input[:TASK_CHARS] if isinstance(input, str) else ""


def _new_episode(starting_agent: Any, input: Any) -> Episode:
    name = getattr(starting_agent, "name", None)
    return episode(task=_task(input), agent_name=name if isinstance(name, str) else None)


def _wrap_run(original: Any) -> Any:
    async def run(self: Any, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        own: Episode | None = None
        hooks: _Hooks | None = None
        with swallow_internal_errors("starting an OpenAI Agents run"):
            if active_episode() is None:
                own = _new_episode(starting_agent, input)
            hooks = _with_hooks(kwargs, own or current_episode())
        if own is None:
            return await _run(original, self, starting_agent, input, kwargs, hooks)
        with own:
            return await _run(original, self, starting_agent, input, kwargs, hooks)

    setattr(run, _MARK, original)
    return run


async def _run(
    original: Any,
    runner: Any,
    starting_agent: Any,
    input: Any,
    kwargs: dict[str, Any],
    hooks: _Hooks | None,
) -> Any:
    result = await original(runner, starting_agent, input, **kwargs)
    stop = hooks._loopscope_pending_stop() if hooks is not None else None
    if stop is not None:  # the run ended on the stopping call without asking the model again
        raise stop
    return result


def _wrap_run_streamed(original: Any) -> Any:
    def run_streamed(self: Any, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        if active_episode() is not None:
            with swallow_internal_errors("starting an OpenAI Agents streamed run"):
                _with_hooks(kwargs, current_episode())
            return original(self, starting_agent, input, **kwargs)
        own: Episode | None = None
        context = contextvars.copy_context()
        with swallow_internal_errors("starting an OpenAI Agents streamed run"):
            own = _new_episode(starting_agent, input)
            context.run(own.__enter__)  # the run's background task copies this context
            _with_hooks(kwargs, own)
        if own is None:
            return original(self, starting_agent, input, **kwargs)
        try:
            result = context.run(original, self, starting_agent, input, **kwargs)
        except BaseException as exc:
            context.run(own.__exit__, type(exc), exc, None)
            raise
        task = getattr(result, "run_loop_task", None)
        if isinstance(task, asyncio.Future):
            task.add_done_callback(lambda done: _end_streamed(own, done), context=context)
        else:  # cannot see the end of the run: close the episode now
            context.run(own.__exit__, None, None, None)
        return result

    setattr(run_streamed, _MARK, original)
    return run_streamed


def _end_streamed(ep: Episode, task: asyncio.Future[Any]) -> None:
    exc: BaseException | None
    exc = asyncio.CancelledError() if task.cancelled() else task.exception()
    ep.__exit__(type(exc) if exc is not None else None, exc, None)
