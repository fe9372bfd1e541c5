"""The one exception that reaches user code on purpose, and the guard against all others."""

from __future__ import annotations

import logging
import os
from types import TracebackType
from typing import Any

from .environment_variables import LOOPSCOPE_RAISE_INTERNAL_ERRORS

logger = logging.getLogger("loopscope")


class LoopscopeError(Exception):
    """Base of the exceptions loopscope raises on purpose."""


class LoopDetected(LoopscopeError):
    """The guard stopped the run (enforce mode only).

    Raised from a tool call after the call's span, including its output, has been recorded
    (``function_call -> function_call_output`` stays paired). ``diagnostic`` is the
    structured record (``terminated_by``, ``tool``, ``count``, ``limit``, ``consumed``,
    ``last_progress_step``, ``hint``, ...); ``output`` is the last tool output the model saw,
    so a framework can append it to the history before ending the run.
    """

    def __init__(self, message: str, *, diagnostic: dict[str, Any], output: Any = None) -> None:
        super().__init__(message)
        self.diagnostic = diagnostic
        self.output = output

    @property
    def stop_reason(self) -> str:
        """completed | no_progress | repeated_tool_call | budget | timeout | aborted | fatal."""
        return str(self.diagnostic.get("terminated_by", "fatal"))


class swallow_internal_errors:
    """Keep a loopscope bug from becoming the agent's bug.

    Logs the exception and lets the agent carry on with less telemetry. The test suite sets
    ``LOOPSCOPE_RAISE_INTERNAL_ERRORS=1`` so our own bugs fail our own tests. A class, not a
    generator, so type checkers know the block can end in the line after it.
    """

    def __init__(self, doing: str) -> None:
        self.doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc is None or isinstance(exc, LoopDetected) or not isinstance(exc, Exception):
            return False
        if os.environ.get(LOOPSCOPE_RAISE_INTERNAL_ERRORS) == "1":
            return False
        doing = self.doing
        count = _internal_errors[doing] = _internal_errors.get(doing, 0) + 1
        if count == 1:  # the first with its traceback; repeats only at debug level
            logger.error("loopscope: internal error while %s; the agent is unaffected", doing,
                         exc_info=exc)
        else:
            logger.debug("loopscope: internal error while %s (%d times)", doing, count)
        return True


_internal_errors: dict[str, int] = {}

