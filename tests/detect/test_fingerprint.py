"""Signatures and output sketches: stable under key order and unicode form, never raising."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import random
import re
import string
import unicodedata
from typing import Any

import pytest
from episode_steps import flags_by, run, tool
from hypothesis import given, settings
from hypothesis import strategies as st

from loopscope.detect import EpisodeMonitor, Policy, call_signature, canonical_json, texts
from loopscope.detect.answers import is_negative, is_refusal
from loopscope.detect.fingerprint import normalize, output_text
from loopscope.detect.texts import loose_text, word_sketch

# -- strategies ------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary()
hashables = (
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.floats(allow_nan=False)
)


@dataclasses.dataclass
class Point:
    x: int
    label: str


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")


class Opaque:
    __slots__ = ()


def _self_list() -> list:
    a: list[Any] = [1, "x"]
    a.append(a)
    return a


def _self_dict() -> dict:
    d: dict[str, Any] = {"k": 1}
    d["me"] = d
    return d


objects = st.sampled_from(
    [
        lambda: Point(1, "a"),
        lambda: Color.RED,
        lambda: Color.BLUE,
        lambda: dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC),
        lambda: dt.date(2024, 5, 1),
        BrokenRepr,
        Opaque,
        object,
        lambda: len,
        _self_list,
        _self_dict,
        lambda: bytearray(b"ab"),
        lambda: complex(1, 2),
    ]
).map(lambda make: make())  # built lazily: hypothesis reprs sampled elements

anything = st.recursive(
    scalars | objects,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.frozensets(hashables, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
        | st.dictionaries(hashables, children, max_size=4)
    ),
    max_leaves=20,
)

json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=25,
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    """A copy of ``value`` with every dict's insertion order shuffled, at every depth."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


# -- properties ------------------------------------------------------------------------------


@given(json_like, st.randoms(use_true_random=False))
def test_signature_ignores_key_order_at_every_depth(value, rng):
    """A signature that depends on dict insertion order treats one call as two; fails here."""
    other = _shuffled(value, rng)
    assert canonical_json(other) == canonical_json(value)
    assert call_signature("t", canonical_json(other)) == call_signature("t", canonical_json(value))


@settings(max_examples=300)
@given(anything)
def test_canonical_json_never_raises_and_is_valid_json(value):
    """Any Python value in tool arguments must sign; an exception here would reach the agent."""
    text = canonical_json(value)
    assert isinstance(text, str)
    json.loads(text)
    assert canonical_json(value) == text  # stable for the same object
    assert isinstance(output_text(value), str)
    assert len(call_signature("tool", text)) == 16


@given(anything)
def test_normalize_never_raises(value):
    """``normalize`` promises plain JSON data for any value; a raise here breaks that promise."""
    json.dumps(normalize(value))


def test_normalize_survives_a_raising_getattr():
    """An object whose ``__getattr__`` raises something other than AttributeError."""

    class Proxy:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(f"remote attribute {name} unavailable")

    assert normalize({"client": Proxy()})["client"]["$type"].endswith("Proxy")


def test_canonical_json_survives_a_raising_getattr():
    """The agent-facing entry point must still sign such an object."""

    class Proxy:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    assert "Proxy" in canonical_json({"client": Proxy()})


@given(st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1))
def test_integral_float_is_the_same_number(n):
    """``limit=20`` and ``limit=20.0`` are the same call; a signature that differs fails."""
    assert canonical_json({"limit": n}) == canonical_json({"limit": float(n)})


@pytest.mark.parametrize(("a", "b"), [(True, 1), (False, 0), (None, 0), ("1", 1), (1, 1.5)])
def test_distinct_values_stay_distinct(a, b):
    """Collapsing True into 1 (or "1" into 1) merges two different calls; fails here."""
    assert call_signature("t", canonical_json({"v": a})) != call_signature(
        "t", canonical_json({"v": b})
    )


def test_nan_and_infinities_sign():
    """JSON has no NaN/Infinity; a signature that raises or collapses them fails here."""
    texts = {canonical_json({"v": x}) for x in (float("nan"), float("inf"), float("-inf"))}
    assert len(texts) == 3


