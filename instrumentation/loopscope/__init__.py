"""loopscope: catch LLM agents stuck in tool-call loops.

The one call::

    import loopscope
    loopscope.instrument(service_name="support-agent", mode="enforce")

    @loopscope.tool(kind="read")
    def search_orders(query: str) -> list[dict]: ...

    with loopscope.episode(task="refund order 1234", task_type="transaction") as ep:
        ...                     # the agent loop; tool calls are traced and guarded
        ep.set_outcome("success")

This module only imports names: it configures nothing, starts no thread and loads no
framework until ``instrument()`` is called.

Example (``loopscope.testing.capture_spans`` stands in for ``instrument()``, keeping the spans
in memory): a read that keeps returning the same answer is warned on its third call, blocked
on its fourth and stopped on its fifth.

    >>> import loopscope
    >>> from loopscope.testing import capture_spans
    >>> with capture_spans(mode="enforce") as spans:
    ...     @loopscope.tool(kind="read")
    ...     def search_orders(query: str) -> str:
    ...         return "orders 1 and 2 are late"
    ...     try:
    ...         with loopscope.episode(task="find late orders", task_type="lookup"):
    ...             for _ in range(6):
    ...                 _ = search_orders("late")
    ...     except loopscope.LoopDetected as stop:
    ...         print(stop.diagnostic["terminated_by"])
    ...     [s["attributes"]["loopscope.guard.action"] for s in spans.tool_spans()]
    repeated_tool_call
    ['allow', 'allow', 'warn', 'block', 'stop']
"""

from ._call import ToolCallScope, tool_call
from ._config import export_stats
from ._errors import LoopDetected, LoopscopeError
from ._instrument import instrument
from .detect import Budgets, Policy, RequiredTool
from .episode import Episode, current_episode, episode
from .intent import intended_duplicate
from .policy_file import load_policy
from .tool import tool

__version__ = "0.1.0"


def instrument_openai_agents() -> None:
    """Trace and guard the OpenAI Agents SDK's function tools and runs.

    Needs ``pip install 'loopscope[openai-agents]'``.
    """
    from .integrations import instrument_framework

    instrument_framework("openai_agents")


def instrument_langchain() -> None:
    """Trace and guard LangChain ``BaseTool`` calls and LangGraph graph runs.

    Needs ``pip install 'loopscope[langchain]'``.
    """
    from .integrations import instrument_framework

    instrument_framework("langchain")


def instrument_mcp() -> None:
    """Trace and guard MCP ``ClientSession.call_tool``. Needs ``pip install 'loopscope[mcp]'``."""
    from .integrations import instrument_framework

    instrument_framework("mcp")


def reconcile(ref: str, *, found: bool, result: object = None) -> bool:
    """Settle an UNKNOWN write of the current episode (see ``Episode.reconcile``)."""
    return current_episode().reconcile(ref, found=found, result=result)


def mark_progress() -> None:
    """Tell the current episode's guard that the run made progress."""
    current_episode().mark_progress()


__all__ = [
    "Budgets",
    "Episode",
    "LoopDetected",
    "LoopscopeError",
    "Policy",
    "RequiredTool",
    "ToolCallScope",
    "current_episode",
    "episode",
    "export_stats",
    "instrument",
    "instrument_langchain",
    "instrument_mcp",
    "instrument_openai_agents",
    "intended_duplicate",
    "load_policy",
    "mark_progress",
    "reconcile",
    "tool",
    "tool_call",
]
