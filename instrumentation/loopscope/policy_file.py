"""A ``Policy`` as the JSON a policy file holds: only the settings that differ from the
defaults. The guard records it on each run's root span (``loopscope.guard.policy``), the
dashboard's Policy page exports it, and ``instrument(policy=...)``, ``loopscope collector
--policy`` and ``loopscope analyze --policy`` read it back, all with ``load_policy``."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .detect import Policy
from .detect.policy import policy_from_json

__all__ = ["changes_of", "load_policy", "plain", "to_json"]

_recorded: list[tuple[Policy, str]] = []


def plain(value: Any) -> Any:
    """A policy value as JSON data: dataclasses as objects, sets sorted, mappings as dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted(plain(v) for v in value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value


def changes_of(policy: Policy) -> dict[str, Any]:
    """The fields where ``policy`` differs from the defaults, as JSON data: a policy file."""
    defaults = plain(Policy())
    return {name: value for name, value in plain(policy).items() if value != defaults[name]}


def to_json(policy: Policy, *, indent: int | None = 2) -> str:
    """The policy file of ``policy`` (sorted keys; ``indent=None``: one line, no newline)."""
    text = json.dumps(changes_of(policy), indent=indent, sort_keys=True, ensure_ascii=False)
    return text + "\n" if indent is not None else text


def recorded(policy: Policy) -> str:
    """``to_json(policy, indent=None)``, worked out once per policy object (every run's root
    span carries it, and a process has one policy for many runs)."""
    if _recorded and _recorded[0][0] is policy:
        return _recorded[0][1]
    text = to_json(policy, indent=None)
    _recorded[:] = [(policy, text)]
    return text


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """Read a policy from a JSON file of ``Policy`` fields (the one policy-file loader).

    Raises:
        ValueError: the file is missing, not JSON, or has a bad setting (named).
    """
    source = f"policy file {os.fspath(path)}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{source}: cannot read it ({exc.strerror})") from None
    return policy_from_json(text, source=source)
