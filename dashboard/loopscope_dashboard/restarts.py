"""What ``loopscope up`` restarted, in a small JSON file the dashboard's banner reads.

``up`` restarts a part (collector, dashboard, demo agents) that dies; the terminal shows each
restart as it happens, but a user looking at the dashboard would not know the collector was
killed a minute ago and some spans sent meanwhile may be missing. So ``up`` writes one file,
rewritten whole (and atomically) on every restart, and names it to the dashboard in
``$LOOPSCOPE_UP_STATUS``; the banner reads it on each of its checks. Standard library only:
``up`` imports it without Streamlit.

The file is a JSON list, one object per part that was restarted::

    [{"part": "collector", "restarts": 1, "last_exit": -9, "last_restart_at": 1764763263.0}]

``last_exit`` is the exit status of the process that died (negative: the signal that killed
it), ``last_restart_at`` the Unix time of the last restart.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Restarts:
    """How often ``up`` restarted one part, and how its last process had ended."""

    part: str
    restarts: int
    last_exit: int
    last_restart_at: float


def write(path: Path, parts: Iterable[Restarts]) -> None:
    """Replace ``path`` with ``parts`` (a reader sees the old file or the new, never half)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps([asdict(p) for p in parts]))
    os.replace(partial, path)


def read(path: Path) -> list[Restarts]:
    """The parts ``up`` restarted, from ``path``; none when the file is absent or unreadable
    (the banner then says nothing rather than fail a page)."""
    try:
        rows = json.loads(path.read_text())
        return [Restarts(str(r["part"]), int(r["restarts"]), int(r["last_exit"]),
                         float(r["last_restart_at"])) for r in rows]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def how_it_ended(code: int) -> str:
    """A process's exit status in words: ``killed by SIGKILL`` or ``exit code 1``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
