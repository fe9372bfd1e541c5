"""One module per agent framework, each imported only when asked for .

``loopscope.instrument()`` instruments every framework it finds installed; ``frameworks=[...]``
picks some, ``frameworks=[]`` none. Each module's ``instrument()`` is idempotent and makes
every tool call of its framework a guarded loopscope tool call; ``uninstrument()`` undoes it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Final

logger = logging.getLogger("loopscope")

FRAMEWORKS: Final = {
    # name: (the framework's import name, loopscope's module, the pip extra)
    "openai_agents": ("agents", "loopscope.integrations.openai_agents", "openai-agents"),
    "langchain": ("langchain_core", "loopscope.integrations.langchain", "langchain"),
    "mcp": ("mcp", "loopscope.integrations.mcp", "mcp"),
}
DISTRIBUTIONS: Final = {"openai_agents": "openai-agents", "langchain": "langchain-core",
                        "mcp": "mcp"}
"""The installed distribution that ships each framework's import name: a module of the same
name elsewhere (a user's own ``agents.py`` beside the script) is not the framework."""


def installed() -> list[str]:
    """The frameworks installed in this process (without importing them): the import name
    is found, and it is the one the framework's distribution installed."""
    found = []
    for name, (package, _, _) in FRAMEWORKS.items():
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is not None and _shipped_by(DISTRIBUTIONS[name], spec.origin,
                                            spec.submodule_search_locations):
            found.append(name)
        elif spec is not None:
            logger.debug("loopscope: %r at %s is not the %s distribution's; %s is not "
                         "instrumented", package, spec.origin, DISTRIBUTIONS[name], name)
    return found


def _shipped_by(distribution: str, origin: str | None,
                locations: Iterable[str] | None) -> bool:
    """Whether a module found at ``origin`` (or, for a namespace package, ``locations``)
    lies in the folder ``distribution`` was installed into (editable installs included:
    their ``.pth`` folder is then where the module is)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    where = [Path(origin)] if origin and origin not in ("built-in", "frozen") else [
        Path(p) for p in locations or ()]
    roots = {Path(str(dist.locate_file(""))).resolve()}
    for file in dist.files or ():
        if file.suffix == ".pth":  # an editable install points at its source folder
            try:
                roots.update(Path(line).resolve() for line in
                             Path(str(dist.locate_file(file))).read_text().splitlines()
                             if line and not line.startswith(("#", "import ")))
            except OSError:
                continue
    return any(root in place.resolve().parents for place in where for root in roots)


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
