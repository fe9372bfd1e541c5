"""Required tools: a turn that must call a tool, and what happens when it does not.

When a user's message matches a ``RequiredTool`` rule and the model answers without calling
the tool, the runtime injects a correction and asks again, up to ``max_corrections`` times;
after that the answer goes out with a warning in front of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .policy import RequiredTool

_RECALL = re.compile(r"<relevant-memories>.*?</relevant-memories>", re.DOTALL)
_CURRENT = re.compile(r"<current-user-message>(.*?)</current-user-message>", re.DOTALL)


def strip_recall_context(text: str) -> str:
    """The user's own words: recalled memories removed, the current message kept."""
    current = _CURRENT.search(text)
    if current:
        return current.group(1)
    return _RECALL.sub("", text)


def resolve_turn_expectation(
    rules: Sequence[RequiredTool], message: str, context: Sequence[str] = ()
) -> RequiredTool | None:
    """The rule a user's ``message`` triggers, given the earlier messages in ``context``."""
    text = strip_recall_context(message).strip().lower()
    for rule in rules:
        if any(word.lower() in text for word in rule.keywords):
            return rule
        if rule.followups and any(
            text == w.lower() or text.startswith(w.lower()) for w in rule.followups
        ):
            recent = " ".join(context[-rule.context_messages :]).lower()
            if any(marker.lower() in recent for marker in rule.context_markers):
                return rule
    return None


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """What to do with a final answer: send it, ask again with a correction, or warn."""

    action: Literal["allow", "retry", "warn"]
    correction: str | None = None
    text: str | None = None
    tool: str | None = None


class ExpectationTracker:
    """Follows one user turn: which tool it requires and whether it has been called."""

    def __init__(self, rules: Sequence[RequiredTool]) -> None:
        self.rules = tuple(rules)
        self.expected: RequiredTool | None = None
        self.corrections = 0

    def on_user_message(self, message: str, context: Sequence[str] = ()) -> RequiredTool | None:
        """A new user turn starts; returns the rule it triggers, if any."""
        self.expected = resolve_turn_expectation(self.rules, message, context)
        self.corrections = 0
        return self.expected

    def on_tool_call(self, tool: str, args: Any) -> None:
        """A tool was called; it may satisfy the expectation."""
        rule = self.expected
        if rule is None or tool != rule.tool:
            return
        if rule.args is None or (
            isinstance(args, Mapping) and all(args.get(k) == v for k, v in rule.args.items())
        ):
            self.expected = None

    def on_answer(self, text: str) -> AnswerCheck:
        """The model answered without (or after) calling tools; decide what happens."""
        rule = self.expected
        if rule is None:
            return AnswerCheck("allow", text=text)
        want = rule.tool + (f" with {dict(rule.args)}" if rule.args else "")
        if self.corrections < rule.max_corrections:
            self.corrections += 1
            return AnswerCheck(
                "retry",
                correction=(
                    f"This request needs data from the {want} tool, and it has not been "
                    "called. Call it now, then answer from its result."
                ),
                tool=rule.tool,
            )
        warning = (
            f"[warning: this answer was given without calling {want}, which this request "
            "requires; it may be inaccurate]"
        )
        self.expected = None
        return AnswerCheck("warn", text=f"{warning}\n{text}", tool=rule.tool)