@given(st.text())
def test_unicode_nfc_and_nfd_values_are_the_same(text):
    """'é' typed precomposed or decomposed is the same argument; fails if signed differently."""
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert canonical_json({"q": nfd}) == canonical_json({"q": nfc})
    assert canonical_json([nfd]) == canonical_json([nfc])


def test_unicode_nfc_and_nfd_keys_are_the_same():
    """Unicode handling must be stable for keys as well as values (DESIGN §2)."""
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert canonical_json({nfd: 1}) == canonical_json({nfc: 1})


def test_no_ascii_escaping():
    """Escaped non-ASCII text (\\u6301) would make args previews unreadable; fails here."""
    assert canonical_json({"q": "持仓情况"}) == '{"q":"持仓情况"}'


@given(st.text(max_size=20), st.text(max_size=20), st.integers(), st.integers())
def test_volatile_args_are_left_out_of_the_signature(a, b, x, y):
    """Request ids / timestamps configured volatile must not split one call into many."""
    m = EpisodeMonitor(Policy(volatile_args={"search": frozenset({"request_id"})}))
    sig_a, text_a = m.signature_of("search", {"q": "x", "request_id": a, "meta": {"request_id": x}})
    sig_b, _ = m.signature_of("search", {"meta": {"request_id": y}, "request_id": b, "q": "x"})
    assert sig_a == sig_b and "request_id" not in text_a


def test_volatile_args_apply_only_to_their_tool():
    """Excluding a key for every tool when configured for one hides real differences."""
    m = EpisodeMonitor(Policy(volatile_args={"search": frozenset({"request_id"})}))
    assert m.signature_of("fetch", {"request_id": 1}) != m.signature_of("fetch", {"request_id": 2})
    star = EpisodeMonitor(Policy(volatile_args={"*": frozenset({"ts"})}))
    assert star.signature_of("fetch", {"ts": 1}) == star.signature_of("fetch", {"ts": 2})


# -- the output word sketch ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param("req 9f8e7d6c5b4a ok", "req 0a1b2c3d4e5f ok", id="hex-id"),
        pytest.param(
            "id 3f2b8c1e-9d4a-4f7b-8e6c-1a2b3c4d5e6f done",
            "id a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d done",
            id="uuid",
        ),
        pytest.param(
            "id 123e4567-e89b-12d3-a456-426614174000 done",
            "id 7c9e6679-7425-40de-944b-e07fc1f90ae7 done",
            id="uuid-digit-group",
        ),
        pytest.param(
            "served at 2024-05-01T10:00:00Z",
            "served at 2025-11-30T23:59:59Z",
            id="iso-timestamp",
        ),
        pytest.param(
            "served at 2024-05-01 10:00",
            "served at 2025-11-30 23:59",
            id="iso-timestamp-space",
        ),
        pytest.param(
            "at 2024-05-01T10:00:00.123+02:00",
            "at 2024-06-11T08:30:59.9-05:00",
            id="iso-timestamp-offset",
        ),
    ],
)
def test_word_sketch_masks_volatile_tokens(a, b):
    """Outputs that differ only in an id or a timestamp must carry the same information."""
    assert word_sketch(a) == word_sketch(b)
    assert {"req", "id", "served", "at"} & word_sketch(a)


def test_word_sketch_keeps_real_words_and_numbers():
    """A sketch that drops plain words or small numbers makes distinct answers look the same."""
    assert word_sketch("Total: 42 apples") != word_sketch("Total: 43 apples")
    assert word_sketch("The ORDER shipped") == frozenset({"the", "order", "shipped"})
    assert "deadbeef" in word_sketch("cafe deadbeef")  # an all-letter word is a word


