"""Canonical call signatures and output hashes.

Two calls are the same call when their tool names match and their arguments serialise to the
same canonical JSON: keys sorted, integral floats written as integers, strings in Unicode NFC,
no ASCII escaping. Any Python value serialises: types JSON does not know fall back to a
stable description, so fingerprinting never raises into the agent (docs/detection.md).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Final

from .limits import HASH_CHARS, JSON_DEPTH, REPR_CHARS

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def short_hash(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), as ``HASH_CHARS`` hex characters."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def normalize(value: Any, *, exclude: frozenset[str] = frozenset()) -> Any:
    """Turn ``value`` into plain JSON data with stable numbers and strings.

    Dict keys listed in ``exclude`` are dropped at every depth (volatile fields such as
    request ids and timestamps). Never raises.
    """
    return _normalize(value, exclude, 0, set())


def _normalize(value: Any, exclude: frozenset[str], depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return (
            value
            if unicodedata.is_normalized("NFC", value)
            else unicodedata.normalize("NFC", value)
        )
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return int(value) if value.is_integer() and abs(value) < 2**53 else value
        return repr(value)  # "nan", "inf", "-inf": JSON has no spelling for them
    if depth >= JSON_DEPTH:
        return "<too deep>"
    if id(value) in seen:
        return "<cycle>"
    seen.add(id(value))
    try:
        return _normalize_container(value, exclude, depth + 1, seen)
    finally:
        seen.discard(id(value))


def _normalize_container(value: Any, exclude: frozenset[str], depth: int, seen: set[int]) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
            name = _normalize(key, exclude, depth, seen) if isinstance(key, str) else _key_text(key)
            if name not in exclude:
                out[name] = _normalize(item, exclude, depth, seen)
        return out
    if isinstance(value, (list, tuple)):
        return [_normalize(item, exclude, depth, seen) for item in value]  # pyright: ignore
    if isinstance(value, (set, frozenset)):
        items = [_normalize(item, exclude, depth, seen) for item in value]  # pyright: ignore
        return sorted(items, key=_dump)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": hashlib.sha256(bytes(value)).hexdigest()[:HASH_CHARS]}
    if isinstance(value, enum.Enum):
        return _normalize(value.value, exclude, depth, seen)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        return _normalize(fields, exclude, depth, seen)
    for method, wrap in (("model_dump", False), ("isoformat", True)):  # pydantic; datetimes
        try:
            bound = getattr(value, method, None)
            if callable(bound):
                result = bound()
                return str(result) if wrap else _normalize(result, exclude, depth, seen)
        except Exception:  # a broken __getattr__ or method: fall through to the description
            pass
    return {"$type": type(value).__qualname__, "repr": _safe_repr(value)}


def _key_text(key: Any) -> str:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return json.dumps(_normalize(key, frozenset(), 0, set()))
    return _dump(_normalize(key, frozenset(), 0, set()))


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return "<unrepresentable>"
    return _ADDRESS.sub("", text)[:REPR_CHARS]


_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
"""``json.dumps`` with these options builds an encoder per call; this one is built once."""


def _dump(value: Any) -> str:
    return _CANONICAL.encode(value)


def canonical_json(value: Any, *, exclude: Iterable[str] = ()) -> str:
    """The canonical JSON text of ``value``; equal calls give equal text. Never raises."""
    try:
        if not exclude:
            if (
                type(value) is dict
                and _STR.issuperset(map(type, value))
                and _FLAT.issuperset(map(type, value.values()))
            ):  # the commonest arguments: one level of strings, ints, booleans and nulls
                text = _dump(value)
                if text.isascii():  # (so every string is already in NFC)
                    return text
            if _is_plain(value, 0):  # already canonical data
                return _dump(value)
        return _dump(normalize(value, exclude=frozenset(exclude)))
    except Exception:  # a pathological __eq__/__hash__ in user data; still sign something
        return _dump({"$type": type(value).__qualname__, "repr": _safe_repr(value)})


_STR: Final = frozenset([str])
_FLAT: Final = frozenset([str, int, bool, type(None)])


def _is_plain(value: Any, depth: int) -> bool:
    """True when ``normalize`` would return ``value`` unchanged (checked cheaply)."""
    kind = type(value)
    if kind is str:
        return unicodedata.is_normalized("NFC", value)
    if kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value) and not value.is_integer()
    if depth >= 8:
        return False
    if kind is dict:
        return all(
            type(k) is str and unicodedata.is_normalized("NFC", k) and _is_plain(v, depth + 1)
            for k, v in value.items()
        )
    if kind is list:
        return all(_is_plain(v, depth + 1) for v in value)
    return False


def call_signature(tool: str, args_text: str) -> str:
    """The signature of a call: a hash of the tool name and canonical arguments."""
    return short_hash(f"{tool}\x00{args_text}")


def output_text(value: Any) -> str:
    """The model-visible text of a tool's return value: strings as they are, else JSON.

    Only the hash of this text is compared, so plain JSON serialisation suffices; values
    JSON cannot encode fall back to ``canonical_json``.
    """
    if isinstance(value, str):
        return value
    try:
        return _CANONICAL.encode(value)
    except (TypeError, ValueError):
        return canonical_json(value)


def output_hash(text: str) -> str:
    """Hash of a model-visible output."""
    return short_hash(text)
