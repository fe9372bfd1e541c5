"""MCP clients: every ``ClientSession.call_tool`` becomes a guarded loopscope tool call.

``instrument()`` patches ``mcp.ClientSession.call_tool`` (and, in mcp 2.x, the high-level
``mcp.Client.call_tool``, so a call that goes through several input-required rounds is one
tool call, not a repeat). Each call is a ``ToolCallScope``: the span ``execute_tool {name}``
carries ``mcp.method.name = "tools/call"`` beside loopscope's attributes, and the SDK's own
request spans (if any) become its children.

What the guard sees of a ``CallToolResult`` is what the model sees: its one text part, or its
content parts as JSON (its structured content when it has no content), the same reading as
the collector's MCP convention. ``isError`` records the call as failed, with the error text;
a timeout (the request's, or a cancellation of the waiting caller) records it as ``timeout``,
so a write becomes UNKNOWN. In enforce mode a blocked call never reaches the server: it
returns a ``CallToolResult`` whose text is the correction plus the cached earlier result; a
stop raises ``loopscope.LoopDetected``. In warn and enforce modes a correction is put in front
of the result's text.

``list_tools`` is patched too: each listed tool's annotations (``readOnlyHint``,
``destructiveHint``, ``idempotentHint``, ``openWorldHint``) are kept per session and handed to
the guard with every call of that tool (``ToolCall.annotations``), so a tool the user never
declared gets its kind from the server's own word. A tool called before any listing has
none: the integration never asks the server anything the agent did not.

Needs ``pip install 'loopscope[mcp]'``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Final
from weakref import WeakKeyDictionary

try:
    import mcp
    from mcp import types as mcp_types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise RuntimeError(
        "loopscope's MCP integration needs the MCP SDK: pip install 'loopscope[mcp]'"
    ) from exc

from .._call import ToolCallScope, is_timeout
from .._errors import swallow_internal_errors
from ..detect.fingerprint import output_text

MCP_METHOD_NAME: Final = "mcp.method.name"
"""The MCP method of a span (the collector's MCP convention reads the same key)."""
TOOLS_CALL: Final = "tools/call"
_ORIGINAL: Final = "__loopscope_original__"
_TIMEOUT_CODES: Final = frozenset({getattr(mcp_types, "REQUEST_TIMEOUT", -32001), 408})
"""JSON-RPC error codes of a request that timed out: mcp 2.x's ``REQUEST_TIMEOUT``, 1.x's 408."""

_IN_CALL: ContextVar[bool] = ContextVar("loopscope_mcp_call", default=False)
"""Set while a guarded call runs, so the session call inside ``Client.call_tool`` passes."""
_PATCHED: Final = ("call_tool", "list_tools")

_annotations: WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = WeakKeyDictionary()
"""Per ``ClientSession`` (or mcp 2.x ``Client``): the annotations of each tool it listed, as
the protocol spells them (``readOnlyHint``, …). Weak, so a closed session leaves nothing."""


class MCPToolError(Exception):
    """A ``CallToolResult`` with ``isError``: the tool ran and reported a failure."""


class MCPToolTimeout(TimeoutError):
    """An MCP ``tools/call`` that did not answer in time (the call may have happened)."""


def instrument() -> None:
    """Guard every MCP ``call_tool`` and read the annotations ``list_tools`` returns.
    Idempotent."""
    wrappers = {"call_tool": _guarded, "list_tools": _listing}
    for owner in _owners():
        for method in _PATCHED:
            current = owner.__dict__.get(method)
            if current is None or hasattr(current, _ORIGINAL):
                continue
            setattr(owner, method, wrappers[method](current))


def uninstrument() -> None:
    """Restore the original ``call_tool`` and ``list_tools`` methods."""
    for owner in _owners():
        for method in _PATCHED:
            original = getattr(owner.__dict__.get(method), _ORIGINAL, None)
            if original is not None:
                setattr(owner, method, original)


def _owners() -> list[type]:
    owners: list[type] = [mcp.ClientSession]
    client = getattr(mcp, "Client", None)  # mcp 2.x's high-level client
    if isinstance(client, type):
        owners.append(client)
    return owners


def _guarded(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def call_tool(
        self: Any, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        # A continuation round (answers to an input-required result) belongs to the call
        # already guarded; so does the session call inside a guarded ``Client.call_tool``.
        if (
            _IN_CALL.get()
            or kwargs.get("input_responses") is not None
            or kwargs.get("request_state") is not None
        ):
            return await original(self, name, arguments, *args, **kwargs)
        call_args = (dict(arguments) if isinstance(arguments, Mapping)
                     else {} if arguments is None else {"arguments": arguments})
        annotations = None
        with swallow_internal_errors("looking up an MCP tool's annotations"):
            annotations = listed_annotations(self, name)
        scope = ToolCallScope(
            name, call_args, attributes={MCP_METHOD_NAME: TOOLS_CALL}, annotations=annotations
        )
        scope.start()  # a stop raises LoopDetected here, before the server is asked
        if scope.blocked:
            return _text_result(output_text(scope.result))
        token = _IN_CALL.set(True)
        scope.activate()
        try:
            result = await original(self, name, arguments, *args, **kwargs)
        except BaseException as exc:
            scope.fail(_as_timeout(exc))
            raise
        finally:
            _IN_CALL.reset(token)
        return _finish(scope, result)

    setattr(call_tool, _ORIGINAL, original)
    return call_tool


def _listing(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def list_tools(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, *args, **kwargs)
        with swallow_internal_errors("reading MCP tool annotations"):
            _remember(self, result)
        return result

    setattr(list_tools, _ORIGINAL, original)
    return list_tools


def _remember(owner: Any, result: Any) -> None:
    """Keep the annotations of the tools in a ``ListToolsResult`` (one page of the listing:
    a tool listed again with none loses its old ones)."""
    tools = getattr(result, "tools", None) or []
    try:
        known = _annotations.setdefault(owner, {})
    except TypeError:  # an owner that cannot be referenced weakly: nothing is kept
        return
    for tool in tools:
        name = getattr(tool, "name", None)
        if not isinstance(name, str):
            continue
        annotations = tool_annotations(tool)
        if annotations:
            known[name] = annotations
        else:
            known.pop(name, None)


def tool_annotations(tool: Any) -> dict[str, Any] | None:
    """A listed ``Tool``'s annotations as the protocol spells them (``readOnlyHint``, …),
    the unset ones left out; ``None`` when it declares none."""
    raw = getattr(tool, "annotations", None)
    dump = getattr(raw, "model_dump", None)
    if dump is not None:
        raw = dump(mode="json", by_alias=True, exclude_none=True)
    return dict(raw) if isinstance(raw, Mapping) and raw else None


def listed_annotations(owner: Any, name: str) -> dict[str, Any] | None:
    """The annotations ``owner`` (a session, or a ``Client`` and its session) listed for the
    tool ``name``, if it listed that tool."""
    for candidate in (owner, getattr(owner, "_session", None)):
        if candidate is None:
            continue
        try:
            known = _annotations.get(candidate)
        except TypeError:
            continue
        if known and name in known:
            return known[name]
    return None


def _finish(scope: ToolCallScope, result: Any) -> Any:
    """Record ``result``; returns it, with the correction in front when there is one."""
    if not isinstance(result, mcp_types.CallToolResult):
        # An input-required round or an extension's claimed result: record it, pass it on.
        scope.finish(_dump(result))
        return result
    text = ""
    with swallow_internal_errors("reading an MCP tool result"):
        text = model_text(result)
    if _is_error(result):
        scope.fail(MCPToolError(text))
        return result
    shown = scope.finish(text)  # may raise LoopDetected after recording
    if not isinstance(shown, str) or shown == text:
        return result
    corrected = result
    with swallow_internal_errors("adding a correction to an MCP tool result"):
        corrected = _with_text(result, text, shown)
    return corrected


def model_text(result: Any) -> str:
    """What the model sees of a ``CallToolResult``: its one text part, else its content as JSON
    (its structured content when the content list is empty)."""
    content = list(getattr(result, "content", None) or [])
    if len(content) == 1 and isinstance(content[0], mcp_types.TextContent):
        return content[0].text
    if not content:
        structured = _field(result, "structured_content", "structuredContent")
        if structured is not None:
            return output_text(structured)
    return output_text([_dump_part(part) for part in content])


def _with_text(result: Any, text: str, shown: str) -> Any:
    """``result`` with ``shown`` (the correction, then ``text``) as what the model reads."""
    content = list(result.content or [])
    if len(content) == 1 and isinstance(content[0], mcp_types.TextContent):
        parts = [content[0].model_copy(update={"text": shown})]
    else:
        prefix = shown[: len(shown) - len(text)].rstrip() if shown.endswith(text) else shown
        parts = [mcp_types.TextContent(type="text", text=prefix), *content]
    return result.model_copy(update={"content": parts})


def _text_result(text: str) -> Any:
    """The ``CallToolResult`` of a blocked call: the correction and the cached result."""
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])


def _is_error(result: Any) -> bool:
    return _field(result, "is_error", "isError") is True


def _field(result: Any, name: str, v1_name: str) -> Any:
    """A ``CallToolResult`` field by its mcp 2.x name, else by its 1.x (camelCase) name."""
    value = getattr(result, name, None)
    return getattr(result, v1_name, None) if value is None else value


def _as_timeout(exc: BaseException) -> BaseException:
    """``exc``, or a ``MCPToolTimeout`` when it means the call may have happened unanswered."""
    if is_timeout(exc):
        return exc
    code = getattr(exc, "code", None)
    if code is None:
        code = getattr(getattr(exc, "error", None), "code", None)  # mcp 1.x ``McpError``
    cancelled = type(exc).__name__ in ("CancelledError", "Cancelled")
    if code in _TIMEOUT_CODES or cancelled:
        timeout = MCPToolTimeout(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        timeout.__cause__ = exc
        return timeout
    return exc


def _dump(value: Any) -> str:
    dump = getattr(value, "model_dump", None)
    if dump is None:
        return output_text(value)
    return output_text(dump(mode="json", by_alias=True, exclude_none=True))


def _dump_part(part: Any) -> Any:
    dump = getattr(part, "model_dump", None)
    return dump(mode="json", by_alias=True, exclude_none=True) if dump is not None else part
