"""Facts of an output: what it tells, compared as normalised structures (issue 16, point 1)."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from loopscope.detect import information
from loopscope.detect.information import facts


def _j(value: object) -> str:
    return json.dumps(value)


HITS = [{"doc": "kb-112", "title": "Reset a password"}, {"doc": "kb-207", "title": "SSO setup"}]


def test_a_shuffled_result_set_with_new_volatile_fields_says_the_same() -> None:
    a = _j({"searchId": "a81f", "took_ms": 12, "hits": HITS, "served_at": "2024-05-01T10:00:00Z"})
    b = _j({"hits": HITS[::-1], "took_ms": 48, "searchId": "93c0", "served_at": "2024-05-01T10:00:07Z"})
    assert facts(a) == facts(b)


def test_a_new_record_or_a_changed_field_is_a_new_fact() -> None:
    base = facts(_j({"hits": HITS}))
    assert base is not None
    more = facts(_j({"hits": [*HITS, {"doc": "kb-301", "title": "MFA"}]}))
    changed = facts(_j({"hits": [HITS[0], {**HITS[1], "title": "SSO setup (SAML)"}]}))
    assert more is not None and not more <= base
    assert changed is not None and changed != base


def test_an_echo_of_the_arguments_is_masked() -> None:
    """"Nothing found for page N" is one answer on every page; a number that merely contains
    the argument's digits is not an echo."""
    assert facts("No results found for page 7.", {"page": 7}) == facts(
        "No results found for page 8.", {"page": 8}
    )
    assert facts(_j({"query": "reset pw", "hits": []}), {"q": "reset pw"}) == facts(
        _j({"query": "Reset PW", "hits": []}), {"q": "Reset PW"}
    )
    assert facts("total 17 rows", {"limit": 7}) != facts("total 18 rows", {"limit": 7})


def test_ages_durations_memory_and_times_in_text_are_masked() -> None:
    a = "NAME READY STATUS RESTARTS AGE\napi-7d9c 0/1 CrashLoopBackOff 6 (2m ago) 14m\n"
    b = "NAME READY STATUS RESTARTS AGE\napi-7d9c 0/1 CrashLoopBackOff 6 (3m ago) 15m\n"
    assert facts(a) == facts(b)
    assert facts("done in 0.53s, rss 512Mi at 10:01:02") == facts("done in 1.2s, rss 530Mi at 10:01:09")
    # what a poll or a reader needs stays: a status, a restart count, a price, a date
    assert facts(a) != facts(a.replace("6 (2m ago)", "7 (2m ago)"))
    assert facts("price 164 USD on 2024-05-21") != facts("price 171 USD on 2024-05-21")


def test_not_captured_is_none_and_blank_is_empty() -> None:
    assert facts(None) is None
    assert facts("  \n\n") == frozenset()
    assert facts("[]") == frozenset()


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@given(output=JSONISH, args=JSONISH)
def test_never_raises_on_any_json(output: object, args: object) -> None:
    assert facts(json.dumps(output), args) is not None
    assert facts(str(output), args) is not None


def test_a_command_lines_own_words_and_a_process_id_are_not_news() -> None:
    """A shell answer echoes the command's specific words alone ("Collecting numpy<2") and
    carries a process id on a line of its own: neither is a new fact."""
    def out(spec: str, pgid: int) -> str:
        return (f"Command: pip install {spec}\nStdout: Collecting {spec.strip(chr(34))}\n"
                f"Successfully installed numpy-1.26.4\nProcess Group PGID: {pgid}")
    assert facts(out('"numpy<2"', 56996), {"command": 'pip install "numpy<2"'}) == facts(
        out("numpy==1.26.4", 38064), {"command": "pip install numpy==1.26.4"})
    assert facts("id: 5\nstatus: open") != facts("id: 6\nstatus: open")  # a record's id stays


MASKABLE = st.lists(
    st.sampled_from(
        ["12", "3.5", " MB", "512Mi", "ms", " ago", "2m", "2024-01-02T03:04:05Z", "10:01:02",
         "0x1f", "deadbeef12", "a81f93c0e", " seconds", "5m", "1h30m", "x", "-", " ", "\x1c",
         "\n", "é", "µs", "_", "."]
    ),
    max_size=10,
).map("".join)


@given(MASKABLE)
def test_an_ascii_text_is_masked_as_the_unicode_pattern_masks_it(text: str) -> None:
    """The ASCII pattern (the fast one) masks an ASCII text exactly as the Unicode pattern
    does, its separators U+001C to U+001F included."""
    if text.isascii():
        assert information._MASK_ASCII.sub("#", text) == information._MASK.sub("#", text)


@given(st.lists(st.sampled_from(["pid", "PGID", "x", ":", "=", " ", "\t", "\n", "-", "a.b",
                                 "status"]), max_size=12).map("".join))
def test_a_key_is_found_after_each_newline_as_at_each_line_start(text: str) -> None:
    """``_FIELD``, found after a newline, finds the keys a line-start pattern finds."""
    line_start = re.compile(r"^[ \t]*([A-Za-z][\w .-]{0,30}?)[ \t]*[:=]", re.MULTILINE)
    assert information._FIELD.findall("\n" + text) == line_start.findall(text)


def test_a_digit_is_found_in_any_script() -> None:
    assert information.has_digit("order W123") and information.has_digit("٣ items")
    assert not information.has_digit("no figures here") and not information.has_digit("")
