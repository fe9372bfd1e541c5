"""The Spans view's filter: a small grammar over a span's fields and attributes, parsed here
into conditions that the named reads evaluate with bound values, never as SQL text.

A filter is one or more conditions joined by ``and``::

    loopscope.tool.signature == "fa039d3cc8c9c032"
    gen_ai.tool.name == "search_orders" and duration > 200ms
    loopscope.flags contains "exact_repeat"
    gen_ai.tool.call.result                     (the span has this attribute)
    status == "error" and service != "billing"

A condition is a field, then optionally an operator (``==``, ``!=``, ``>``, ``>=``, ``<``,
``<=``, ``contains``) and a value: text in double or single quotes, a number, ``true`` or
``false``. A field is one of ``FIELDS`` (a span's own columns) or else an attribute key
(letters, digits, ``_``, ``.``, ``-``, ``:``, ``/``). ``duration`` takes a number of
milliseconds or a number with a unit (``200ms``, ``1.5s``, ``300us``). A number compares an
attribute as a number (an attribute that is not one never matches); ``==`` and ``!=`` with
text compare its text (a list attribute's text is its JSON: use ``contains``); ``!=`` holds for
a span without the attribute. A field alone holds when the span has it.

``compile_filter`` turns a filter into the JSON the reads take (their ``$where``: a list of
``{"field", "op", "text", "number"}``); ``checked`` checks JSON a client sent as ``$where``
(the read API's parameter rule ``span filter``), so the SQL only ever sees fields that are
safe in a JSON path and operators it knows. Either raises ``SpanFilterError`` naming what is
wrong and where.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Final

FIELDS: Final = {
    "name": "the span's name (execute_tool search_orders, chat gpt-4o, ...)",
    "service": "the service that sent it (resource service.name)",
    "duration": "how long it ran, in milliseconds (200ms, 1.5s, 300us)",
    "status": "its status: ok, error or unset",
    "kind": "its span kind: internal, server, client, producer, consumer or unspecified",
    "tool": "the tool a tool call ran (as every page names it, whatever the convention)",
    "trace_id": "its trace id (32 hex digits)",
    "span_id": "its span id (16 hex digits)",
    "parent_span_id": "its parent's span id ('' for a root span)",
}
"""The fields that are a span's own columns; any other field is an attribute key."""

WORDS: Final = {"status": ("ok", "error", "unset"),
                "kind": ("internal", "server", "client", "producer", "consumer",
                         "unspecified")}
"""The values a field that holds a word can take."""

OPERATORS: Final = ("==", "!=", ">=", "<=", ">", "<", "contains")
NUMERIC: Final = frozenset({">", ">=", "<", "<="})
MAX_CONDITIONS: Final = 20
_UNITS: Final = {"ms": 1.0, "s": 1000.0, "us": 0.001, "µs": 0.001}
_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*")
_TOKEN: Final = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?P<unit>ms|us|µs|s)?(?![\w.]))
  | (?P<operator>==|!=|>=|<=|>|<|=)
  | (?P<word>[A-Za-z_][A-Za-z0-9_.:/-]*)
""", re.VERBOSE)


class SpanFilterError(ValueError):
    """A filter that does not parse, or a ``$where`` that is not a filter's conditions; the
    message says what is wrong and, for filter text, at which character (``position``,
    0-based; None when it is about the whole filter)."""

    def __init__(self, message: str, position: int | None = None) -> None:
        where = "" if position is None else f" (at character {position + 1})"
        super().__init__(message + where)
        self.position = position


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition: ``field`` ``op`` a value; ``op`` ``exists`` takes none. ``text`` is a
    text value (``true`` and ``false`` too), ``number`` a numeric one (a duration in ms)."""

    field: str
    op: str
    text: str | None = None
    number: float | None = None


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    at: int
    value: str | float | None = None


