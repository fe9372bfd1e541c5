"""The storage port (``storage.port.Store``) on each backend, through the one ``store``
fixture (tests/conftest.py): a batch written in a transaction is what a named read returns,
a rolled-back one leaves nothing, and the store raises its own errors, saying which failures
are worth a retry."""

from __future__ import annotations

import pytest

from loopscope_collector.reads import read
from loopscope_collector.storage import Store
from loopscope_collector.storage.errors import (
    PermanentStoreError,
    RetryableStoreError,
    StoreError,
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
