"""The storage port (``storage.port.Store``) on each backend, through the one ``store``
fixture (tests/conftest.py): a batch written in a transaction is what a named read returns,
a rolled-back one leaves nothing, and the store raises its own errors, saying which failures
are worth a retry."""

from __future__ import annotations

import duckdb
import pytest

from loopscope_collector.reads import read
from loopscope_collector.storage import Store
from loopscope_collector.storage.errors import (
    PermanentStoreError,
    RetryableStoreError,
    StoreConflict,
    StoreError,
    classify,
)
from loopscope_collector.storage.writes import write_labels


def test_a_committed_batch_is_read_back_by_name_and_a_rolled_back_one_is_not(store: Store) -> None:
    cur = store.cursor()
    cur.execute("begin")
    write_labels(cur, [{"episode_id": "kept", "span_id": "", "label": "true_loop", "note": "a"}])
    cur.execute("commit")
    cur.execute("begin")
    write_labels(cur, [{"episode_id": "undone", "span_id": "", "label": "no_loop", "note": None}])
    cur.execute("rollback")
    cur.close()

    rows = read(store, "label_list", {})

    assert [(r["episode_id"], r["label"], r["note"]) for r in rows] == [("kept", "true_loop", "a")]


def test_data_the_store_cannot_hold_is_a_permanent_failure(store: Store) -> None:
    cur = store.cursor()
    with pytest.raises(StoreError) as refused, store.failures():
        cur.execute("insert into labels (episode_id, span_id, label) values (NULL, '', 'x')")
    cur.close()

    assert isinstance(refused.value, PermanentStoreError) and not refused.value.retryable
    assert "NULL" in str(refused.value)  # the engine's own words


def test_a_store_that_cannot_be_read_now_is_a_retryable_failure(store: Store) -> None:
    cur = store.cursor()
    store.close()
    with pytest.raises(StoreError) as closed, store.failures():
        cur.execute("select count(*) from labels").fetchall()

    assert isinstance(closed.value, RetryableStoreError) and closed.value.retryable
    with pytest.raises(RetryableStoreError):
        read(store, "label_list", {})  # the named reads raise the store's own errors too
    store.reopen()


def test_a_deadlock_in_a_lakes_catalog_is_a_lost_race_whose_batch_is_stored_again() -> None:
    """PostgreSQL aborts one of two catalog transactions that wait on each other; the
    collector whose commit it chose stores its batch again (``StoreConflict``) instead of
    turning its health failing and refusing requests meanwhile (CI, 2026-12-07: of two lake
    collectors ingesting and merging files every second, one answered 7 requests 503). The
    message is built from the end of what that collector logged; a real deadlock cannot be
    made to order."""
    failed = duckdb.TransactionException(
        "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction: "
        'UPDATE "public".ducklake_data_file SET end_snapshot = 91 WHERE end_snapshot IS NULL '
        "AND data_file_id IN (274, 275);: ERROR:  deadlock detected\nDETAIL:  Process 6528 "
        "waits for ShareLock on transaction 1165; blocked by process 6673.")

    assert isinstance(classify(failed, lake=True), StoreConflict)
