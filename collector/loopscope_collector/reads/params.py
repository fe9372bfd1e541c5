"""The parameters of the named reads, as ``reads.sql`` declares them once at its top
(``-- param NAME: TYPE [RULE]``): the HTTP read API converts query-string text by the
declaration and checks it by the rule, so a value a read cannot take is a 400 naming the
parameter and what it takes, never a DuckDB error on the collector's side (a 500).

A rule is one of:

- ``from LOW`` or ``from LOW to HIGH``: an integer in that range (a ``bigint`` is always
  within DuckDB's BIGINT, -2^63 to 2^63 - 1: a larger one would be bound as a DOUBLE and fail
  in the read);
- ``one of A, B, C``: text that is one of those values (a value the read does not know
  would match nothing, silently);
- ``price table``: a JSON price table, ``{model prefix: {"input": USD, "output": USD}}`` (per
  million tokens), each price a finite number of at least 0;
- ``span filter``: the conditions a Spans filter compiles to (``span_filter.checked``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Final

from .span_filter import SpanFilterError, checked

BIGINT_MIN: Final = -(2**63)
BIGINT_MAX: Final = 2**63 - 1

_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_RANGE: Final = re.compile(r"from\s+([+-]?[0-9]+)(?:\s+to\s+([+-]?[0-9]+))?")
_CHOICES: Final = re.compile(r"one of\s+(.+)")
_PRICE_TABLE: Final = "price table"
_SPAN_FILTER: Final = "span filter"
_PRICE_KEYS: Final = ("input", "output")


class BadValue(ValueError):
    """A query-string value its parameter cannot take: ``takes`` says what it takes,
    ``detail`` (when the value is long, as a price table is) what in it is wrong."""

    def __init__(self, takes: str, detail: str | None = None) -> None:
        super().__init__(takes if detail is None else f"{takes}: {detail}")
        self.takes = takes
        self.detail = detail


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise BadValue("true or false")


def _double(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadValue("a number") from None
    if not math.isfinite(value):
        raise BadValue("a finite number")
    return value


_TYPE_NAMES: Final = {"varchar": "text", "bigint": "an integer", "boolean": "true or false",
                      "double": "a number"}
TYPES: Final = frozenset(_TYPE_NAMES)


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter: its type and the rule its values follow."""

    name: str
    type: str
    low: int = BIGINT_MIN
    high: int = BIGINT_MAX
    choices: tuple[str, ...] = ()
    price_table: bool = False
    span_filter: bool = False

    @classmethod
    def declared(cls, name: str, type_: str, rule: str) -> Param:
        """The parameter a ``-- param NAME: TYPE RULE`` line declares.

        Raises:
            ValueError: an unknown type, or a rule that is unknown or does not fit the type.
        """
        if type_ not in TYPES:
            raise ValueError(f"parameter {name}: unknown type {type_!r}")
        rule = rule.strip()
        if not rule:
            return cls(name, type_)
        if (found := _RANGE.fullmatch(rule)) and type_ == "bigint":
            low = int(found.group(1))
            high = BIGINT_MAX if found.group(2) is None else int(found.group(2))
            if not BIGINT_MIN <= low <= high <= BIGINT_MAX:
                raise ValueError(f"parameter {name}: {rule!r} is not a range within BIGINT")
            return cls(name, type_, low=low, high=high)
        if (found := _CHOICES.fullmatch(rule)) and type_ == "varchar":
            return cls(name, type_, choices=tuple(c.strip() for c in found.group(1).split(",")))
        if rule == _PRICE_TABLE and type_ == "varchar":
            return cls(name, type_, price_table=True)
        if rule == _SPAN_FILTER and type_ == "varchar":
            return cls(name, type_, span_filter=True)
        raise ValueError(f"parameter {name}: unknown rule {rule!r} for a {type_}")

    def takes(self) -> str:
        """What a value must be, as an error message says it: ``an integer from 0 to ...``."""
        if self.type == "bigint" and (self.low, self.high) != (BIGINT_MIN, BIGINT_MAX):
            return f"an integer from {self.low} to {self.high}"
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.price_table:
            return ('a JSON price table {"model prefix": {"input": USD, "output": USD}} '
                    "(USD per million tokens)")
        if self.span_filter:
            return ('a span filter\'s conditions, JSON [{"field", "op", "text", "number"}] '
                    "(loopscope_collector.reads.span_filter.compile_filter)")
        return _TYPE_NAMES[self.type]

    def convert(self, text: str) -> object:
        """``text`` as this parameter's value.

        Raises:
            BadValue: not of the type, or outside the rule; the message says what is wrong.
        """
        if self.type == "bigint":
            return self._integer(text)
        if self.type == "boolean":
            return _boolean(text)
        if self.type == "double":
            return _double(text)
        if self.choices and text not in self.choices:
            raise BadValue(self.takes())
        if self.price_table:
            return _price_table(text)
        if self.span_filter:
            try:
                return checked(text)
            except SpanFilterError as exc:
                raise BadValue(self.takes(), str(exc)) from None
        return text

    def _integer(self, text: str) -> int:
        if not _INTEGER.fullmatch(text.strip()):
            raise BadValue(_TYPE_NAMES["bigint"])
        try:
            value = int(text)
        except ValueError:  # more digits than Python converts: far out of range anyway
            raise BadValue(f"an integer from {self.low} to {self.high}") from None
        if not self.low <= value <= self.high:
            raise BadValue(f"an integer from {self.low} to {self.high}")
        return value


def _price_table(text: str) -> str:
    """A price table checked whole, returned as canonical JSON (the read parses it again)."""
    takes = Param("prices", "varchar", price_table=True).takes()
    try:
        table = json.loads(text)
    except (ValueError, RecursionError):
        raise BadValue(takes, "this is not JSON") from None
    if not isinstance(table, dict):
        raise BadValue(takes, f"this is {_quote(table)}, not an object")
    for prefix, price in table.items():
        where = f"the price of {_quote(prefix)}"
        if not _is_unicode(prefix):
            raise BadValue(takes, f"the model prefix {_quote(prefix)} is not valid Unicode")
        if not isinstance(price, dict):
            raise BadValue(takes, f"{where} is {_quote(price)}, not an object")
        other = sorted(set(price) - set(_PRICE_KEYS))
        missing = [k for k in _PRICE_KEYS if k not in price]
        if missing:
            raise BadValue(takes, f"{where} has no {' or '.join(missing)}")
        if other:
            raise BadValue(takes, f"{where} has {', '.join(map(_quote, other))}, which is "
                                  "not a price")
        for key in _PRICE_KEYS:
            value = price[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadValue(takes, f"{where}, {key}, is {_quote(value)}, not a number")
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number) or number < 0:
                raise BadValue(takes, f"{where}, {key}, is {_quote(value)}, not a finite "
                                      "number of at least 0")
    return json.dumps(table)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800"): DuckDB refuses it
        return False
    return True


def _quote(value: object) -> str:
    """A JSON value as JSON, cut to 60 characters (an error message echoes it)."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
