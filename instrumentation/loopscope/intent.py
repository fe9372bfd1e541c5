"""Declared intent: "the user really wants this write twice" ("buy another one")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_INTENT: ContextVar[str | None] = ContextVar("loopscope_intent", default=None)


def current_intent() -> str | None:
    """The intent declared for calls made now, if any."""
    return _INTENT.get()


@contextlib.contextmanager
def intended_duplicate() -> Iterator[None]:
    """Calls made inside are declared intended repeats: an identical write is not flagged.

    Example::

        with loopscope.intended_duplicate():
            create_order(item="mug", qty=1)   # the user asked for another one
    """
    token = _INTENT.set("duplicate")
    try:
        yield
    finally:
        _INTENT.reset(token)
