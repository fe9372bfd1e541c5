"""Monologue: the model keeps talking instead of acting.

Three shapes, all of assistant messages:

- *plans without action*: ``monologue_threshold`` assistant turns in a row with no tool call
  and no user message between them;
- *chanting*: one message that says the same sentence or paragraph again and again;
- *echo across turns*: near-identical assistant messages (word-set Jaccard ≥
  ``monologue_similarity``) with no tool call between them, even when the user answers in
  between ("I will now check the order status." five times); within one user turn (the
  answers to automatic nudges), a message that restates the lines of an earlier one under
  other opening words (a four-step plan, word for word, each time) is an echo too;
- *idle talk*: ``IDLE_MESSAGES`` messages in a row, of either side, with no tool call, none of
  which asks anything, carries a figure or an id, or says much (``idle``): two agents
  trading thanks after the work is done, whatever words they vary. A conversation moves by
  questions, facts and actions; one that has none of them is over, and the agent should end
  it.

Sentences shorter than ``monologue_min_words`` words ("Step 1:", "Done.") may repeat.
"""

from __future__ import annotations

import re
from collections import Counter

from .base import MESSAGE_RUNGS, Finding
from .events import StepView
from .history import History
from .information import has_digit
from .limits import (
    BLOCK_LINES,
    CHANT_MIN_CHARS,
    CHANT_SHARE,
    ECHO_MESSAGES,
    IDLE_MAX_CHARS,
    IDLE_MAX_WORDS,
    IDLE_MESSAGES,
    MESSAGE_CHARS,
    SKETCH_CHARS,
)
from .policy import Policy
from .texts import similar

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def idle(content: str) -> bool:
    """Whether a message moves nothing: it asks no question, carries no figure or id (no
    digit), and says little (at most ``IDLE_MAX_WORDS`` words in at most ``IDLE_MAX_CHARS``
    characters). An empty message is not idle talk (it stands for a model turn whose text was
    not recorded)."""
    if len(content) > IDLE_MAX_CHARS or "?" in content or has_digit(content):
        return False
    return 0 < len(content.split(maxsplit=IDLE_MAX_WORDS)) <= IDLE_MAX_WORDS


def pieces(text: str) -> list[str]:
    """The pieces of ``text`` between ". ", "! " and newlines. The three breaks cannot
    overlap, so turning the other two into ". " and splitting there cuts the pieces a
    pattern (``\\. |\\n|! ``) cuts, with less than half its instructions (string methods
    find a literal by a fast scan; a pattern is tried at every character)."""
    return text.replace("! ", ". ").replace("\n", ". ").split(". ")


def chanted(text: str, min_words: int, min_count: int = 3) -> tuple[str, int]:
    """The most repeated sentence of ``text`` with at least ``min_words`` words and its count,
    when repeats make up at least ``CHANT_SHARE`` of the message's sentences; else ("", 0).
    A runbook that ends every step with the same rollback line is not chanting. A message of
    fewer than ``min_count`` pieces cannot repeat one ``min_count`` times and is not read."""
    text = text[:MESSAGE_CHARS]
    parts = pieces(text)  # a quick look first
    if len(parts) < min_count or len(parts) - len(set(parts)) < 2:
        return "", 0
    parts = [p for p in parts if len(p) > min_words * 2]
    if len(parts) - len(set(parts)) < 2:  # no sentence can be there three times: not a chant
        return "", 0
    counts: Counter[str] = Counter()
    for sentence in _SENTENCE.split(text):
        words = sentence.lower().split()
        if len(words) >= min_words:
            counts[" ".join(words)] += 1
    total = sum(counts.values())
    if not total or (total - len(counts)) / total < CHANT_SHARE:
        return "", 0
    sentence, count = counts.most_common(1)[0]
    return sentence, count


def _sketch(text: str) -> frozenset[str]:
    return frozenset(text[:SKETCH_CHARS].lower().split())


def _lines(text: str, min_words: int) -> tuple[frozenset[str], int]:
    """The lines of ``text`` of at least ``min_words`` words (lower-cased, spacing collapsed)
    and how many lines of that length it has."""
    found = [" ".join(line.lower().split()) for line in text[:SKETCH_CHARS].splitlines()]
    found = [line for line in found if len(line.split(maxsplit=min_words)) >= min_words]
    return frozenset(found), len(found)


def restated(lines: tuple[frozenset[str], int], earlier: frozenset[str]) -> bool:
    """Whether a message whose long lines are ``lines`` restates a message whose long lines
    are ``earlier`` (``BLOCK_LINES``, at least half of its own)."""
    mine, count = lines
    again = len(mine & earlier)
    return again >= BLOCK_LINES and 2 * again >= count


