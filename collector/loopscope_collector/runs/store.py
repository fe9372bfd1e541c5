"""The DuckDB store ``loopscope analyze --db`` writes, through the collector's real pipeline.

So the store holds what a running collector would have stored: spans, tool calls, episodes,
detections. Kept apart from ``analyze`` (the command's plug-in) because opening, feeding and
counting a store is a concept of its own. A store locked by a running collector is refused with
a clear message.

Nothing heavy is imported at import time: duckdb, pyarrow and the pipeline are imported when a
store is opened or finished, so ``loopscope --help`` and the plain ``analyze`` keep working
without the collector extra.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from loopscope.detect.episode_records import EpisodeRecord
from loopscope.detect.policy import Policy
from loopscope.detect.replay import EpisodeReport
from loopscope.detect.steps import Step

from ..normalize.spans import SpanRecord

if TYPE_CHECKING:
    from ..pipeline.jobs import Job
    from ..pipeline.thread import Pipeline
    from ..storage import Store as StoragePort

__all__ = ["Store", "StoreCounts", "StoreError"]

CHUNK_SPANS: Final = 5_000
"""Spans per pipeline job: well under the pipeline's queue limit."""
IN_FLIGHT_SPANS: Final = 40_000
"""Spans submitted but not yet committed before the reader waits for the pipeline."""
RETRY_EMPTY_S: Final = 0.1
"""How long to wait before asking again when the pipeline has no room though none of this
store's chunks is in it (another writer's are)."""
STORE_TIMEOUT_S: Final = 600.0


class StoreError(RuntimeError):
    """The DuckDB store cannot be opened or written; the message says why."""


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """What one run stored, and what the store holds for the episodes it read."""

    path: str
    spans_new: int
    spans_duplicate: int
    episodes: int
    tool_calls: int
    detections: int

    def __str__(self) -> str:
        return (f"stored in {self.path}: {self.episodes} episodes, {self.tool_calls} tool "
                f"calls, {self.detections} detections ({self.spans_new} new spans, "
                f"{self.spans_duplicate} already stored)")


class Store:
    """A DuckDB store written through the collector's ``Pipeline``, as a collector would."""

    def __init__(self, db: StoragePort, pipeline: Pipeline, policy: Policy) -> None:
        self.db = db
        self.pipeline = pipeline
        self.policy = policy
        self.started_ns = time.time_ns()
        self._jobs: deque[Job] = deque()
        self._in_flight = 0
        self._closed = False

    @classmethod
    def open(cls, path: str, *, policy: Policy | None = None) -> Store:
        """Open (creating and migrating) ``path`` and start a pipeline on it.

        Raises:
            StoreError: the collector extra is missing, the file is locked by a running
                collector, or it is not a loopscope store this version can write.
        """
        try:
            from ..pipeline.thread import Pipeline
            from ..storage import SchemaError, open_database
            from ..storage import errors as engine
        except ImportError as exc:
            raise StoreError(f"--db needs the collector extra ({exc.name} is missing): "
                             "pip install 'loopscope[collector]'") from None
        try:
            db = open_database(path)
        except engine.StoreLocked as exc:
            if exc.held:
                raise StoreError(
                    f"{path} is locked by another process (a running `loopscope collector`?). "
                    "Stop it first, or write to another file and browse that one"
                ) from None
            raise StoreError(f"cannot open {path}: {exc}") from None
        except (engine.StoreError, SchemaError) as exc:
            raise StoreError(f"cannot use {path} as a loopscope store: {exc}") from None
        policy = policy or Policy()
        # (No expiry: this writer waits for its own jobs, however slow the machine.)
        return cls(db, Pipeline(db, policy=policy, max_job_wait_s=None).start(), policy)

    def submit(self, spans: Sequence[SpanRecord]) -> None:
        """Queue spans for storing; waits when too many are still being stored, or when the
        pipeline has no room for them now."""
        for start in range(0, len(spans), CHUNK_SPANS):
            chunk = list(spans[start:start + CHUNK_SPANS])
            self._jobs.append(self._queue(chunk))
            self._in_flight += len(chunk)
            while self._in_flight > IN_FLIGHT_SPANS:
                self._wait_oldest()

    def _queue(self, chunk: list[SpanRecord]) -> Job:
        """Submit ``chunk``, waiting for room: the pipeline's admission is a live client's
        (``Overloaded`` when its queue would keep a request waiting too long, or is full: the
        collector's 503). An offline run is no client to answer at once; it waits for its
        oldest chunk to be stored (backpressure) and asks again, and is never refused."""
        from ..pipeline.jobs import Overloaded

        while True:
            try:
                return self.pipeline.submit(chunk)
            except Overloaded:
                if self._jobs:
                    self._wait_oldest()
                else:
                    time.sleep(RETRY_EMPTY_S)

    def _wait_oldest(self) -> None:
        job = self._jobs.popleft()
        self._in_flight -= len(job.spans)
        try:
            job.wait(STORE_TIMEOUT_S)
        except Exception as exc:
            raise StoreError(f"storing into {self.db.path} failed: {exc}") from exc

    def finish(self, episode_ids: Iterable[str] = ()) -> StoreCounts:
        """Wait until everything submitted is committed; count what the store holds for
        ``episode_ids`` (the episodes the run read)."""
        from ..storage.arrow import registered

        while self._jobs:
            self._wait_oldest()
        self.pipeline.stop(STORE_TIMEOUT_S)
        self._closed = True
        stats = self.pipeline.stats
        cur = self.db.cursor()
        try:
            with registered(cur, "offline_episodes", {"episode_id": sorted(set(episode_ids))}):
                counts = [cur.execute(f"select count(*) from {table} join offline_episodes "
                                      "using (episode_id)").fetchall()[0][0]
                          for table in ("episodes", "tool_calls", "detections")]
        finally:
            cur.close()
        return StoreCounts(self.db.path, stats.spans_stored, stats.spans_duplicate, *counts)

    def report(self, episode: EpisodeRecord, *, mode: str = "enforce",
               steps: Sequence[Step] | None = None,
               numbers: Sequence[int] | None = None) -> EpisodeReport:
        """What the store's detection found in ``episode`` (after ``finish``), in
        ``loopscope analyze``'s shape; an episode no longer in the pipeline's memory is
        re-run from the store. ``steps`` and ``numbers`` as ``detected_report``'s (a run read
        from OTLP JSON: its rows' steps; default: the Episode JSONL record's own)."""
        from ..pipeline.detection import detected_report

        detector = self.pipeline.detector
        monitor = detector.monitor(episode.episode_id)
        if monitor is None:
            detector.add(episode.episode_id, (), task_type=episode.task_type)
            monitor = detector.monitor(episode.episode_id)
            assert monitor is not None  # just added
            detector.forget(episode.episode_id)
        return detected_report(episode, monitor, mode=mode, steps=steps, numbers=numbers)

    def close(self) -> None:
        """Stop the pipeline (if still running) and close the file."""
        if not self._closed:
            self.pipeline.stop(STORE_TIMEOUT_S)
            self._closed = True
        self.db.close()
