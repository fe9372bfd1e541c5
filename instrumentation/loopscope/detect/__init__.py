"""The detection core: pure, standard library only, the one place loop detection lives.

Feed an ``EpisodeMonitor`` one step at a time (``before_call`` / ``after_call`` /
``on_message``) and act on the ``Decision`` it returns. The in-process guard, ``loopscope
analyze`` and the collector all do exactly that.

Example:
    >>> from loopscope.detect import EpisodeMonitor, ToolCall, ToolResult
    >>> m = EpisodeMonitor(task_type="lookup")
    >>> actions = []
    >>> for _ in range(5):
    ...     d = m.before_call(ToolCall("search_orders", {"q": "late"}))
    ...     actions.append(d.action)
    ...     _ = m.after_call(ToolResult("orders 1 and 2 are late"))
    >>> actions, d.flags[0].detector, d.stop_reason
    (['allow', 'allow', 'warn', 'block', 'stop'], 'exact_repeat', 'repeated_tool_call')
"""

from .breaker import BREAKERS
from .events import (
    PROGRESS_MARKERS,
    STOP_REASONS,
    Decision,
    Flag,
    StepView,
    ToolCall,
    ToolResult,
)
from .expectations import AnswerCheck
from .fingerprint import call_signature, canonical_json, output_hash, output_text
from .monitor import EpisodeMonitor
from .policy import Budgets, Policy, RequiredTool
from .registry import DEFAULT_DETECTORS, LOOP_KINDS

__all__ = [
    "BREAKERS",
    "DEFAULT_DETECTORS",
    "LOOP_KINDS",
    "PROGRESS_MARKERS",
    "STOP_REASONS",
    "AnswerCheck",
    "Budgets",
    "Decision",
    "EpisodeMonitor",
    "Flag",
    "Policy",
    "RequiredTool",
    "StepView",
    "ToolCall",
    "ToolResult",
    "call_signature",
    "canonical_json",
    "output_hash",
    "output_text",
]
