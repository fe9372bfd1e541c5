"""A lake collector's own housekeeping: DuckLake's functions (``ducklake.imports.maintain``: merge
the small files that its commits leave, rewrite files heavy with deletes, expire old
snapshots, delete the files no snapshot needs) every ``--lake-maintain-every``, run by the
pipeline thread between two batches (docs/deploy.md, "Housekeeping").

Why the collector runs it, and so often: every commit writes a small Parquet file per table it
touches, and both the reads and the collector's own commits (which look up keys and episodes
in the lake) open every file. After 600 commits of 100 spans a commit took 1.9× as long as the
first ones and the dashboard's reads 14× as long as over a compact lake; with this every 30 s
the commits stayed within 1.25×, and one run brought the reads to 1.4× (BENCHMARKS.md,
"Collectors into one DuckLake"). On the pipeline thread, a collector's merge
never races its own commits; the first run comes after a random part of the period, so N
collectors started together take turns. A run that fails (the catalog down, or another
collector's housekeeping committed first) is logged and tried again next period: ingest goes
on either way.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import Store

logger = logging.getLogger(__name__)

DEFAULT_EVERY_S = 300.0
"""Five minutes: some 400 to 1,500 commits of a collector under full load (a batch took
0.2–0.7 s in the benchmarks), far fewer under light load."""
MERGE_BELOW_BYTES = 32_000_000
"""A collector merges only files smaller than this (``maintain``'s ``merge_below``): over a
lake of 1,000,000 calls (60 MB) a run that merged everything took 2.5 s, rewriting the big
files again; bounded, it took 0.1 s. Files end up 32 MB or more; ``loopscope lake maintain``
merges those too."""
DEFAULT_KEEP = "1 days"
"""Snapshots (time travel) and unused files younger than this are kept."""


class LakeHousekeeping:
    """``ducklake.imports.maintain`` over ``db`` every ``every_s`` seconds (0: never), when the
    pipeline thread calls ``tick`` between batches; counts its runs and failures."""

    def __init__(self, db: Store, every_s: float = DEFAULT_EVERY_S,
                 keep: str = DEFAULT_KEEP) -> None:
        self.db = db
        self.every_s = every_s
        self.keep = keep
        self.runs = 0
        self.failures = 0
        self.last_s: float | None = None
        """How long the last run took."""
        self._due = time.monotonic() + every_s * random.uniform(0.5, 1.0)
        self._failing = False

    def tick(self) -> bool:
        """Run the housekeeping when it is due; returns whether it ran (and succeeded)."""
        if self.every_s <= 0 or time.monotonic() < self._due:
            return False
        from .imports import maintain

        started = time.monotonic()
        try:
            done = maintain(self.db, self.keep, merge_below=MERGE_BELOW_BYTES)
        except Exception as exc:  # the store's fault or a race: ingest goes on, retry later
            self.failures += 1
            if not self._failing:
                logger.warning("loopscope collector: lake housekeeping failed (tried again "
                               "every %.0f s): %s: %s", self.every_s, type(exc).__name__,
                               str(exc).split("\n", 1)[0])
            self._failing = True
            return False
        finally:
            self._due = time.monotonic() + self.every_s * random.uniform(0.9, 1.1)
        self.last_s = time.monotonic() - started
        self.runs += 1
        if self._failing:
            logger.warning("loopscope collector: lake housekeeping works again")
        self._failing = False
        logger.info("loopscope collector: lake housekeeping in %.2f s: %s", self.last_s,
                    ", ".join(f"{step} {count}" for step, count in done.items()))
        return True
