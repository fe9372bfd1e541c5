"""Canonical call signatures and output hashes.

Two calls are the same call when their tool names match and their arguments serialise to the
same canonical JSON: keys sorted, integral floats written as integers, strings in Unicode NFC,
no ASCII escaping. Any Python value serialises: types JSON does not know fall back to a
stable description, so fingerprinting never raises into the agent (DESIGN.md §2).
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

HASH_CHARS: Final = 16
"""Hex characters kept from SHA-256: 64 bits, plenty for one episode's calls."""

MAX_DEPTH: Final = 32
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_WORD = re.compile(r"[^\W_]+")


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
    if depth >= MAX_DEPTH:
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
            name = key if isinstance(key, str) else _key_text(key)
            if name not in exclude:
                out[name] = _normalize(item, exclude, depth, seen)
        return out
    if isinstance(value, list | tuple):
        return [_normalize(item, exclude, depth, seen) for item in value]  # pyright: ignore
    if isinstance(value, set | frozenset):
        items = [_normalize(item, exclude, depth, seen) for item in value]  # pyright: ignore
        return sorted(items, key=_dump)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": hashlib.sha256(bytes(value)).hexdigest()[:HASH_CHARS]}
    if isinstance(value, enum.Enum):
        return _normalize(value.value, exclude, depth, seen)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        return _normalize(fields, exclude, depth, seen)
    dump = getattr(value, "model_dump", None)  # pydantic v2 models
    if callable(dump):
        try:
            return _normalize(dump(), exclude, depth, seen)
        except Exception:
            pass
    iso = getattr(value, "isoformat", None)  # datetime, date, time
    if callable(iso):
        try:
            return str(iso())
        except Exception:
            pass
    return {"$type": type(value).__qualname__, "repr": _safe_repr(value)}


def _key_text(key: Any) -> str:
    if isinstance(key, str | int | float | bool) or key is None:
        return json.dumps(_normalize(key, frozenset(), 0, set()))
    return _dump(_normalize(key, frozenset(), 0, set()))


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return "<unrepresentable>"
    return _ADDRESS.sub("", text)[:500]


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_json(value: Any, *, exclude: Iterable[str] = ()) -> str:
    """The canonical JSON text of ``value``; equal calls give equal text. Never raises."""
    try:
        return _dump(normalize(value, exclude=frozenset(exclude)))
    except Exception:  # a pathological __eq__/__hash__ in user data; still sign something
        return _dump({"$type": type(value).__qualname__, "repr": _safe_repr(value)})


def call_signature(tool: str, args_text: str) -> str:
    """The signature of a call: a hash of the tool name and canonical arguments."""
    return short_hash(f"{tool}\x00{args_text}")


def output_text(value: Any) -> str:
    """The model-visible text of a tool's return value: strings as they are, else JSON."""
    if isinstance(value, str):
        return value
    return canonical_json(value)


def output_hash(text: str) -> str:
    """Hash of a model-visible output."""
    return short_hash(text)


SKETCH_CHARS: Final = 2000
"""Only this much of an output feeds the near-duplicate sketch: bounded work per step."""


_VOLATILE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"  # ISO time
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # UUID
    r"|(?<![0-9a-z])(?=[0-9a-f]*\d)[0-9a-f]{8,}(?![0-9a-z])",  # hex ids with a digit
    re.IGNORECASE,
)


def word_sketch(text: str) -> frozenset[str]:
    """The words of the first ``SKETCH_CHARS`` of ``text``, lower-cased, for near-duplicate
    checks. Timestamps, UUIDs and hex ids are masked: two outputs that differ only in a
    request id or the time they were served carry the same information."""
    return frozenset(_WORD.findall(_VOLATILE.sub(" ", text[:SKETCH_CHARS].lower())))


def trigrams(text: str, *, limit: int = SKETCH_CHARS) -> frozenset[str]:
    """Character 3-grams of the first ``limit`` characters (seed 003's fuzzy match)."""
    text = text[:limit]
    return frozenset(text[i : i + 3] for i in range(max(len(text) - 2, 1)))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)
