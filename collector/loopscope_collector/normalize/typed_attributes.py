"""The span attributes that land in typed columns, and what those columns can hold.

Every other attribute is stored as JSON text in ``spans.attributes`` and can hold anything;
the attributes below are also read into a typed column of ``tool_calls`` or ``episodes``.
This table is the one place that says which column each feeds and what it holds. The decoder
checks each span against it (``set_aside_unstorable``), so a value a reader would take but its
column cannot hold is set aside and named in the answer's ``partial_success`` instead of being
dropped in silence; the readers (``common`` and its callers) take their bounds from it
(``typed_int``). A test checks the table against the columns of a real store.

The rule: a value the reader would read as a number (an integer, an integral float, a decimal
string) must fit its column. A value that is not a number at all (text, a list) is not read
as one and stays only in the span, as before. Token counts are narrower than their column
(``TOKEN_COUNT``: what every read can sum), and ``DOUBLE`` columns take only finite numbers:
DuckDB would keep NaN and infinities, but every sum over them is NaN, and a read's answer
would not be JSON. Such a value is not clamped (a clamped count or cost would be a number
nobody sent, stored as if it had been) and does not refuse its request (exporters do not retry
a 400, and the request's good spans would be lost): the decoder sets it aside
(``set_aside_unstorable``: kept as text under ``loopscope.unstorable.<key>``, so its column
reads unknown), stores the span, and the answer's OTLP ``partial_success`` names the attribute,
so the client learns at once what to fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from loopscope import conventions as c

__all__ = ["SET_ASIDE", "TYPED_ATTRIBUTES", "Column", "set_aside_unstorable", "typed_int",
           "unstorable_attribute"]


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A DuckDB column type and the integers it holds (``None``: any number), narrowed where
    the reads need less than the type (``why`` says so)."""

    name: str
    low: int | None = None
    high: int | None = None
    why: str = ""

    def holds(self, number: int) -> bool:
        """Whether a column of this type can hold ``number``."""
        return (self.low is None or self.low <= number) and (
            self.high is None or number <= self.high
        )


INTEGER: Final = ColumnType("INTEGER", -(2**31), 2**31 - 1)
BIGINT: Final = ColumnType("BIGINT", -(2**63), 2**63 - 1)
DOUBLE: Final = ColumnType("DOUBLE")
TOKEN_COUNT: Final = ColumnType(
    "BIGINT", 0, 10**12,
    "a token count: never negative, and small enough that every read can add and sum it "
    "(two counts of 2^63-1 overflow a row's total)")
"""Token counts are BIGINT, but the reads add a call's input and output tokens and sum them
over episodes and services: a count near the type's limit overflows those sums (DuckDB
refuses the read), and a negative one makes them lie. A trillion tokens in one span is far
past any model's context, and a store can sum millions of such spans."""


@dataclass(frozen=True, slots=True)
class Column:
    """Where a typed attribute is stored: its type and the ``table.column`` names it feeds."""

    type: ColumnType
    columns: tuple[str, ...]


TYPED_ATTRIBUTES: Final[Mapping[str, Column]] = {
    c.STEP: Column(INTEGER, ("tool_calls.step", "messages.step")),
    c.CALL_ORDINAL: Column(INTEGER, ("tool_calls.call_ordinal",)),
    c.OUTPUT_SIZE: Column(INTEGER, ("tool_calls.output_size",)),
    c.TURN: Column(INTEGER, ("tool_calls.turn",)),
    c.STREAK: Column(INTEGER, ("tool_calls.streak",)),
    c.LABEL_FIRST_LOOP_STEP: Column(INTEGER, ("episodes.scenario_first_loop_step",)),
    c.GEN_AI_USAGE_INPUT_TOKENS: Column(
        TOKEN_COUNT, ("tool_calls.tokens_in", "episodes.input_tokens")
    ),
    c.GEN_AI_USAGE_OUTPUT_TOKENS: Column(
        TOKEN_COUNT, ("tool_calls.tokens_out", "episodes.output_tokens")
    ),
    "llm.token_count.prompt": Column(TOKEN_COUNT, ("episodes.input_tokens",)),  # OpenInference
    "llm.token_count.completion": Column(TOKEN_COUNT, ("episodes.output_tokens",)),
    c.COST_USD: Column(DOUBLE, ("tool_calls.cost_usd", "episodes.cost_usd")),
    c.TOOL_DEADLINE_S: Column(DOUBLE, ("tool_calls.deadline_s",)),
}
_BOUNDED: Final = frozenset(k for k, v in TYPED_ATTRIBUTES.items() if v.type.low is not None)
_REAL: Final = frozenset(k for k, v in TYPED_ATTRIBUTES.items() if v.type.low is None)
_CHECKED: Final = _BOUNDED | _REAL


def _integer(value: Any) -> int | None:
    """``value`` as the readers read an integer: an int, an integral float or a decimal
    string; ``None`` for anything else (a bool is not a number here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def typed_int(attrs: Mapping[str, Any], *keys: str) -> int | None:
    """The first of ``keys`` present in ``attrs`` as an integer its column can hold, else
    ``None`` (absent, not a number, or out of range: the decoder already refused the last)."""
    for key in keys:
        value = attrs.get(key)
        if value is None:
            continue
        number = _integer(value)
        if number is None or not TYPED_ATTRIBUTES[key].type.holds(number):
            return None
        return number
    return None


def unstorable_attribute(attrs: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first attribute in ``attrs`` whose number its column cannot hold, and what is
    wrong with it as ``attributes['key']: ...``; ``None`` if all fit.

    Called by the decoder for every span: a set test first, so a span without typed
    attributes costs one ``isdisjoint``.
    """
    if _CHECKED.isdisjoint(attrs):
        return None
    for key in _CHECKED.intersection(attrs):
        column = TYPED_ATTRIBUTES[key]
        kind = column.type
        where = " and ".join(column.columns)
        if key in _REAL:
            if not _finite(attrs[key]):
                return key, (f"attributes['{key}']: {attrs[key]!r} is not a finite number; "
                             f"{where} ({kind.name}) holds only finite ones, so that every "
                             "read can sum it and answer JSON")
            continue
        number = _integer(attrs[key])
        if number is not None and not kind.holds(number):
            why = f": {kind.why}" if kind.why else ""
            return key, (f"attributes['{key}']: {number} does not fit {where}"
                         f" ({kind.name}, {kind.low} to {kind.high}{why})")
    return None


SET_ASIDE: Final = "loopscope.unstorable."
"""An attribute whose value its column cannot hold is kept under this prefix, as text."""


def set_aside_unstorable(attrs: dict[str, Any]) -> list[str]:
    """Move each attribute of ``attrs`` whose number its column cannot hold to
    ``SET_ASIDE + key``, as text: the span is stored, that value reads as unknown (no reader
    takes the new key) and what was sent is kept. Returns what was wrong with each
    (``unstorable_attribute``), for the answer's ``partial_success``."""
    wrong: list[str] = []
    while (found := unstorable_attribute(attrs)) is not None:
        key, why = found
        attrs[SET_ASIDE + key] = str(attrs.pop(key))
        wrong.append(why)
    return wrong


def _finite(value: Any) -> bool:
    """False for a number the readers would read as NaN or an infinity (a float, or a text
    such as ``"nan"`` or ``"1e400"``); True for anything else (not a number is not read)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        try:
            return math.isfinite(float(value))
        except ValueError:
            return True
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < 2**1023  # float() of a larger one overflows
    return True
