"""What the user says that is no new intent: an automatic nudge, or the agent's own words.

A user message normally starts a new turn (a new intent). Two kinds do not: the same words
sent again asking to go on ("Please continue."), and a text one of the agent's last calls sent
coming back as the user's message (a brief handed to a sub-agent). ``UserNudges`` remembers
what it needs to tell them, in bounded memory, for one episode.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .limits import NUDGE_CHARS, SAID_KEPT, SENT_KEPT, SENT_MIN_CHARS

CONTINUE: Final = re.compile(
    r"\b(?:continue|keep (?:going|working)|go on|proceed|carry on|resume|next steps?"
    r"|are you (?:done|finished)|say done|if you are done|if you're done|error|invalid"
    r"|not valid|no valid|tool call|tool-call|try again)\b|^\[[\w -]+\]$"
)
"""What an automatic nudge says: the same message again, asking to go on, reporting an error
in the last reply, or a bare tag (``[heartbeat]``), is no new intent (a person asking "any
update?" twice, or for "another one", still is)."""


def _sent_texts(args: Any) -> tuple[str, ...]:
    """The string values of a call's arguments of ``SENT_MIN_CHARS`` or more, top level and
    one down, whitespace collapsed."""
    found: list[str] = []
    values = args.values() if isinstance(args, dict) else (args,)
    for value in values:
        for item in value.values() if isinstance(value, dict) else (value,):
            if isinstance(item, str) and len(item) >= SENT_MIN_CHARS:
                found.append(" ".join(item[:NUDGE_CHARS].split()))
    return tuple(found)


def _normalised(text: str) -> str:
    """A user message's words, lower-cased, one space apart (how nudges are compared)."""
    return " ".join(text.lower().split())


def _said_mark(text: str) -> tuple[int, int, int]:
    """What two messages with the same ``_normalised`` words always share, counted at C
    speed: their e's (no character but ``E`` lower-cases to one), full stops and commas
    (neither case nor spacing touches them)."""
    return text.count("e") + text.count("E"), text.count("."), text.count(",")


class UserNudges:
    """What one episode's user said and its agent's calls sent, to tell a user message that
    is no new intent (``new_intent``)."""

    __slots__ = ("_said", "_sent")

    def __init__(self) -> None:
        self._said: dict[str, tuple[tuple[int, int, int], str | None]] = {}
        """What the user has said (the last ``SAID_KEPT`` different things, oldest first),
        each as sent, with its ``_said_mark`` and its words (``_normalised``, worked out when
        first compared): the same words again ("Please continue.") are an automatic nudge,
        not a new intent."""
        self._sent: tuple[str, ...] = ()
        """The long texts the agent's last calls sent (``_sent_texts``): a user message that
        only repeats one is its own words handed back (a brief delegated to a sub-agent)."""

    def sent(self, args: Any) -> None:
        """Remember the long texts a call's arguments send."""
        self._sent = (*self._sent, *_sent_texts(args))[-SENT_KEPT:]

    def new_intent(self, content: str) -> bool:
        """Whether a user message is a new intent: not an automatic nudge sent again
        (``nudged_again``; a message over ``NUDGE_CHARS`` always is new) and not the agent's
        own words handed back (``handed_back``). Remembers what was said."""
        return (
            (len(content) > NUDGE_CHARS or not self.nudged_again(content))
            and not self.handed_back(content)
        )

    def handed_back(self, content: str) -> bool:
        """Whether a user message only repeats a text one of the agent's last calls sent
        (``SENT_MIN_CHARS`` or more: a brief handed to a sub-agent, which the sub-agent
        receives as its task): the agent's own words coming back, not a person's new
        request."""
        if len(content) < SENT_MIN_CHARS or not self._sent:
            return False
        said = " ".join(content.split())
        return said in self._sent

    def nudged_again(self, content: str) -> bool:
        """Whether the user's ``content`` says again, in the same words (``_normalised``),
        one of the last ``SAID_KEPT`` different things they said, and asks to go on
        (``CONTINUE``): an automatic nudge. Otherwise it becomes the latest thing said.
        Words are compared only between messages of one ``_said_mark``: most messages
        are told apart without being normalised."""
        said = self._said
        mark = _said_mark(content)
        words = None
        same = None
        for raw, (their_mark, theirs) in said.items():
            if their_mark != mark:
                continue
            if raw != content:
                if words is None:
                    words = _normalised(content)
                if theirs is None:
                    theirs = _normalised(raw)
                    said[raw] = (mark, theirs)  # (a new value: the order is kept)
                if theirs != words:
                    continue
            same = raw
            break
        if same is not None:
            if words is None:
                words = _normalised(content)
            if CONTINUE.search(words):
                return True
            del said[same]  # (said again: it becomes the latest)
        said[content] = (mark, words)
        if len(said) > SAID_KEPT:  # (the last few, not all)
            del said[next(iter(said))]
        return False
