"""Each vocabulary (modes, tool kinds, statuses, actions, outcomes...) is spelled once, in
``loopscope.detect.events``; Python elsewhere derives its copies from there. These tests hold
the spellings that cannot import it to the same values: the SQL files, and the dashboard
modules that the import rules keep away from the core (``charts``) or that key display words
by value (``truth``). Renaming or adding a value in ``events`` fails here until every spelling
follows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopscope.detect.events import (
    ACTION_RANK,
    ACTIONS,
    KILL_ACTIONS,
    MODES,
    OUTCOMES,
    RUNG_ACTIONS,
    SEVERITIES,
    STATUSES,
    STOP_REASONS,
)
from loopscope.detect.registry import DETECTOR_NAMES
from loopscope_collector.storage.writes.labels import LABEL_VALUES
from loopscope_dashboard import charts, truth, uploads

COLLECTOR = Path(__file__).resolve().parents[2] / "collector" / "loopscope_collector"
SQL = COLLECTOR / "storage" / "sql"
SQL_FILES = (SQL, COLLECTOR / "reads" / "sql")
"""The store's SQL (its DDL and writes) and the named reads' (a stage of their own)."""

VOCABULARIES: dict[str, tuple[str, ...]] = {
    "action": ACTIONS,
    "guard_action": ACTIONS,
    "decision": ACTIONS,
    "guard_decision": ACTIONS,
    "status": STATUSES,
    "severity": SEVERITIES,
    "stop_reason": STOP_REASONS,
    "outcome": OUTCOMES,
    "guard_mode": MODES,
    "label": LABEL_VALUES,
    "detector": DETECTOR_NAMES,
}
"""SQL column name -> the values it may be compared with."""

# `lhs = 'x'`, `lhs <> 'x'`, `lhs in ('x', 'y')`, `lhs not in (...)`; lhs a column, or a call
# such as coalesce(g.decision, g.action) whose columns all count.
_COMPARISON = re.compile(
    r"(?P<lhs>[\w.]+(?:\([^()]*\))?)\s*(?:=|<>|!=|(?:not\s+)?in)\s*"
    r"(?P<rhs>'[^']*'|\(\s*'[^)]*\))",
    re.IGNORECASE,
)


def _sql_comparisons() -> list[tuple[str, str, frozenset[str]]]:
    """(file:line, column, literals) for every comparison of a known column with literals."""
    found = []
    for path in sorted(p for folder in SQL_FILES for p in folder.rglob("*.sql")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("--", 1)[0]
            for match in _COMPARISON.finditer(code):
                literals = frozenset(re.findall(r"'([^']*)'", match["rhs"]))
                columns = {name.rsplit(".", 1)[-1] for name in re.findall(r"[\w.]+", match["lhs"])}
                for column in sorted(columns & VOCABULARIES.keys()):
                    found.append((f"{path.name}:{number}", column, literals))
    return found


COMPARISONS = _sql_comparisons()


def test_the_sql_is_read() -> None:
    """The pattern still finds the SQL's comparisons (this file would pass vacuously if not)."""
    assert {column for _, column, _ in COMPARISONS} >= {
        "guard_action", "decision", "status", "severity", "stop_reason", "outcome", "label",
    }


@pytest.mark.parametrize(("where", "column", "literals"), COMPARISONS,
                         ids=[f"{w} {c}" for w, c, _ in COMPARISONS])
def test_sql_compares_columns_with_their_vocabulary(
    where: str, column: str, literals: frozenset[str]
) -> None:
    assert literals <= set(VOCABULARIES[column]), (
        f"{where}: {column} compared with {sorted(literals - set(VOCABULARIES[column]))}, "
        f"not in {VOCABULARIES[column]}"
    )


def test_sql_action_lists_are_the_kill_or_rung_actions() -> None:
    """A list of several actions in SQL is either 'the kills' or 'anything past allow'."""
    lists = {lit for _, column, lit in COMPARISONS
             if VOCABULARIES[column] is ACTIONS and len(lit) > 1}
    assert lists, "no action list found in the SQL"
    assert lists <= {frozenset(KILL_ACTIONS), frozenset(RUNG_ACTIONS)}


def test_sql_guard_stops_are_the_dashboards() -> None:
    lists = {lit for _, column, lit in COMPARISONS if column == "stop_reason" and len(lit) > 1}
    assert lists == {frozenset(truth.GUARD_STOPS)}
    assert set(truth.GUARD_STOPS) <= set(STOP_REASONS)


def test_ddl_comment_names_the_statuses() -> None:
    ddl = (SQL / "ddl" / "002_tool_calls.sql").read_text()
    spelled = re.search(r"status varchar.*--\s*(.+)", ddl)
    assert spelled is not None
    assert tuple(v.strip() for v in spelled[1].split("|")) == STATUSES


def test_dashboard_spellings_follow_the_core() -> None:
    assert truth.RANK == ACTION_RANK
    assert truth.DONE.keys() == set(ACTIONS)
    assert truth.WOULD.keys() == set(RUNG_ACTIONS)
    assert charts._GUARD_SYMBOLS.keys() == set(RUNG_ACTIONS)  # charts may not import the core
    assert sorted(uploads.MODES) == sorted(MODES)
