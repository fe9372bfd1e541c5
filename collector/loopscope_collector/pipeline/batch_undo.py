"""What a batch changed in the pipeline's memory, so a rolled-back batch leaves no trace.

The pipeline stores a batch in one transaction, but it also keeps state in memory between
batches: which trace belongs to which episode, which MCP calls were already seen, and each
episode's detection state. If the transaction rolls back, that memory must too, or a retry of
the same spans is judged against calls that were never stored (two real calls counted as
three, an MCP call dropped as a duplicate of itself). ``BatchUndo`` is the pipeline's log of
those changes for one batch: cache writes are undone in reverse order, and the episodes
whose detection state moved are forgotten, so they are rebuilt from the store (which holds
exactly what was committed) the next time they are seen. Counters are only moved on commit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

_ABSENT: Final = object()


class BatchUndo:
    """The in-memory changes of one batch; see the module docstring. Pipeline thread only."""

    def __init__(self) -> None:
        self._writes: list[tuple[OrderedDict[str, Any], str, Any]] = []
        self.episodes: set[str] = set()
        """Episodes whose detection state this batch changed."""
        self.on_commit: list[Callable[[], None]] = []
        """What to do once the batch has committed (counters)."""

    def remember(self, cache: OrderedDict[str, Any], key: str, value: Any, limit: int) -> None:
        """``cache[key] = value`` as most recent, evicting the oldest past ``limit``; logged."""
        self._writes.append((cache, key, cache.get(key, _ABSENT)))
        cache[key] = value
        cache.move_to_end(key)
        if len(cache) > limit:
            old_key, old_value = cache.popitem(last=False)
            self._writes.append((cache, old_key, old_value))

    def undo(self, forget: Callable[[str], None]) -> None:
        """Put the caches back as they were and forget the touched episodes' detection."""
        for cache, key, previous in reversed(self._writes):
            if previous is _ABSENT:
                cache.pop(key, None)
            else:
                cache[key] = previous
        self._writes.clear()
        for episode_id in self.episodes:
            forget(episode_id)

    def commit(self) -> None:
        """Run the on-commit actions."""
        for action in self.on_commit:
            action()
