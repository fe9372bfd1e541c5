"""What the monitor has read of outputs, remembered: an output seen again is not read again.

A loop returns the same text over and over, and runs of one agent answer alike, so reading an
output once (its hash, word sketch, whether it found nothing, its facts) pays. ``Readings`` is
that memo, in bounded memory; a monitor owns one, or is handed one to share across the runs
it is given (a replay of many runs, a benchmark round). The core keeps no memo of its own.
"""

from __future__ import annotations

from typing import Any

from .answers import is_negative
from .fingerprint import output_hash
from .information import Echoes, Names, facts
from .limits import READINGS_KEPT
from .texts import word_sketch


class Readings:
    """Readings of outputs, keyed by the text's own hash and length (no text is kept; an
    output hash recorded by someone else may not be one of this text), and for facts by the
    arguments too (their echoes are masked). Each memo holds at most ``READINGS_KEPT``."""

    __slots__ = ("_echoes", "_facts", "_names", "_readings")

    def __init__(self) -> None:
        self._readings: dict[tuple[int, int], tuple[str, frozenset[str], bool]] = {}
        self._facts: dict[tuple[int, int, str], frozenset[int]] = {}
        self._echoes: Echoes = {}
        self._names: Names = {}

    def forget(self) -> None:
        """Forget every reading (a benchmark round that reads each output afresh)."""
        self._readings.clear()
        self._facts.clear()
        self._echoes.clear()
        self._names.clear()

    def facts_of(self, text: str, args_text: str, args: Any) -> frozenset[int]:
        """The output's facts (``information.facts``); an output seen again for the same
        arguments (a spin, or the same answer in another run) is not read again."""
        memo = self._facts
        key = (hash(text), len(text), args_text)
        found = memo.get(key)
        if found is None:
            if len(memo) >= READINGS_KEPT:
                memo.clear()
            found = memo[key] = facts(text, args, args_text, self._echoes, self._names) or frozenset()
        return found

    def reading_of(self, text: str) -> tuple[str, frozenset[str], bool]:
        """The output's hash, its word sketch, and whether it says that nothing was found
        (``is_negative``); an output seen again (a loop returns the same text over and over)
        is not read again."""
        memo = self._readings
        key = (hash(text), len(text))
        reading = memo.get(key)
        if reading is None:
            if len(memo) >= READINGS_KEPT:
                memo.clear()
            words = word_sketch(text)
            reading = memo[key] = (output_hash(text), words, is_negative(text, words))
        return reading
