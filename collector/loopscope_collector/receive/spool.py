"""The spool: the write-ahead step that lets the collector acknowledge an export before its
batch is stored.

A request admitted and queued for the pipeline is appended here as one record, and answered
200 once the record is durable; the pipeline stores it with the next batches. A record is
its (inflated) body as the request was decoded from, so after a crash the collector decodes
it again and stores it (``replay``, at start, before it serves): what was acknowledged is
never lost. Ingest is idempotent by (trace_id, span_id), so a record whose batch was stored
before the crash is skipped span by span.

On disk: a folder (``<store>.spool/`` beside a DuckDB file, or ``--spool DIR``) of segment
files ``00000001.seg``, ``00000002.seg``, … appended to only. Each record is a header
(``HEADER``: the body's length, the CRC-32 of its content type byte and body, the content
type: 0 protobuf, 1 JSON) and the body, written with one ``os.write``, so a SIGKILL of the
collector leaves every record whole or the last one torn (the kernel holds what was
written); a write a full disk cuts short is taken back off at once (``_cut``), so no record
follows a torn one. Durable on the disk too: acknowledgements wait for an ``fdatasync`` of the segment
(group commit: one sync covers every record appended while the previous one ran), and a new
segment's directory entry is synced before a record in it is acknowledged, so a machine that
loses power loses nothing acknowledged either (BENCHMARKS.md, "Answer time under overload":
the sync's cost, measured). A torn or corrupt record (a kill in the middle of its write: it
was never acknowledged) ends its segment's replay with a log line.

A segment is deleted once every record in it is stored (or refused by the store for good:
``Pipeline``); a new one is started when the current one passes ``SEGMENT_BYTES``, or is
all stored and past ``EMPTY_ROTATE_BYTES``, and at a clean stop what is stored is deleted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..normalize.spans import Decoded
from ..pipeline.jobs import Job, Overloaded
from ..pipeline.thread import Pipeline
from .decode import JSON, PROTOBUF, DecodeError, decode_request

logger = logging.getLogger(__name__)

HEADER: Final = struct.Struct("<IIB")
"""A record's header: the body's length, the CRC-32 of the type byte and the body, the
content type (``TYPES``)."""
TYPES: Final = {PROTOBUF: 0, JSON: 1}
MEDIA: Final = {code: media for media, code in TYPES.items()}
SEGMENT_BYTES: Final = 16 * 1024 * 1024
"""A segment past this size is closed (synced) and the next record starts a new one."""
EMPTY_ROTATE_BYTES: Final = 1024 * 1024
"""A current segment whose records are all stored is deleted once it is this large (a
smaller one is kept, and replayed, its spans skipped as stored, after a crash)."""
SUFFIX: Final = ".seg"


@dataclass(frozen=True)
class Record:
    """Where an acknowledged request is in the spool: its segment's number."""

    segment: int


class Segment:
    """One open segment file; closed under its lock, so a sync never meets a closed fd."""

    def __init__(self, path: Path, number: int) -> None:
        self.path = path
        self.number = number
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.size = os.fstat(self.fd).st_size
        self.lock = threading.Lock()

    def sync(self) -> None:
        with self.lock:
            if self.fd is not None:
                os.fdatasync(self.fd)

    def close(self, *, sync: bool) -> None:
        with self.lock:
            if self.fd is not None:
                if sync:
                    os.fdatasync(self.fd)
                os.close(self.fd)
                self.fd = None


