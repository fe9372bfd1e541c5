"""The span attributes that land in typed columns, and what those columns can hold.

Every other attribute is stored as JSON text in ``spans.attributes`` and can hold anything;
the attributes below are also read into a typed column of ``tool_calls`` or ``episodes``.
This table is the one place that says which column each feeds and what it holds. The decoder
checks each request against it (``unstorable_attribute``), so a value a reader would take but
its column cannot hold is a 400 naming the attribute (gRPC INVALID_ARGUMENT) instead of a
value dropped in silence; the readers (``common`` and its callers) take their bounds from it
(``typed_int``). A test checks the table against the columns of a real store.

The rule: a value the reader would read as a number (an integer, an integral float, a decimal
string) must fit its column. A value that is not a number at all (text, a list) is not read
as one and stays only in the span, as before. ``DOUBLE`` columns hold every number (DuckDB
keeps infinities and NaN), so they never refuse one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from loopscope import conventions as c

__all__ = ["TYPED_ATTRIBUTES", "Column", "typed_int", "unstorable_attribute"]


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A DuckDB column type and the integers it holds (``None``: any number)."""

    name: str
    low: int | None = None
    high: int | None = None

    def holds(self, number: int) -> bool:
        """Whether a column of this type can hold ``number``."""
        return (self.low is None or self.low <= number) and (
            self.high is None or number <= self.high
        )


INTEGER: Final = ColumnType("INTEGER", -(2**31), 2**31 - 1)
BIGINT: Final = ColumnType("BIGINT", -(2**63), 2**63 - 1)
DOUBLE: Final = ColumnType("DOUBLE")


@dataclass(frozen=True, slots=True)
class Column:
    """Where a typed attribute is stored: its type and the ``table.column`` names it feeds."""

    type: ColumnType
    columns: tuple[str, ...]


TYPED_ATTRIBUTES: Final[Mapping[str, Column]] = {
    c.STEP: Column(INTEGER, ("tool_calls.step", "messages.step")),
    c.OUTPUT_SIZE: Column(INTEGER, ("tool_calls.output_size",)),
    c.TURN: Column(INTEGER, ("tool_calls.turn",)),
    c.STREAK: Column(INTEGER, ("tool_calls.streak",)),
    c.LABEL_FIRST_LOOP_STEP: Column(INTEGER, ("episodes.scenario_first_loop_step",)),
    c.GEN_AI_USAGE_INPUT_TOKENS: Column(BIGINT, ("tool_calls.tokens_in", "episodes.input_tokens")),
    c.GEN_AI_USAGE_OUTPUT_TOKENS: Column(
        BIGINT, ("tool_calls.tokens_out", "episodes.output_tokens")
    ),
    "llm.token_count.prompt": Column(BIGINT, ("episodes.input_tokens",)),  # OpenInference
    "llm.token_count.completion": Column(BIGINT, ("episodes.output_tokens",)),
    c.COST_USD: Column(DOUBLE, ("tool_calls.cost_usd", "episodes.cost_usd")),
    c.TOOL_DEADLINE_S: Column(DOUBLE, ("tool_calls.deadline_s",)),
}
_BOUNDED: Final = frozenset(k for k, v in TYPED_ATTRIBUTES.items() if v.type.low is not None)


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


def unstorable_attribute(attrs: Mapping[str, Any]) -> str | None:
    """What is wrong with the first attribute in ``attrs`` whose number its column cannot
    hold, as ``attributes['key']: ...`` for the decoder's error path; ``None`` if all fit.

    Called by the decoder for every span: a set test first, so a span without typed
    attributes costs one ``isdisjoint``.
    """
    if _BOUNDED.isdisjoint(attrs):
        return None
    for key in _BOUNDED.intersection(attrs):
        number = _integer(attrs[key])
        column = TYPED_ATTRIBUTES[key]
        kind = column.type
        if number is not None and not kind.holds(number):
            where = " and ".join(column.columns)
            return (f"attributes['{key}']: {number} does not fit {where}"
                    f" ({kind.name}, {kind.low} to {kind.high})")
    return None