def parse_filter(text: str) -> list[Condition]:
    """The conditions of filter ``text`` (none for an empty one).

    Raises:
        SpanFilterError: the text is not a filter; the message names what was expected.
    """
    tokens = _tokens(text)
    conditions: list[Condition] = []
    at = 0
    while at < len(tokens):
        condition, at = _condition(tokens, at, text)
        conditions.append(condition)
        if at < len(tokens):
            joiner = tokens[at]
            if joiner.kind != "word" or joiner.text.lower() != "and":
                hint = ""
                if joiner.text.lower() == "or":
                    hint = ": only `and` joins conditions"
                elif joiner.text in _UNITS and tokens[at - 1].kind == "number":
                    hint = f": write the unit next to the number ({tokens[at - 1].text}" \
                           f"{joiner.text})"

                raise SpanFilterError(f"expected `and` before {joiner.text!r}{hint}",
                                      joiner.at)
            at += 1
            if at == len(tokens):
                raise SpanFilterError("expected a condition after `and`", len(text))
    if len(conditions) > MAX_CONDITIONS:
        raise SpanFilterError(f"a filter takes at most {MAX_CONDITIONS} conditions, not "
                              f"{len(conditions)}")
    return conditions


def compile_filter(text: str) -> str | None:
    """Filter ``text`` as the reads' ``$where`` (JSON), or None for an empty filter.

    Raises:
        SpanFilterError: as ``parse_filter``.
    """
    conditions = parse_filter(text)
    return _dumps(conditions) if conditions else None


def checked(where: str) -> str:
    """``where`` (JSON a client sent as ``$where``) checked as the conditions a filter
    compiles to, returned as canonical JSON.

    Raises:
        SpanFilterError: not JSON, not a list of conditions, or a condition the reads cannot
            take (a field unsafe in a JSON path, an unknown operator, a value of the wrong
            type); the message names the condition.
    """
    try:
        given = json.loads(where)
    except (ValueError, RecursionError):
        raise SpanFilterError("this is not JSON") from None
    if not isinstance(given, list):
        raise SpanFilterError("this is not a list of conditions")
    if len(given) > MAX_CONDITIONS:
        raise SpanFilterError(f"at most {MAX_CONDITIONS} conditions, not {len(given)}")
    conditions = []
    for number, item in enumerate(given, 1):
        if not isinstance(item, dict) or set(item) - {"field", "op", "text", "number"}:
            raise SpanFilterError(f"condition {number} is not an object of field, op, text "
                                  "and number")
        field, op, text = item.get("field"), item.get("op"), item.get("text")
        value = item.get("number")
        if not isinstance(field, str) or not (field in FIELDS or _KEY.fullmatch(field)):
            raise SpanFilterError(f"condition {number}: {field!r} is not a field")
        if op not in (*OPERATORS, "exists"):
            raise SpanFilterError(f"condition {number}: {op!r} is not an operator")
        if text is not None and not isinstance(text, str):
            raise SpanFilterError(f"condition {number}: text must be a string")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not math.isfinite(value)):
            raise SpanFilterError(f"condition {number}: number must be a finite number")
        condition = Condition(field, str(op), text,
                              None if value is None else float(value))
        try:
            conditions.append(_check(condition, None))
        except SpanFilterError as exc:
            raise SpanFilterError(f"condition {number}: {exc}") from None
    return _dumps(conditions)


def _dumps(conditions: list[Condition]) -> str:
    return json.dumps([asdict(c) for c in conditions], ensure_ascii=False,
                      separators=(",", ":"))


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    at = 0
    while at < len(text):
        found = _TOKEN.match(text, at)
        if found is None:
            raise SpanFilterError(f"unexpected {text[at]!r}", at)
        kind = found.lastgroup if found.lastgroup != "unit" else "number"
        if kind == "string":
            tokens.append(_Token("string", found.group(), at, _unquote(found.group())))
        elif kind == "number":
            tokens.append(_Token("number", found.group(), at))
        elif kind == "operator":
            op = "==" if found.group() == "=" else found.group()
            tokens.append(_Token("operator", op, at))
        elif kind == "word":
            tokens.append(_Token("word", found.group(), at))
        at = found.end()
    return tokens


