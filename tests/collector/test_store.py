"""The storage port (``storage.port.Store``) on each backend, through the one ``store``
fixture (tests/conftest.py): a batch written in a transaction is what a named read returns,
a rolled-back one leaves nothing, and the store says which failures are worth a retry."""

from __future__ import annotations

import pytest

from loopscope_collector.reads import read
from loopscope_collector.storage import Store
from loopscope_collector.storage.errors import (
    PermanentStoreError,
    RetryableStoreError,
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
    with pytest.raises(StoreError) as refused:
        cur.execute("insert into labels (episode_id, span_id, label) values (NULL, '', 'x')")
    cur.close()

    failure = classify(refused.value)

    assert isinstance(failure, PermanentStoreError) and not failure.retryable


def test_a_store_that_cannot_be_read_now_is_a_retryable_failure(store: Store) -> None:
    cur = store.cursor()
    store.close()
    with pytest.raises(StoreError) as closed:
        cur.execute("select count(*) from labels").fetchall()

    failure = classify(closed.value)

    assert isinstance(failure, RetryableStoreError) and failure.retryable
    store.reopen()
