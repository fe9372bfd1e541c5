"""The typed-attribute table against the store it describes: every typed column the
normalised rows write is either fed by a declared attribute, with the column's own type, or
derived by the collector from something the decoder already bounds."""

from __future__ import annotations

import pytest

from loopscope_collector.normalize.typed_attributes import (
    SET_ASIDE,
    TYPED_ATTRIBUTES,
    set_aside_unstorable,
    typed_int,
    unstorable_attribute,
)
from loopscope_collector.storage import open_database

DERIVED = {
    # span times: the decoder refuses a time past 2262 (bigint), for spans and events alike
    "tool_calls.start_ns", "tool_calls.end_ns", "episodes.start_ns", "episodes.end_ns",
    "episodes.first_flag_ns", "reconciles.time_ns",
    # counted or computed by the collector, never read from an attribute
    "tool_calls.collector_streak", "episodes.tool_calls",
    # booleans: only a boolean attribute is read (anything else is null)
    "tool_calls.content_captured", "tool_calls.found", "episodes.scenario_loop",
    "reconciles.found", "tool_calls.deadline_stated",
    # a message's time and token sum: its span's time, and two bounded token counts
    "messages.start_ns", "messages.tokens",
    # a run's call facts (schema 16): counts, sums and the highest of its calls' columns,
    # each bounded above (a token count is at most 10^12: a million calls stay in bigint)
    "episodes.priced_calls", "episodes.calls_cost_usd", "episodes.calls_tokens_in",
    "episodes.calls_tokens_out", "episodes.numbered_calls", "episodes.max_call_ordinal",
    "episodes.calls_by_tool",
}


@pytest.fixture(scope="module")
def columns(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    db = open_database(tmp_path_factory.mktemp("typed") / "store.duckdb")
    try:
        rows = db.cursor().execute(
            "select table_name || '.' || column_name, data_type from information_schema.columns"
            " where table_name in ('tool_calls', 'episodes', 'reconciles', 'messages')"
            " and data_type not in ('VARCHAR', 'VARCHAR[]', 'JSON', 'TIMESTAMP')"
        ).fetchall()
    finally:
        db.close()
    return dict(rows)


def test_every_declared_column_has_the_type_the_table_says(columns: dict[str, str]) -> None:
    for key, column in TYPED_ATTRIBUTES.items():
        for name in column.columns:
            assert columns[name] == column.type.name, (key, name)


def test_every_typed_column_is_declared_or_derived(columns: dict[str, str]) -> None:
    declared = {name for column in TYPED_ATTRIBUTES.values() for name in column.columns}
    assert set(columns) == declared | DERIVED
    assert not declared & DERIVED


@pytest.mark.parametrize("key", sorted(TYPED_ATTRIBUTES))
def test_each_bounded_attribute_holds_its_limits_and_sets_aside_one_past(key: str) -> None:
    kind = TYPED_ATTRIBUTES[key].type
    if kind.low is None:  # DOUBLE: every number fits
        assert unstorable_attribute({key: 1e308}) is None
        return
    for fits in (kind.low, kind.high, str(kind.high), float(2**20)):
        assert unstorable_attribute({key: fits}) is None
        assert typed_int({key: fits}, key) == int(fits)
    for past in (kind.high + 1, kind.low - 1, str(kind.high + 1)):
        found = unstorable_attribute({key: past})
        assert found is not None and found[0] == key
        assert found[1].startswith(f"attributes['{key}']: ")
        assert typed_int({key: past}, key) is None
    for not_a_number in ("soon", True, 1.5, [1]):
        assert unstorable_attribute({key: not_a_number}) is None
        assert typed_int({key: not_a_number}, key) is None


def test_typed_int_takes_the_first_present_key() -> None:
    attrs = {"llm.token_count.prompt": 7}
    assert typed_int(attrs, "gen_ai.usage.input_tokens", "llm.token_count.prompt") == 7


def test_set_aside_moves_every_unstorable_value_to_text_and_keeps_the_rest() -> None:
    attrs = {"loopscope.cost_usd": float("nan"), "gen_ai.usage.input_tokens": -1,
             "loopscope.step": 3, "other": "x"}
    wrong = set_aside_unstorable(attrs)
    assert sorted(w.split("'")[1] for w in wrong) == ["gen_ai.usage.input_tokens",
                                                      "loopscope.cost_usd"]
    assert attrs == {"loopscope.step": 3, "other": "x",
                     SET_ASIDE + "loopscope.cost_usd": "nan",
                     SET_ASIDE + "gen_ai.usage.input_tokens": "-1"}
    assert set_aside_unstorable(attrs) == []