class Spool:
    """The spool folder at ``path``; see the module docstring. Thread-safe: receivers
    ``append`` (then ``sync``), the pipeline calls ``stored``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        """Created with the first record (a collector that fails to start leaves none), and
        removed at a clean stop that leaves it empty."""
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._left = sorted(self._numbers())
        """The segments a previous run left (to ``replay``)."""
        self._next = (self._left[-1] + 1) if self._left else 1
        self._current: Segment | None = None
        self._pending: dict[int, int] = {}
        """Per segment, its records not yet stored."""
        self._sizes: dict[int, int] = {n: self._file(n).stat().st_size for n in self._left}
        self._appended = 0
        self._synced = 0

    def _numbers(self) -> Iterator[int]:
        if not self.path.is_dir():
            return
        for entry in self.path.iterdir():
            if entry.suffix == SUFFIX and entry.stem.isdigit():
                yield int(entry.stem)

    def _file(self, number: int) -> Path:
        return self.path / f"{number:08d}{SUFFIX}"

    # -- receivers ----------------------------------------------------------------------

    def append(self, media: str, body: bytes | bytearray) -> Record:
        """Append one request's record (``media``: ``decode.PROTOBUF`` or ``decode.JSON``);
        durable once ``sync`` returns. Raises ``OSError`` (a full disk): the request is then
        acknowledged at its commit instead."""
        kind = TYPES[media]
        header = HEADER.pack(len(body), zlib.crc32(body, zlib.crc32(bytes([kind]))), kind)
        with self._lock:
            segment = self._current
            if segment is None or segment.size >= SEGMENT_BYTES:
                segment = self._rotate()
            assert segment.fd is not None
            written = os.write(segment.fd, header + body)
            if written != HEADER.size + len(body):  # (a full disk mid-write: never acknowledged)
                self._cut(segment, written)
                raise OSError(f"short write to the spool ({written} of "
                              f"{HEADER.size + len(body)} bytes)")
            segment.size += written
            self._sizes[segment.number] = segment.size
            self._pending[segment.number] = self._pending.get(segment.number, 0) + 1
            self._appended += 1
            mark = self._appended
        self._sync(mark)
        return Record(segment.number)

    def _cut(self, segment: Segment, written: int) -> None:
        """Take the torn record a full disk cut short (``written`` bytes) back off the end of
        ``segment`` (under ``_lock``): a replay stops at a torn record, so every record appended
        after it, acknowledged, would be skipped with it after a crash. If it cannot be taken
        off, the segment is closed there and the next record starts a new one."""
        assert segment.fd is not None
        try:
            os.ftruncate(segment.fd, segment.size)
        except OSError:
            segment.size += written
            self._sizes[segment.number] = segment.size
            with contextlib.suppress(OSError):
                segment.close(sync=True)  # (the records before it may wait for their sync)
            self._current = None

    def _rotate(self) -> Segment:
        """Start the next segment (under ``_lock``): the full one is synced and closed, the
        new one's directory entry synced."""
        old = self._current
        if old is not None:
            old.close(sync=True)
            if not self._pending.get(old.number):
                self._delete(old.number)
        number, self._next = self._next, self._next + 1
        if not self.path.is_dir():
            self.path.mkdir(parents=True)
            self._sync_folder(self.path.parent)
        self._current = segment = Segment(self._file(number), number)
        self._sizes[number] = segment.size
        self._sync_folder(self.path)
        return segment

    @staticmethod
    def _sync_folder(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _sync(self, mark: int) -> None:
        """Make the records appended up to ``mark`` durable: one ``fdatasync`` for all those
        appended while the previous one ran (group commit)."""
        with self._sync_lock:
            if self._synced >= mark:
                return
            with self._lock:
                upto, segment = self._appended, self._current
            if segment is not None:
                segment.sync()
            self._synced = upto

    # -- the pipeline ---------------------------------------------------------------------

    def stored(self, record: Record) -> None:
        """The pipeline is done with the record's request (stored, or refused for good):
        its segment is deleted once every record in it is."""
        with self._lock:
            number = record.segment
            left = self._pending[number] = self._pending.get(number, 1) - 1
            if left > 0:
                return
            current = self._current
            if current is not None and current.number == number:
                if current.size < EMPTY_ROTATE_BYTES:
                    return
                current.close(sync=False)
                self._current = None
            self._delete(number)

    def _delete(self, number: int) -> None:
        self._pending.pop(number, None)
        self._sizes.pop(number, None)
        with contextlib.suppress(FileNotFoundError):
            self._file(number).unlink()

    def requests(self) -> int:
        """Acknowledged requests not yet stored (``/metrics``)."""
        with self._lock:
            return sum(self._pending.values())

    def size(self) -> int:
        """Bytes the spool's segments hold on disk (``/metrics``)."""
        with self._lock:
            return sum(self._sizes.values())

    def close(self) -> None:
        """At a clean stop, after the pipeline: delete the segments whose records are all
        stored (those the pipeline could not store are replayed at the next start)."""
        with self._lock:
            if self._current is not None:
                self._current.close(sync=True)
                self._current = None
            for number in list(self._sizes):
                if not self._pending.get(number):
                    self._delete(number)
            with contextlib.suppress(OSError):  # (only if empty)
                self.path.rmdir()

    def follow(self, store: str) -> None:
        """The store's file was found replaced or overwritten and the open store saved to
        ``store`` (``storage.health``): what the spool still holds (acknowledged, not stored:
        the store was not written again) belongs to that copy, so the spool moves to its
        default place beside it (``<store>.spool``), replayed when a collector starts on it;
        never into the file found at the store's path."""
        with self._lock:
            left = sum(self._pending.values())
        if not left:
            return
        target = Path(f"{store}.spool")
        shutil.move(self.path, target)  # (not removed at the stop: it holds records)
        self.path = target
        logger.error("loopscope collector: the %d acknowledged request(s) not stored yet are "
                     "in %s: a collector started with --db %s stores them", left, target,
                     store)

    # -- after a crash ------------------------------------------------------------------

    def leftovers(self) -> Iterator[tuple[int, list[tuple[str, bytes]]]]:
        """The records of each segment a previous run left, segment by segment (whole ones:
        a torn or corrupt record ends its segment, with a log line); each segment's records
        count as pending until ``stored``."""
        for number in self._left:
            records = self._read(number)
            with self._lock:
                if records:
                    self._pending[number] = len(records)
                else:
                    self._delete(number)
            yield number, records
        self._left = []

    def _read(self, number: int) -> list[tuple[str, bytes]]:
        data = self._file(number).read_bytes()
        records: list[tuple[str, bytes]] = []
        at = 0
        while at < len(data):
            torn = None
            if at + HEADER.size > len(data):
                torn = "its header is cut short"
            else:
                length, crc, kind = HEADER.unpack_from(data, at)
                body = data[at + HEADER.size:at + HEADER.size + length]
                if len(body) < length:
                    torn = f"{len(body)} of its {length} bytes were written"
                elif kind not in MEDIA or zlib.crc32(body, zlib.crc32(bytes([kind]))) != crc:
                    torn = "its checksum does not match"
            if torn is not None:
                logger.warning("loopscope collector: spool segment %s: the record at byte %d "
                               "is skipped (%s: a write cut off by a crash, never "
                               "acknowledged), with the %d byte(s) after it",
                               self._file(number), at, torn, len(data) - at)
                break
            records.append((MEDIA[kind], body))
            at += HEADER.size + length
        return records


def acknowledge(job: Job, spool: Spool, record: Record) -> bool:
    """Hand ``job`` to the pipeline as acknowledged by ``record`` (the pipeline keeps it until
    it is stored, then calls ``spool.stored``); False when the pipeline was done with it
    already (the record is then done too, and the job's own outcome answers)."""
    if job.acknowledge(lambda: spool.stored(record)):
        return True
    spool.stored(record)
    return False


def replay(spool: Spool, pipeline: Pipeline) -> tuple[int, int]:
    """Store what a previous run acknowledged and did not store (``Spool.leftovers``),
    before the collector serves: each record decoded again, submitted, waited for. Returns
    the (requests, spans) replayed. While the store cannot be written, what is left stays
    in the spool, for the pipeline to store once it recovers."""
    requests = spans = 0
    jobs: list[Job] = []
    for number, records in spool.leftovers():
        for media, body in records:
            try:
                decoded = decode_request(body, content_type=media, content_encoding=None,
                                         max_bytes=len(body))
            except DecodeError as exc:  # (it decoded when it was acknowledged)
                logger.error("loopscope collector: a spooled request of segment %d does not "
                             "decode again; not stored: %s", number, exc)
                spool.stored(Record(number))
                continue
            job = _submit(pipeline, decoded)
            if job is None:  # (its segment stays, for the next start)
                continue
            if acknowledge(job, spool, Record(number)):
                jobs.append(job)
            requests += 1
            spans += len(decoded)
    while any(not job.done.wait(0.1) for job in jobs):
        if not pipeline.health.ok:  # kept by the pipeline until the store recovers
            break
    return requests, spans


def _submit(pipeline: Pipeline, spans: Decoded) -> Job | None:
    """Submit replayed spans, waiting while the queue is full; None when the store cannot
    take them (they stay in the spool: replayed at the next start)."""
    while True:
        try:
            return pipeline.submit(spans)
        except Overloaded:
            time.sleep(0.05)
        except Exception as exc:
            logger.warning("loopscope collector: a spooled request is left for the next start: "
                           "%s", exc)
            return None