class _Said:
    """An earlier assistant message as the echo check reads it: its words, the user turn it
    answered, how many user messages came before it, and its long lines, read only when a
    restatement has to be checked (most messages never need them)."""

    __slots__ = ("_lines", "nudges", "text", "turn", "words")

    def __init__(self, text: str, turn: int, nudges: int) -> None:
        self.text, self.turn, self.nudges = text, turn, nudges
        self.words = _sketch(text)
        self._lines: tuple[frozenset[str], int] | None = None

    def lines(self, min_words: int) -> tuple[frozenset[str], int]:
        if self._lines is None:
            self._lines = _lines(self.text, min_words)
        return self._lines


class Monologue:
    """Watches assistant messages. A message cannot be skipped: the first sign is a warning,
    and a monologue the warnings do not end is stopped (at the next model turn or tool
    call, by the guard)."""

    name = "monologue"
    kinds = ("monologue",)
    rungs = MESSAGE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.threshold = policy.monologue_threshold
        self.similarity = policy.monologue_similarity
        self.min_words = policy.monologue_min_words
        self._run = 0
        # Assistant messages since the last tool call (the last ECHO_MESSAGES + 1): kept as
        # text until there are enough of them for an echo to count, then as word sets.
        self._texts: list[tuple[str, int, int]] = []
        self._sketches: list[_Said] = []
        self._nudges = 0

    def after(self, history: History, step: StepView) -> None:
        """A tool call ends every kind of monologue."""
        self._run = 0
        self._texts.clear()
        self._sketches.clear()

    def _echoes(self, content: str, turn: int) -> int:
        """How many earlier messages since the last tool call say nearly what ``content``
        says: nearly the same words, or, in the same user turn (answers to automatic nudges),
        the same lines restated (``restated``) after a user message in between (one with
        none between is a plan-without-action run's). Messages of fewer than ``min_words`` words
        never count; word sets are built only once there are enough messages for an echo to
        count."""
        content = content[:SKETCH_CHARS]
        if len(content.split(maxsplit=self.min_words)) < self.min_words:
            return 0  # "OK.", "Done.": short replies may repeat
        texts, sketches = self._texts, self._sketches
        if len(texts) + len(sketches) + 1 < self.threshold:
            texts.append((content, turn, self._nudges))
            del texts[: -ECHO_MESSAGES - 1]
            return 0
        if texts:  # enough messages now: read the ones kept as text
            sketches += (_Said(t, n, u) for t, n, u in texts)
            texts.clear()
        said = _Said(content, turn, self._nudges)
        sketches.append(said)
        del sketches[: -ECHO_MESSAGES - 1]  # the current message and the ECHO_MESSAGES before it
        words, min_words = said.words, self.min_words
        if len(words) < min_words:
            return 0
        return sum(
            1
            for other in sketches[:-1]
            if len(other.words) >= min_words
            and (similar(words, other.words, self.similarity)
                 or (other.turn == turn and other.nudges != self._nudges
                     and restated(said.lines(min_words), other.lines(min_words)[0])))
        )

    def message(self, history: History, role: str, content: str) -> Finding | None:
        if role != "assistant":
            self._run = 0  # a user turn ends a plan-without-action run, not an echo
            self._nudges += 1
            return None
        self._run += 1
        sentence, count = "", 0
        if len(content) >= CHANT_MIN_CHARS:
            sentence, count = chanted(content, self.min_words, self.threshold)
        if count >= self.threshold:
            return Finding(
                kind="monologue",
                message=(
                    f"Your last message says the same thing {count} times (\"{sentence[:80]}\"). "
                    "Repeating it does not move the task on: act (call a tool) or give the "
                    "final answer."
                ),
                stop_reason="no_progress",
                key="monologue:chant",
                details={"repeats": count},
            )
        echoes = self._echoes(content, history.turn)
        if echoes + 1 >= self.threshold:
            return Finding(
                kind="monologue",
                message=(
                    f"You have said nearly the same thing {echoes + 1} times without calling a "
                    "tool. Saying it again changes nothing: call the tool now, or give the "
                    "final answer."
                ),
                stop_reason="no_progress",
                key="monologue:echo",
                details={"turns": echoes + 1},
            )
        if self._run >= self.threshold:
            return Finding(
                kind="monologue",
                message=(
                    f"You have answered {self._run} times in a row without calling a tool. If "
                    "the task needs data or an action, call the tool now; otherwise give the "
                    "final answer."
                ),
                stop_reason="no_progress",
                key="monologue",
                details={"turns": self._run},
            )
        if history.idle_messages >= IDLE_MESSAGES:
            return Finding(
                kind="monologue",
                message=(
                    f"The last {history.idle_messages} messages of this conversation asked "
                    "nothing, told no figure and called no tool: it is over. Give the final "
                    "answer and end it, rather than replying again."
                ),
                stop_reason="no_progress",
                key="monologue:idle",
                details={"messages": history.idle_messages},
            )
        return None
