"""Whether the store can be written, told honestly, and the way back when it can again.

A 200 means the spans are durably accepted (spooled, or stored), so a collector whose store
cannot be written must stop acknowledging, say why on ``/healthz`` (and the gRPC health service), and log it once.
Three things make a store unwritable under a running collector:

- a write fails for the disk's sake (full, read-only, I/O error), or DuckDB invalidates the
  database after such a failure: every later statement fails until it is reopened;
- the file is deleted or renamed away: DuckDB goes on writing into the file it holds open,
  and everything acknowledged since is gone from the path at the next start;
- the file is replaced by another one, or overwritten in place: the same, and the new file
  is not ours to write.

The pipeline thread, the store's only writer, watches for these (``StoreWatch.check``, about
once a second) and recovers on its own when the condition clears: a deleted file is written
back from the open database (which still holds every acknowledged span; a renamed file is
left where it was moved, as it was at the move), a failed disk is
probed and the store reopened (DuckDB replays its write-ahead log), and health turns ``ok``
again. A replaced or overwritten file is left alone, for good (``Database.leave_file``:
nothing is written into it again, not by a checkpoint, not at stop): the open database is
saved beside it (``<db>.recovered-<time>``), its write-ahead log is moved aside (DuckDB would
replay it into the other file at the next open), and the collector stays failing until an
operator restarts it; the stop and the next start name the saved file.

A store in a lake has no file to watch: a write that fails (the catalog database down, the
data path unwritable) turns health failing, and recovery attaches the lake again and probes
a local data path, about once a second, until both answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..store_settings import CHECKPOINT_BYTES
from . import Store
from .duckdb_file.connect import DUCKDB_MAGIC, RECOVERED, checkpoint_shortfall
from .errors import kind_of

logger = logging.getLogger(__name__)

RECOVER_INTERVAL_S: Final = 1.0
"""Least time between two attempts to recover a failing store."""
PROBE_BYTES: Final = 256 * 1024
"""A failed disk counts as cleared when this much can be written and synced beside the store."""


class StoreUnavailable(RuntimeError):
    """The store cannot be written now; the client should retry later (503 + Retry-After)."""


class StoreHealth:
    """The store's state: ``ok``, or failing with a reason. Read from any thread; changed by
    the pipeline thread. ``listeners`` are called with ``(ok, reason)`` on every change."""

    def __init__(self) -> None:
        self.ok = True
        self.reason = ""
        self.listeners: list[Callable[[bool, str], None]] = []
        self._lock = threading.Lock()

    def fail(self, reason: str) -> None:
        """Turn failing (logged once, when it turns) with ``reason``."""
        with self._lock:
            turned, self.ok, self.reason = self.ok, False, reason
        if turned:
            logger.error("loopscope collector: the store cannot be written, refusing spans "
                         "(503) until it can: %s", reason)
            self._tell()

    def recover(self) -> None:
        """Turn ok again (logged)."""
        with self._lock:
            turned, self.ok, self.reason = not self.ok, True, ""
        if turned:
            logger.warning("loopscope collector: the store can be written again; accepting "
                           "spans")
            self._tell()

    def _tell(self) -> None:
        for listener in self.listeners:
            try:
                listener(self.ok, self.reason)
            except Exception:
                logger.exception("loopscope collector: a health listener failed")


HEADER_BYTES: Final = 3 * 4096
"""DuckDB's main header (the format's magic bytes) and its two database headers, which only a
checkpoint writes. Every checkpoint of the store is the collector's own (``after_commit``,
``Database.checkpoint``: DuckDB's automatic one is off), so headers that change without one
mean another database was written over the store. (The main header holds no database id,
on DuckDB 1.4.4 and 2.0.1 alike: two new files' main headers are the same bytes.)"""


@dataclass(frozen=True, slots=True)
class _Identity:
    device: int
    inode: int


def _identity(path: str) -> _Identity | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return _Identity(stat.st_dev, stat.st_ino)


class _StoreFile:
    """A descriptor held open on the store's file for as long as the watch looks at it.

    The watch reads the file's headers through it, never by opening the path again: the
    store's lock is a POSIX record lock, which a process loses on *every* descriptor of the
    file as soon as it closes *any* one of them, so a check that opened and closed the file
    would let a second collector open the store beside this one.
    """

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        stat = os.fstat(self.fd)
        self.identity = _Identity(stat.st_dev, stat.st_ino)
        self.header = self.read_header()

    def read_header(self) -> bytes:
        return os.pread(self.fd, HEADER_BYTES, 0)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class StoreWatch:
    """The pipeline thread's watch over its store: see the module docstring."""

    def __init__(self, db: Store, health: StoreHealth, *,
                 checkpoint_bytes: int = CHECKPOINT_BYTES) -> None:
        self.db = db
        self.health = health
        self.checkpoint_bytes = checkpoint_bytes
        """The log's size past which ``after_commit`` checkpoints."""
        self.in_memory = db.path == ":memory:"
        self._file = None if self.in_memory or db.lake is not None else _StoreFile(db.path)
        self._next_attempt = 0.0
        self.recovered: str | None = None
        """Where the open database was saved, once the file at its path was found not to be
        it (``_save_aside``)."""

    def check(self) -> bool:
        """Whether the store can be written now; if not, turn health failing and, at most
        once per ``RECOVER_INTERVAL_S``, try to recover. Pipeline thread only."""
        problem = self._file_problem()
        if problem is not None:
            self._found(problem)
        if self.health.ok:
            return True
        now = time.monotonic()
        if now < self._next_attempt:
            return False
        self._next_attempt = now + RECOVER_INTERVAL_S
        try:
            self._recover(problem)
        except Exception as exc:  # still failing: the reason may have changed, say it quietly
            logger.debug("loopscope collector: store recovery failed: %s", exc)
            return False
        return self.health.ok

    def after_commit(self) -> None:
        """Checkpoint the write-ahead log once it is past ``checkpoint_bytes``, if the disk
        has room for it; if not, turn failing with the reason (the commit stands: it is in
        the log). Pipeline thread only, after a commit.

        Raises:
            duckdb.Error: the checkpoint failed.
        """
        if self._file is None:
            return
        try:
            wal = os.stat(f"{self.db.path}.wal").st_size
        except FileNotFoundError:
            return
        if wal < self.checkpoint_bytes:
            return
        shortfall = checkpoint_shortfall(self.db.path)
        if shortfall is not None:
            self.health.fail(shortfall)
            return
        self.verify()  # never checkpoint into a file that is not the store
        before = self._file.header
        self.db.checkpoint()
        after = self._file.read_header()
        if not _one_checkpoint_apart(before, after):  # overwritten while it checkpointed
            self._found(_overwritten(self.db.path, after))
            return
        self._file.header = after

    def failed(self, exc: BaseException) -> None:
        """A write failed for the store's sake (not the data's): turn health failing."""
        self.health.fail(f"{kind_of(exc)}: {exc}")

    def verify(self) -> None:
        """Raise ``StoreUnavailable`` (and turn health failing) if the file is not the one
        the collector opened: called before each commit, so no batch is acknowledged into a
        file that was replaced or overwritten since the last look. Pipeline thread only."""
        problem = self._file_problem()
        if problem is not None:
            self._found(problem)
            raise StoreUnavailable(problem)

    def stop(self) -> None:
        """The collector is stopping: pipeline thread, after its last batch, before the
        store closes. A file found replaced or overwritten (before, or now) stays as found;
        the open database is saved beside it if it was not yet, and the stop message says
        where every acknowledged span is."""
        problem = self._file_problem()
        if problem is not None and _identity(self.db.path) is not None:
            self._found(problem)
        if self.db.left is not None:
            try:
                self._save_aside()
            except Exception as exc:
                log = _set_aside(f"{self.db.path}.wal")  # kept, not replayed into the file
                logger.error("loopscope collector: %s; it was left as found, nothing written "
                             "into it, but the open store could not be saved beside it "
                             "(%s: %s); the spans acknowledged since its last checkpoint are "
                             "in its write-ahead log, %s", self.db.left, type(exc).__name__,
                             exc, log or "(none)")
            else:
                logger.error("loopscope collector: %s; it was left as found, nothing written "
                             "into it. Every acknowledged span is in %s: restart the "
                             "collector with --db %s to go on with them, or on %s to keep "
                             "the other file", self.db.left, self.recovered, self.recovered,
                             self.db.path)

    def _found(self, problem: str) -> None:
        """Turn failing for ``problem``; a file that is there but is not the store (replaced
        or overwritten) is left for good: ``Database.leave_file``."""
        self.health.fail(problem)
        if self.db.left is None and _identity(self.db.path) is not None:
            self.db.leave_file(problem)

    def _file_problem(self) -> str | None:
        """What is wrong with the file at the store's path, checked by where it is (device
        and inode) and by what it is (DuckDB's headers, as the store's last checkpoint
        wrote them)."""
        if self.in_memory or self._file is None:
            return None
        found = _identity(self.db.path)
        if found is None:
            return (f"the store file {self.db.path} was deleted or moved away while the "
                    "collector had it open")
        if found != self._file.identity:
            return (f"the store file {self.db.path} was replaced by another file while the "
                    "collector had it open")
        try:
            header = self._file.read_header()
        except OSError:
            return None  # unreadable this instant: the next look tells
        if header != self._file.header:
            return _overwritten(self.db.path, header)
        return None

    def close(self) -> None:
        """Let go of the file (the store is closing)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _recover(self, problem: str | None) -> None:
        path = self.db.path
        if self.db.left is not None:  # replaced or overwritten: never written again
            self._save_aside()
            return
        if problem is not None:  # deleted: write it back from the open database
            self.db.export(f"{path}.recovering")
            self.db.close()
            _set_aside(f"{path}.wal")  # a stale log must not be replayed into the new file
            os.replace(f"{path}.recovering", path)
            logger.warning("loopscope collector: wrote the deleted store back to %s", path)
        elif self.db.lake is not None:  # attach again (fails while the catalog is down)
            self.db.reopen()
            if "://" not in self.db.lake.data_path:
                _probe_disk(os.path.join(self.db.lake.data_path, "loopscope"))
            self.health.recover()
            return
        elif self.in_memory:  # nothing to reopen (it would be empty): try it as it is
            self.db.checkpoint()
            self.health.recover()
            return
        else:
            _probe_disk(path)
            shortfall = checkpoint_shortfall(path)
            if shortfall is not None:  # reopening replays and checkpoints the log
                raise OSError(shortfall)
        self.db.reopen()
        self.db.checkpoint()
        if not self.in_memory:
            if self._file is not None:
                self._file.close()
            self._file = _StoreFile(path)
        self.health.recover()

    def _save_aside(self) -> None:
        """Once: save the open database beside the file it left (``RECOVERED``), then move
        its write-ahead log aside: the log is this database's, and DuckDB would replay it
        into the other file at the next open."""
        if self.recovered is not None:
            return
        path = self.db.path
        aside = f"{path}{RECOVERED}{int(time.time())}"
        self.db.export(aside)
        self.recovered = aside
        _set_aside(f"{path}.wal")
        logger.error("loopscope collector: saved the open store (every acknowledged span) "
                     "to %s; restart the collector to use it or the new file", aside)


def _overwritten(path: str, header: bytes) -> str:
    """The reason for a store file whose headers (``header``) are not the store's."""
    if header[8:12] != DUCKDB_MAGIC:
        return (f"the store file {path} was overwritten (it no longer starts as a DuckDB "
                "file) while the collector had it open")
    return (f"the store file {path} was overwritten in place by another database (its "
            "DuckDB headers differ from those the store's last checkpoint wrote) while the "
            "collector had it open")


def _one_checkpoint_apart(before: bytes, after: bytes) -> bool:
    """Whether ``after`` can be the headers one checkpoint wrote over ``before``: a
    checkpoint leaves the main header alone and writes one of the two database headers
    (they alternate), on DuckDB 1.4.4 and 2.0.1 alike; a file copied over the store while
    it checkpointed has other database headers in both places (CI, 2026-12-04: headers
    read just after such a checkpoint were taken for the store's, and the copy went
    unseen)."""
    block = HEADER_BYTES // 3
    if len(after) != len(before) or after[:block] != before[:block]:
        return False
    return (after[block:2 * block] == before[block:2 * block]
            or after[2 * block:] == before[2 * block:])


def _set_aside(path: str) -> str | None:
    """Move ``path`` (if it is there) to ``<path>.stale-<time>``, and say where."""
    if not os.path.exists(path):
        return None
    aside = f"{path}.stale-{int(time.time())}"
    os.replace(path, aside)
    return aside


def _probe_disk(path: str) -> None:
    """Raise ``OSError`` unless ``PROBE_BYTES`` can be written and synced beside ``path``."""
    probe = f"{path}.probe"
    try:
        with open(probe, "wb") as handle:
            handle.write(b"\0" * PROBE_BYTES)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        with contextlib.suppress(OSError):
            os.remove(probe)
