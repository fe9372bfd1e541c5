"""One module per agent framework, each imported only when asked for .

``loopscope.instrument()`` instruments every framework it finds installed; ``frameworks=[...]``
picks some, ``frameworks=[]`` none. Each module's ``instrument()`` is idempotent and makes
every tool call of its framework a guarded loopscope tool call; ``uninstrument()`` undoes it.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Iterable
from typing import Final

logger = logging.getLogger("loopscope")

FRAMEWORKS: Final = {
    # name: (the framework's import name, loopscope's module, the pip extra)
    "openai_agents": ("agents", "loopscope.integrations.openai_agents", "openai-agents"),
    "langchain": ("langchain_core", "loopscope.integrations.langchain", "langchain"),
    "mcp": ("mcp", "loopscope.integrations.mcp", "mcp"),
}


def installed() -> list[str]:
    """The frameworks importable in this process (without importing them)."""
    found = []
    for name, (package, _, _) in FRAMEWORKS.items():
        try:
            if importlib.util.find_spec(package) is not None:
                found.append(name)
        except (ImportError, ValueError):
            continue
    return found


def instrument_framework(name: str) -> None:
    """Instrument one framework by name.

    Raises:
        ValueError: ``name`` is not a framework loopscope knows.
        RuntimeError: the framework is not installed (the message says how to install it).
    """
    if name not in FRAMEWORKS:
        raise ValueError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
    module = importlib.import_module(FRAMEWORKS[name][1])
    module.instrument()


def instrument_frameworks(names: Iterable[str] | None) -> list[str]:
    """Instrument ``names`` (``None``: every installed framework); returns those done.

    A framework asked for by name that cannot be instrumented raises; one found installed
    but failing to instrument (an unsupported version, say) is logged and skipped, so the
    agent still runs.
    """
    if names is not None:
        chosen = list(names)
        for name in chosen:
            instrument_framework(name)
        return chosen
    done = []
    for name in installed():
        try:
            instrument_framework(name)
            done.append(name)
        except Exception as exc:
            logger.warning("loopscope: could not instrument %s (%s); its tool calls are not "
                           "guarded", name, exc)
    return done