def _unquote(quoted: str) -> str:
    return re.sub(r"\\(.)", r"\1", quoted[1:-1])


def _condition(tokens: list[_Token], at: int, text: str) -> tuple[Condition, int]:
    head = tokens[at]
    if head.kind != "word" or head.text.lower() in ("and", "or", "contains"):
        raise SpanFilterError(f"expected a field or an attribute key, found {head.text!r}",
                              head.at)
    field = head.text
    if at + 1 == len(tokens) or _is_and(tokens[at + 1]):
        return _check(Condition(field, "exists"), head.at), at + 1
    op_token = tokens[at + 1]
    if op_token.kind == "operator" or op_token.text.lower() == "contains":
        op = op_token.text.lower() if op_token.kind == "word" else op_token.text
    elif op_token.text.lower() == "or":
        raise SpanFilterError("only `and` joins conditions", op_token.at)
    else:
        raise SpanFilterError(f"expected an operator ({', '.join(OPERATORS)}) or `and` after "
                              f"{field!r}, found {op_token.text!r}", op_token.at)
    if at + 2 == len(tokens):
        raise SpanFilterError(f"expected a value after {op}", len(text))
    value = tokens[at + 2]
    condition = Condition(field, op, *_value(field, value))
    return _check(condition, value.at), at + 3


def _is_and(token: _Token) -> bool:
    return token.kind == "word" and token.text.lower() == "and"


def _value(field: str, token: _Token) -> tuple[str | None, float | None]:
    """A value token as (text, number)."""
    if token.kind == "string":
        return str(token.value), None
    if token.kind == "number":
        found = _TOKEN.match(token.text)
        unit = found.group("unit") if found else None
        digits = token.text[:-len(unit)] if unit else token.text
        number = float(digits)
        if not math.isfinite(number):
            raise SpanFilterError(f"{token.text} is not a finite number", token.at)
        if unit and field != "duration":
            raise SpanFilterError(f"a unit ({unit}) goes with duration, not {field}", token.at)
        return None, number * _UNITS[unit] if unit else number
    if token.kind == "word" and token.text.lower() in ("true", "false"):
        return token.text.lower(), None
    hint = f' (text goes in quotes: "{token.text}")' if token.kind == "word" else ""
    raise SpanFilterError(f"expected a value, found {token.text!r}{hint}", token.at)


def _check(condition: Condition, at: int | None) -> Condition:
    """``condition`` when the reads can take it, else a ``SpanFilterError`` at ``at``."""
    field, op, text, number = condition.field, condition.op, condition.text, condition.number
    if field not in FIELDS and not _KEY.fullmatch(field):
        raise SpanFilterError(f"{field!r} is not a field or an attribute key", at)
    if op == "exists":
        if field in FIELDS:
            raise SpanFilterError(f"every span has {field}: compare it (e.g. {field} == …)",
                                  at)
        return condition
    if (text is None) == (number is None):
        raise SpanFilterError(f"{op} takes one value", at)
    if op in NUMERIC and number is None:
        raise SpanFilterError(f"{op} compares numbers, and {text!r} is text", at)
    if field == "duration" and number is None:
        raise SpanFilterError("duration takes a number of milliseconds (200, 200ms, 1.5s), "
                              f"not {text!r}", at)
    if field == "duration" and op == "contains":
        raise SpanFilterError("duration is a number: compare it with ==, !=, >, >=, < or <=",
                              at)
    if op == "contains" and text is None:
        raise SpanFilterError('contains takes text in quotes (contains "…")', at)
    if field in WORDS and (number is not None or text not in WORDS[field]):
        shown = text if number is None else f"{number:g}"
        raise SpanFilterError(f"{field} is one of {', '.join(WORDS[field])}, not {shown!r}",
                              at)
    if field in FIELDS and field not in ("duration",) and number is not None:
        raise SpanFilterError(f"{field} is text: put {number:g} in quotes", at)
    return condition
