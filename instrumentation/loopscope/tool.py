"""``@loopscope.tool``: trace and guard every call of a function, sync or async.

Decorating is safe at import time, before ``instrument()``: spans go through the OTel proxy
tracer until a provider exists. The wrapper keeps the function's signature (``ParamSpec``,
``functools.wraps``), so frameworks that read it still see the original.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar, overload

from ._call import ToolCallScope
from ._errors import swallow_internal_errors
from .detect.events import TOOL_KINDS
from .intent import current_intent

P = ParamSpec("P")
R = TypeVar("R")
_SKIPPED = frozenset({"self", "cls"})


@overload
def tool(func: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    kind: str | None = None,
    volatile: Iterable[str] = (),
    deadline_s: float | None = None,
    idempotency_key: Callable[..., str] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    kind: str | None = None,
    volatile: Iterable[str] = (),
    deadline_s: float | None = None,
    idempotency_key: Callable[..., str] | None = None,
) -> Any:
    """Make every call of the function a guarded ``execute_tool`` span.

    Use bare (``@loopscope.tool``) or with options (``@loopscope.tool(kind="read")``).

    Args:
        name: Tool name; defaults to the function's ``__name__``.
        kind: ``read`` (repeats are blocked from the 3rd identical call), ``write`` (keyed by
            idempotency key, never by arguments; a timeout makes it UNKNOWN) or ``poll``
            (never flagged before its deadline). Undeclared tools are judged by shape.
        volatile: Argument names left out of the call signature (request ids, timestamps).
        deadline_s: For polls: seconds after the first poll when polling must stop.
        idempotency_key: For writes: a function of the call's arguments giving the business
            idempotency key, instead of loopscope's ``run_id:step_id``.
    """
    if kind is not None and kind not in TOOL_KINDS:
        raise ValueError(
            f"kind must be {', '.join(map(repr, TOOL_KINDS))} or None, not {kind!r}")
    wrap = functools.partial(_wrap, name=name, kind=kind, volatile=frozenset(volatile),
                             deadline_s=deadline_s, idempotency_key=idempotency_key)
    if func is None:
        return wrap
    return wrap(func)


def _wrap(
    func: Callable[..., Any],
    *,
    name: str | None,
    kind: str | None,
    volatile: frozenset[str],
    deadline_s: float | None,
    idempotency_key: Callable[..., str] | None,
) -> Callable[..., Any]:
    tool_name = name or str(getattr(func, "__name__", "tool"))
    try:
        signature: inspect.Signature | None = inspect.signature(func)
    except (TypeError, ValueError):
        signature = None

    simple = signature is not None and all(
        p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in signature.parameters.values()
    )
    positional = [
        p.name
        for p in (signature.parameters.values() if signature else ())
        if p.kind == p.POSITIONAL_OR_KEYWORD
    ]
    defaults = {
        p.name: p.default
        for p in (signature.parameters.values() if signature else ())
        if p.default is not p.empty
    }

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if signature is None:
            return {"args": list(args), **kwargs}
        if simple and len(args) <= len(positional) and kwargs.keys() <= signature.parameters.keys():
            values = {**defaults, **dict(zip(positional, args, strict=False)), **kwargs}
            if len(values) == len(signature.parameters):  # every parameter has a value
                return {k: v for k, v in values.items() if k not in _SKIPPED and k not in volatile}
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return {"args": list(args), **kwargs}
        bound.apply_defaults()
        return {k: v for k, v in bound.arguments.items() if k not in _SKIPPED and k not in volatile}

    def scope(args: tuple[Any, ...], kwargs: dict[str, Any]) -> ToolCallScope:
        key = None
        with swallow_internal_errors("computing an idempotency key"):
            key = idempotency_key(*args, **kwargs) if idempotency_key is not None else None
        return ToolCallScope(
            tool_name,
            arguments(args, kwargs),
            kind=kind,
            deadline_s=deadline_s,
            idempotency_key=key,
            intent=current_intent(),
        )

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            call = scope(args, kwargs).start()
            if call.blocked:
                return call.result
            call.activate()
            try:
                result = await func(*args, **kwargs)
            except BaseException as exc:
                call.fail(exc)
                raise
            return call.finish(result)

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = scope(args, kwargs).start()
        if call.blocked:
            return call.result
        call.activate()
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        return call.finish(result)

    return wrapper