@given(
    st.lists(
        st.sampled_from(
            ["2024-05-01t10:00", "2024-05-01 10:00:59.5z", "-05:00", "12-12t10:00", "2024",
             "123e4567-e89b-12d3-a456-426614174000", "e89b-12d3-a456-426614174000", "-", " ",
             "x", "1234", "deadbeef-", "00:00"]
        ),
        max_size=12,
    )
)
@settings(max_examples=300, deadline=None)
def test_word_sketch_blanks_what_the_whole_patterns_blank(parts):
    """The fast tail search finds exactly what the plain patterns find, overlaps included."""
    text = "".join(parts)
    whole = texts._UUID.sub(" ", texts._TIMESTAMP.sub(" ", text))
    if text.count("-") < 4:  # (the sketch skips the UUID pattern when it cannot match)
        whole = texts._TIMESTAMP.sub(" ", text)
    expected = frozenset(whole.translate(_PUNCTUATION_AS_SPACES).split())
    expected = frozenset(
        w for w in expected if not (len(w) >= 8 and not w.isalpha() and set(w) <= set("0123456789abcdef"))
    )
    assert word_sketch(text) == expected


_PUNCTUATION_AS_SPACES = str.maketrans({c: " " for c in string.punctuation})


@given(st.text(alphabet=st.characters(blacklist_categories=()), max_size=40))
@settings(max_examples=500, deadline=None)
def test_punctuation_is_spaced_out_in_any_text(text):
    """The byte-table translation gives what a plain ``str.translate`` gives, for text beyond
    ASCII and lone surrogates too."""
    assert texts._unpunctuated(text) == text.translate(_PUNCTUATION_AS_SPACES)
    assert loose_text(text) == " ".join(text.lower().translate(_PUNCTUATION_AS_SPACES).split())


@pytest.mark.parametrize(
    "text",
    ["Couldn't find the order.", "We can't locate that file", "No results found", "Nothing matched",
     "The record does not exist", "Result: empty", "I didn't find any match"],
)
def test_nothing_found_is_read_however_it_is_spelled(text):
    assert is_negative(text, word_sketch(text))


NOTHING_FOUND = re.compile(  # the plain spelling of what answers._NEGATIVE finds
    r"\b(?:no|zero|0)\s+(?:\w+\s+)?(?:found|results?|match(?:es)?|hits?|records?|items?|"
    r"entries|data|flights?|orders?|pages?|files?|documents?|information|such)\b"
    r"|\bnot (?:found|available)\b|\bdoes not exist\b|\bnothing (?:found|matched)\b"
    r"|\bempty\b|\b(?:could ?n[o']?t|cannot|can't|unable to|did ?n[o']?t) (?:find|locate|match)\b",
    re.IGNORECASE,
)


@given(
    st.lists(
        st.sampled_from(
            ["no", "not", "0", "10", "zero", "found", "results", "Empty", "could", "n't", "can't",
             "find", "the", "does", "exist", "Nothing", "matched", "unable", "to", "did", "didn't",
             "such", "x", "_"]
        )
        | st.sampled_from([" ", "", ",", "\t", "\n", "  ", "'"]),
        max_size=16,
    )
)
@settings(max_examples=500, deadline=None)
def test_nothing_found_patterns_find_what_the_plain_pattern_finds(parts):
    """The word-gated, literal-first patterns are a faster spelling of one regex, not another
    rule: with or without the sketch they agree with it on every text."""
    text = "".join(parts)
    expected = NOTHING_FOUND.search(text, 0, 500) is not None
    assert is_negative(text, word_sketch(text)) == expected
    assert is_negative(text) == expected


@pytest.mark.parametrize(
    "text",
    ["HTTP 429 Too Many Requests", '{"status": 403, "body": "..."}', "Access denied for user",
     "You are being rate limited", "Please solve the CAPTCHA"],
)
def test_a_refusal_is_read_however_it_is_spelled(text):
    assert is_refusal(text, word_sketch(text))


@pytest.mark.parametrize(
    "text", ["Found 3 orders", "status: shipped, total 450 USD", "no, the data is fine: 12 rows"]
)
def test_ordinary_answers_are_neither_negative_nor_refusals(text):
    words = word_sketch(text)
    assert not is_negative(text, words) and not is_refusal(text, words)


def test_outputs_differing_only_in_served_at_stagnate():
    """Three lookups that return the same record stamped with the serving time are stagnation."""
    steps = [
        tool(
            n, {"q": "refund"}, f"refund policy document found, served at 2024-05-0{i}T10:0{i}:00Z"
        )
        for i, n in enumerate(("search", "lookup", "find"), start=1)
    ]
    assert flags_by(run(steps), "output_stagnation")
