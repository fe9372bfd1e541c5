"""The store's schema is versioned and migrated on start; nothing stored is lost."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pytest

from loopscope_collector.reads import read
from loopscope_collector.storage import SchemaError, open_database
from loopscope_collector.storage.schema import LATEST, MIGRATIONS, current_version


def _store_at(path: Path, version: int) -> None:
    """A store as an older loopscope left it: the migrations up to ``version`` only."""
    con = duckdb.connect(str(path))
    con.execute("create table schema_version (version integer primary key, name varchar not "
                "null, applied_at timestamp not null default current_timestamp)")
    for number, name, ddl in MIGRATIONS:
        if number <= version:
            con.execute(ddl)
            con.execute("insert into schema_version (version, name) values ($v, $n)",
                        {"v": number, "n": name})
    con.execute("insert into alerts (alert_id, service, state, fired_at, rate, volume, message)"
                " values ('a1', 'svc', 'resolved', now(), 0.6, 40, 'spike')")
    con.execute("insert into labels (episode_id, label) values ('e1', 'true_loop')")
    con.close()


def test_an_older_store_is_migrated_on_open_and_keeps_its_rows(tmp_path: Path) -> None:
    """A version-6 store opens as the latest version; its alerts and labels are still there,
    and the new alert columns are empty for the old row."""
    path = tmp_path / "old.duckdb"
    _store_at(path, 6)
    db = open_database(path)
    try:
        assert current_version(db.con) == LATEST >= 7
        [alert] = read(db, "alerts")
        assert (alert["alert_id"], alert["rate"], alert["episodes_in_streak"]) == ("a1", 0.6, None)
        assert read(db, "label_list")[0]["label"] == "true_loop"
    finally:
        db.close()
    again = open_database(path)  # a second start applies nothing more
    try:
        assert current_version(again.con) == LATEST
    finally:
        again.close()


def test_an_upgrade_says_so_before_and_after_and_a_new_store_is_made_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """A big store's upgrade takes a while (half a minute for a million calls): the
    collector's start says what it is doing instead of sitting silent."""
    path = tmp_path / "old.duckdb"
    _store_at(path, 6)
    with caplog.at_level(logging.WARNING):
        open_database(path).close()
        said = [r.getMessage() for r in caplog.records]
        assert any(f"upgrading the store {path} from schema version 6 to {LATEST}" in m
                   and "a stop meanwhile is safe" in m for m in said), said
        assert any(f"the store {path} is upgraded to schema version {LATEST}" in m
                   for m in said), said
        caplog.clear()
        open_database(tmp_path / "new.duckdb").close()
        open_database(path).close()  # already upgraded
    assert not [r for r in caplog.records if "upgrad" in r.getMessage()]


def test_a_store_from_a_newer_loopscope_is_refused(tmp_path: Path) -> None:
    """Never misread a schema this version does not know."""
    path = tmp_path / "new.duckdb"
    _store_at(path, LATEST)
    con = duckdb.connect(str(path))
    con.execute("insert into schema_version (version, name) values ($v, 'future.sql')",
                {"v": LATEST + 1})
    con.close()
    with pytest.raises(SchemaError, match="newer"):
        open_database(path)


def test_an_alert_stored_before_version_10_has_no_rule_and_reads_as_before(
    tmp_path: Path,
) -> None:
    """Alerts keep the rule they were judged by from version 10 on; an older alert's rule
    columns are null (the dashboard then reads its message, as it did)."""
    path = tmp_path / "old.duckdb"
    _store_at(path, 9)
    db = open_database(path)
    try:
        [alert] = read(db, "alerts")
        assert alert["alert_id"] == "a1"
        assert [alert[k] for k in ("threshold", "window_s", "baseline_s", "factor", "floor",
                                   "min_volume")] == [None] * 6
    finally:
        db.close()
