"""LangChain / LangGraph: every ``BaseTool`` call is a guarded tool call, every graph run an episode.

Turned on by ``loopscope.instrument()`` when ``langchain-core`` is installed, or alone by
``loopscope.instrument_langchain()``::

    loopscope.instrument(mode="enforce")
    graph.invoke({"messages": [...]})      # one invoke_agent span, one execute_tool span a call

What changes, by guard mode (see the README's modes table):

- A tool call runs inside a ``ToolCallScope``. When the input is a ``ToolCall`` dict (as
  LangGraph's ``ToolNode`` sends it) the span carries its ``id``, so parallel calls pair.
- A blocked call (enforce) does not run the tool: it returns the correction plus the cached
  last result, as a ``ToolMessage`` when the input was a ``ToolCall``, so the graph goes on
  and the model reads the correction.
- A stop (enforce) raises ``loopscope.LoopDetected`` out of the tool and, through the graph,
  out of ``graph.invoke()`` / ``stream()``: the caller gets the exception, with
  ``.diagnostic`` (``terminated_by`` ...) and ``.output`` (the last tool output, which is
  also recorded on that call's span). If a ``ToolNode(handle_tool_errors=True)`` turns the
  exception into an error message, the stop is raised again at the run's next model call
  or, failing that, when the graph run ends.
- The outermost graph run (``Pregel.invoke``, ``ainvoke``, ``stream``, ``astream``) becomes
  a ``loopscope.episode(agent_name=graph.name)`` unless an episode is already active;
  subgraphs and graphs run inside tools join it. A ``thread_id`` in the run's config becomes
  the conversation id.
- A chat model's ``invoke`` / ``ainvoke`` inside an episode counts a model turn (with
  ``AIMessage.usage_metadata`` tokens) and checks the model-call budgets first.

Hook points an upgrade could break: ``BaseTool.run`` / ``BaseTool.arun`` (every
``invoke``/``ainvoke`` of every tool ends there, with ``tool_call_id`` as a keyword),
``BaseTool._filter_injected_args`` (private: drops the state, store and runtime ToolNode
injects, so they stay out of the call signature; without it the arguments are used as
they are), ``Pregel.invoke`` / ``ainvoke`` / ``stream`` / ``astream`` and
``BaseChatModel.invoke`` / ``ainvoke``. Each is replaced on its class by a wrapper that
calls the original; ``uninstrument()`` puts the originals back. When loopscope's own code
fails, the call goes on as if it were not instrumented.

Not covered: a blocked call skips the tool's LangChain callbacks (``on_tool_start`` /
``on_tool_end``); ``BaseChatModel.stream`` calls are not counted as model turns.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import Any

try:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import ToolMessage
    from langchain_core.messages.tool import ToolOutputMixin
    from langchain_core.tools import BaseTool, ToolException
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise RuntimeError(
        "loopscope.instrument_langchain() requires the `langchain-core` package; "
        "install it with: pip install 'loopscope[langchain]'"
    ) from exc

try:
    from langgraph.pregel import Pregel
except ImportError:  # pragma: no cover - LangChain tools work without LangGraph
    Pregel = None  # type: ignore[assignment,misc]

from .._call import ToolCallScope
from .._errors import LoopDetected, swallow_internal_errors
from ..detect.fingerprint import output_text
from ..episode import Episode, active_episode, episode
from ..intent import current_intent

_ORIGINAL = "__loopscope_original__"
_lock = threading.Lock()
_originals: dict[tuple[type, str], Any] = {}


# -- tools ------------------------------------------------------------------------------------


def _tool_scope(tool: BaseTool, tool_input: Any, call_id: str | None) -> ToolCallScope | None:
    scope = None
    with swallow_internal_errors("starting a LangChain tool call"):
        args = tool_input
        if isinstance(tool_input, dict):
            drop_injected = getattr(tool, "_filter_injected_args", None)
            args = drop_injected(tool_input) if callable(drop_injected) else tool_input
        scope = ToolCallScope(
            str(tool.name), args, call_id=call_id or None, intent=current_intent()
        )
    return scope


def _as_content(value: Any) -> Any:
    """``value`` as ``ToolMessage`` content: text or a list of content blocks."""
    return value if isinstance(value, (str, list)) else output_text(value)


def _blocked_output(tool: BaseTool, scope: ToolCallScope, call_id: str | None) -> Any:
    """What a blocked call returns instead of running: the tool's own output shape."""
    if call_id is None:
        return scope.result
    return ToolMessage(_as_content(scope.result), tool_call_id=call_id, name=str(tool.name))


def _finish(scope: ToolCallScope, output: Any) -> Any:
    """Record the tool's output; return it as the model should see it (may raise a stop)."""
    if isinstance(output, ToolMessage):
        if output.status == "error":  # a handled ToolException / validation error
            scope.fail(ToolException(output_text(output.content)))
            return output
        shown = scope.finish(output.content)
        if shown is output.content:
            return output
        edited = output
        with swallow_internal_errors("putting a correction in a ToolMessage"):
            edited = output.model_copy(update={"content": _as_content(shown)})
        return edited
    if isinstance(output, ToolOutputMixin) or (
        isinstance(output, list) and output and isinstance(output[0], ToolOutputMixin)
    ):  # a langgraph Command or the like: recorded, handed on unchanged
        scope.finish(output_text(output))
        return output
    return scope.finish(output)


def _wrap_run(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def run(self: BaseTool, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        call_id = kwargs.get("tool_call_id")
        scope = _tool_scope(self, tool_input, call_id)
        if scope is None:
            return original(self, tool_input, *args, **kwargs)
        scope.start()
        if scope.blocked:
            return _blocked_output(self, scope, call_id)
        scope.activate()
        try:
            output = original(self, tool_input, *args, **kwargs)
        except BaseException as exc:
            scope.fail(exc)
            raise
        return _finish(scope, output)

    return _wrapping(run, original)


def _wrap_arun(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def arun(self: BaseTool, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        call_id = kwargs.get("tool_call_id")
        scope = _tool_scope(self, tool_input, call_id)
        if scope is None:
            return await original(self, tool_input, *args, **kwargs)
        scope.start()
        if scope.blocked:
            return _blocked_output(self, scope, call_id)
        scope.activate()
        try:
            output = await original(self, tool_input, *args, **kwargs)
        except BaseException as exc:
            scope.fail(exc)
            raise
        return _finish(scope, output)

    return _wrapping(arun, original)


# -- graph runs -------------------------------------------------------------------------------


@dataclass
class _Run:
    """The outermost graph run in progress, and the stop (if any) that predates it."""

    episode: Episode
    prior_stop: LoopDetected | None

    def new_stop(self) -> LoopDetected | None:
        """A stop made during this run, which the graph may have turned into a message."""
        stop = self.episode.stop
        return stop if stop is not None and stop is not self.prior_stop else None


_RUN: ContextVar[_Run | None] = ContextVar("loopscope_langgraph_run", default=None)


class _GraphRun:
    """Opens the episode of an outermost graph run; does nothing for a nested one. As a
    context manager around the graph's invoke, ainvoke, stream or astream it ends the run
    however the graph ends (``close``)."""

    def __init__(self, graph: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.owned: Episode | None = None
        self.run: _Run | None = None
        self._token: Token[_Run | None] | None = None
        if _RUN.get() is not None:  # a subgraph, or a graph run by a tool of this run
            return
        with swallow_internal_errors("starting a graph run"):
            active = active_episode()
            if active is None:
                config = kwargs.get("config", args[1] if len(args) > 1 else None)
                thread = _thread_id(config) or _thread_id(getattr(graph, "config", None))
                self.owned = active = episode(
                    agent_name=str(getattr(graph, "name", "") or "") or None,
                    conversation_id=thread,
                )
                active.__enter__()
            self.run = _Run(active, active.stop)
            self._token = _RUN.set(self.run)

    def __enter__(self) -> _GraphRun:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # a caller that stops reading a stream (GeneratorExit) ends the run as a normal end
        self.close(None if isinstance(exc, GeneratorExit) else exc)

    def close(self, exc: BaseException | None) -> None:
        """End the run; after a normal end, raise a stop the graph swallowed (enforce)."""
        with swallow_internal_errors("ending a graph run"):
            if self._token is not None:
                token, self._token = self._token, None
                try:
                    _RUN.reset(token)
                except ValueError:  # closed from another context (an abandoned stream)
                    _RUN.set(None)
        stop = self.run.new_stop() if self.run is not None and exc is None else None
        if self.owned is not None:
            owned, self.owned = self.owned, None
            with swallow_internal_errors("ending a graph run's episode"):
                _exit_episode(owned, stop if stop is not None else exc)
        if stop is not None:
            raise stop


def _exit_episode(ep: Episode, exc: BaseException | None) -> None:
    try:
        ep.__exit__(type(exc) if exc is not None else None, exc, None)
    except ValueError:  # the episode's context token belongs to another context
        ep._token = None
        ep.__exit__(type(exc) if exc is not None else None, exc, None)


def _thread_id(config: Any) -> str | None:
    if not isinstance(config, dict):
        return None
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else None


def _wrap_invoke(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def invoke(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _GraphRun(self, args, kwargs):
            return original(self, *args, **kwargs)

    return _wrapping(invoke, original)


def _wrap_ainvoke(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def ainvoke(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _GraphRun(self, args, kwargs):
            return await original(self, *args, **kwargs)

    return _wrapping(ainvoke, original)


def _wrap_stream(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def stream(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with _GraphRun(self, args, kwargs):  # on the first next(), like the original
            yield from original(self, *args, **kwargs)

    return _wrapping(stream, original)


def _wrap_astream(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def astream(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        with _GraphRun(self, args, kwargs):
            chunks = original(self, *args, **kwargs)
            try:
                async for chunk in chunks:
                    yield chunk
            except GeneratorExit:  # the caller stopped reading
                await chunks.aclose()
                raise

    return _wrapping(astream, original)


def _wrapping(wrapper: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper``, marked as wrapping ``original`` (so it is never wrapped twice, and
    ``uninstrument`` puts the original back)."""
    setattr(wrapper, _ORIGINAL, original)
    return wrapper


# -- model turns ------------------------------------------------------------------------------


def _before_model() -> Episode | None:
    """The episode in scope, after its budgets and any swallowed stop are checked."""
    run = _RUN.get()
    if run is not None and (stop := run.new_stop()) is not None:
        raise stop  # a ToolNode turned the stop into a message: stop at the next turn
    ep = run.episode if run is not None else active_episode()
    if ep is not None:
        ep.before_model_call()
    return ep


def _after_model(ep: Episode | None, model: Any, message: Any) -> None:
    if ep is None:
        return
    with swallow_internal_errors("recording a LangChain model call"):
        usage = getattr(message, "usage_metadata", None) or {}
        metadata = getattr(message, "response_metadata", None) or {}
        name = (
            metadata.get("model_name")
            or metadata.get("model")
            or getattr(model, "model_name", None)
            or getattr(model, "model", None)
        )
        ep.record_model_call(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            model=name if isinstance(name, str) else None,
        )


def _wrap_model_invoke(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def invoke(self: Any, *args: Any, **kwargs: Any) -> Any:
        ep = _before_model()
        message = original(self, *args, **kwargs)
        _after_model(ep, self, message)
        return message

    return _wrapping(invoke, original)


def _wrap_model_ainvoke(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def ainvoke(self: Any, *args: Any, **kwargs: Any) -> Any:
        ep = _before_model()
        message = await original(self, *args, **kwargs)
        _after_model(ep, self, message)
        return message

    return _wrapping(ainvoke, original)


# -- on and off -------------------------------------------------------------------------------


def _targets() -> list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]:
    targets: list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
        (BaseTool, "run", _wrap_run),
        (BaseTool, "arun", _wrap_arun),
        (BaseChatModel, "invoke", _wrap_model_invoke),
        (BaseChatModel, "ainvoke", _wrap_model_ainvoke),
    ]
    if Pregel is not None:
        targets += [
            (Pregel, "invoke", _wrap_invoke),
            (Pregel, "ainvoke", _wrap_ainvoke),
            (Pregel, "stream", _wrap_stream),
            (Pregel, "astream", _wrap_astream),
        ]
    return targets


def instrument() -> None:
    """Trace and guard LangChain tool calls and LangGraph runs. Calling it again does nothing."""
    with _lock:
        if _originals:
            return
        for owner, name, wrap in _targets():
            original = owner.__dict__.get(name)
            if original is None or hasattr(original, _ORIGINAL):
                continue
            setattr(owner, name, wrap(original))
            _originals[(owner, name)] = original


def uninstrument() -> None:
    """Put LangChain's and LangGraph's own methods back."""
    with _lock:
        for (owner, name), original in _originals.items():
            setattr(owner, name, original)
        _originals.clear()


def instrumented() -> bool:
    """Whether ``instrument()`` is in effect."""
    return bool(_originals)
