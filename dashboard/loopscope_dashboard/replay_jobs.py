"""The Policy page's replays, run behind the page and kept for every session, and across
dashboard restarts.

A replay of the stored runs takes from a second to minutes (the reads, rows into runs, the
detection core over every run, twice). The page never waits for one: it shows the newest
finished replay of what it asks for (a ``View``: which runs, the current policy, the
candidate), even one of older data, says when it ran, and meanwhile a replay of the data as it
is now runs on a thread of its own; the page redraws when it lands. Results are kept for the
whole dashboard process (``st.cache_resource``), so a fresh browser, a copied URL or a second
user sees them at once; and in files (``KeptReplays``, one per source and view), so the first
visit after the dashboard restarts shows the last result at once too. While a collector is
live, the default view is replayed ``WARM_AFTER_S`` after the dashboard's first page has drawn
(``warm``: not during that first visit, which it would slow), so the page's first visit finds
it done; that replay runs whole (reads, runs, detection, the file kept) in a worker process
of the idle scheduling class, so the pages opened meanwhile do not wait for the dashboard's
interpreter.

Replays are keyed by the data version (``replays.data_version``) and the policy in a
``replays.ReplayCache``; a view is replayed again only when ``data_stamp()`` (how many runs,
the newest run and label: two small reads) changed, so a refresh of unchanged data, or a
restart on it, replays nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pickle
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pandas as pd
import streamlit as st

from loopscope.detect import Policy

from . import queries, replays
from .environment_variables import REPLAY_CACHE_ENV
from .replay_runs import lower_priority

logger = logging.getLogger(__name__)

DEFAULT_NEWEST: Final = 2_000
"""How many of the newest runs the page replays unless told otherwise."""
REFRESH_S: Final = 30.0
"""A live collector's data is replayed again when it changed (``data_stamp``) and the newest
replay is older than this."""
KEPT: Final = 16
"""Finished replays kept (the newest per view), in memory and in files."""
WARM_AFTER_S: Final = 5.0
"""How long after the first page has drawn the dashboard replays the Policy page's default
view (``warm``): the replay holds a core, so it waits for the first visit to settle (its
browser draws for a second or two after the script ends), but not much longer: at 20 s a
visit to the Policy page some 25 s after the start (the bench's order of pages) found the
replay under way and waited for it (demo store 4.0 s, 1,000,000 calls 8.0 s)."""


@dataclass(frozen=True, slots=True)
class View:
    """What the page shows: the runs (the reads' parameters, sorted) and the two policies (as
    policy files hold them)."""

    params: tuple[tuple[str, Any], ...]
    current: str
    candidate: str

    @classmethod
    def of(cls, params: Mapping[str, Any], current: Policy, candidate: Policy) -> View:
        """The view of ``params`` (``queries.replay_episodes``' arguments) and two policies."""
        return cls(tuple(sorted(params.items())), replays.to_json(current),
                   replays.to_json(candidate))


@dataclass(frozen=True, slots=True)
class Replayed:
    """A finished replay of a view: the runs, each policy's verdicts, and how many runs a
    guard reported on with those where the replay under the current policy differs."""

    view: View
    version: str
    runs: list[replays.StoredRun]
    current: list[replays.PolicyVerdict]
    candidate: list[replays.PolicyVerdict]
    guarded: tuple[int, pd.DataFrame]
    finished_at: float
    stamp: tuple[Any, ...] = ()
    """``data_stamp()`` when the replay started."""
    restored: bool = False
    """Read back from ``KeptReplays``: finished before the dashboard (re)started."""


READING: Final = "Reading the stored runs"
ELSEWHERE: Final = "Replaying in the background"
"""A replay run in a worker process (``ReplayJobs.request``'s ``elsewhere``) tells no steps."""


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a running replay is: ``done`` of ``total`` runs of the policy ``label``."""

    done: int = 0
    total: int = 0
    label: str = READING


class KeptReplays:
    """Finished replays in files, the newest per (source, view), so a restarted dashboard
    shows the last result at once: ``$LOOPSCOPE_REPLAY_CACHE``, else the user's cache folder
    (``$XDG_CACHE_HOME/loopscope/replays`` or ``~/.cache/loopscope/replays``); an empty
    ``$LOOPSCOPE_REPLAY_CACHE`` keeps none. The files are pickles this dashboard wrote (the
    runs, verdicts and tables as the page shows them), in a folder only the user can write; a
    file that cannot be read back (another loopscope version, cut short) is ignored."""

    def __init__(self, source: str, folder: Path | None = None) -> None:
        self.source = source
        self.folder = folder if folder is not None else kept_folder()

    def _path(self, view: View) -> Path | None:
        if self.folder is None:
            return None
        key = hashlib.blake2b(f"{self.source}\x00{view!r}".encode(), digest_size=16)
        return self.folder / f"{key.hexdigest()}.pickle"

    def load(self, view: View) -> Replayed | None:
        """The kept replay of ``view`` from this source, marked ``restored``; None when none
        is kept or it cannot be read."""
        path = self._path(view)
        if path is None or not path.is_file():
            return None
        try:
            kept = pickle.loads(path.read_bytes())  # written by ``save`` only
        except Exception:  # another version's classes, a file cut short
            logger.warning("ignoring the kept replay %s: it cannot be read back", path)
            return None
        if not isinstance(kept, Replayed) or kept.view != view:
            return None
        return dataclasses.replace(kept, restored=True)

    def save(self, done: Replayed) -> None:
        """Write ``done`` (atomically: a reader never sees half a file), and drop the oldest
        files beyond ``KEPT``. A folder that cannot be written only costs the next restart
        its head start."""
        path = self._path(done.view)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp",
                                             delete=False) as out:
                out.write(pickle.dumps(dataclasses.replace(done, restored=False)))
            os.replace(out.name, path)
            files = sorted(path.parent.glob("*.pickle"), key=lambda p: p.stat().st_mtime)
            for old in files[:-KEPT]:
                old.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("cannot keep the Policy page's replay in %s: %s", path.parent, exc)


def kept_folder() -> Path | None:
    """Where ``KeptReplays`` writes (see there); None when ``$LOOPSCOPE_REPLAY_CACHE`` is
    set empty."""
    chosen = os.environ.get(REPLAY_CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen else None
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "loopscope" / "replays"


class ReplayJobs:
    """Finished replays by view, and the one thread that runs new ones (replays are CPU-bound
    and a big one spreads over processes of its own; two at once would only slow both)."""

    def __init__(self, kept: KeptReplays | None = None) -> None:
        self._lock = threading.Lock()
        self._kept = kept
        self._done: OrderedDict[View, Replayed] = OrderedDict()
        self._looked: set[View] = set()
        """Views already looked up in ``_kept``."""
        self._running: dict[View, Progress] = {}
        self._caches: OrderedDict[str, replays.ReplayCache] = OrderedDict()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopscope-replay")
        self.warmed = False

    @property
    def replay_count(self) -> int:
        """How many replays of a policy actually ran (the rest came from the cache)."""
        with self._lock:
            return sum(cache.replays for cache in self._caches.values())

    def latest(self, view: View) -> Replayed | None:
        """The newest finished replay of ``view``, of whatever data version (one kept from
        before the dashboard started, when it has not replayed ``view`` since)."""
        with self._lock:
            return self._finished(view)

    def _finished(self, view: View) -> Replayed | None:
        """``latest`` with the lock held; reads ``_kept`` the first time ``view`` is asked."""
        done = self._done.get(view)
        if done is None and self._kept is not None and view not in self._looked:
            self._looked.add(view)
            done = self._kept.load(view)
            if done is not None:
                self._done[view] = done
        return done

    def running(self, view: View) -> Progress | None:
        """How far the replay of ``view`` under way is; None when none is."""
        with self._lock:
            return self._running.get(view)

    def request(self, view: View, current: Policy, candidate: Policy, *,
                fresh_for: float, stamp: tuple[Any, ...] = (), elsewhere: bool = False
                ) -> None:
        """Start replaying ``view`` on the data as it is now, unless a replay of it is under
        way, or the newest finished one was of the same ``stamp`` (``data_stamp()``: the data
        did not change) or, in this dashboard process, is younger than ``fresh_for`` seconds.
        A replay that would change nothing would still read every run and hold the
        dashboard's CPU meanwhile. ``elsewhere``: the whole replay (its reads too) runs in a
        worker process of the idle scheduling class, which leaves this process free for the
        pages being drawn (the warm-up: nobody watches its progress)."""
        with self._lock:
            done = self._finished(view)
            if view in self._running or (done is not None and (
                    done.stamp == stamp or (not done.restored
                                            and time.time() - done.finished_at < fresh_for))):
                return
            self._running[view] = Progress(label=ELSEWHERE if elsewhere else READING)
        self._pool.submit(self._run, view, current, candidate, stamp, elsewhere)

    def wait(self, view: View, timeout_s: float) -> Replayed | None:
        """``latest(view)`` once the replay under way lands, or after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.running(view) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.latest(view)

    def replay_for(self, version: str) -> replays.Replay:
        """A ``Replay`` of one data version that answers from the shared cache (the sweep and
        calibration use it on the page's thread)."""
        return self._cache(version).replay(version)

    def _cache(self, version: str) -> replays.ReplayCache:
        """The shared cache of one data version (the two newest versions are kept)."""
        with self._lock:
            cache = self._caches.get(version)
            if cache is None:
                cache = self._caches[version] = replays.ReplayCache()
                while len(self._caches) > 2:  # the data as it is now, and as it was
                    self._caches.popitem(last=False)
        return cache

    def _run(self, view: View, current: Policy, candidate: Policy,
             stamp: tuple[Any, ...], elsewhere: bool) -> None:
        try:
            if elsewhere:
                with replays.worker_pool(1, _background_worker) as pool:
                    with replays.neutral_main():  # the worker is spawned here
                        future = pool.submit(_replay_and_keep, view, current, candidate,
                                             stamp, self._kept)
                    done = future.result()
                cache = self._cache(done.version)  # the sweep and calibration start from it
                cache.keep(done.version, current, done.current)
                cache.keep(done.version, candidate, done.candidate)
                self._store(done, keep=False)  # (the worker kept it)
            else:
                self._store(replay_view(view, current, candidate, stamp,
                                        replay_for=self.replay_for,
                                        progress=self._progress(view)))
        except Exception:  # the page says it failed only by showing the older result
            logger.exception("the Policy page's replay failed")
        finally:
            with self._lock:
                self._running.pop(view, None)

    def _progress(self, view: View) -> Callable[[str], Callable[[int, int], None]]:
        """``replay_view``'s ``progress``: each step shown as ``running(view)``."""
        def of(label: str) -> Callable[[int, int], None]:
            def step(done: int, total: int) -> None:
                with self._lock:
                    self._running[view] = Progress(done, total, label)
            return step
        return of

    def _store(self, done: Replayed, *, keep: bool = True) -> None:
        with self._lock:
            self._done.pop(done.view, None)
            self._done[done.view] = done
            while len(self._done) > KEPT:
                self._done.popitem(last=False)
        if keep and self._kept is not None:
            self._kept.save(done)


def replay_view(view: View, current: Policy, candidate: Policy, stamp: tuple[Any, ...], *,
                replay_for: Callable[[str], replays.Replay] | None = None,
                progress: Callable[[str], Callable[[int, int], None]] | None = None
                ) -> Replayed:
    """Replay ``view`` on the data as it is now: read its runs, replay them under both
    policies (through ``replay_for(data version)``; default: in this process, each policy
    once), and set the current policy's verdicts against what the guards did.
    ``progress(label)`` gives each policy's progress callback."""
    params = dict(view.params)
    runs = replays.stored_runs(queries.replay_episodes(**params),
                               queries.replay_calls(**params))
    version = replays.data_version(runs)
    replay = (replay_for(version) if replay_for is not None
              else replays.ReplayCache(workers=1).replay(version))
    was = replay(runs, current, progress=progress("Current policy") if progress else None)
    now = replay(runs, candidate,
                 progress=progress("Candidate policy") if progress else None)
    # every call a guard reported has a row; the newest ones cover the runs replayed
    decisions = queries.guard_decisions(service=params.get("service"),
                                        limit=2 * sum(r.calls for r in runs) + 1)
    guarded = replays.against_guards(runs, was, decisions)
    return Replayed(view, version, runs, was, now, guarded, time.time(), stamp)


def _replay_and_keep(view: View, current: Policy, candidate: Policy, stamp: tuple[Any, ...],
                     kept: KeptReplays | None) -> Replayed:
    """``replay_view``, kept in ``kept`` (in the worker process: writing the file is a pickle
    of every run, which the dashboard's pages need not wait for)."""
    done = replay_view(view, current, candidate, stamp)
    if kept is not None:
        kept.save(done)
    return done


def _background_worker() -> None:
    """The initializer of the process a replay runs in ``elsewhere``: the idle scheduling
    class (``lower_priority``), and Streamlit's caches used without a page (queries' reads
    are cached for pages) without a warning for each."""
    lower_priority()
    logging.getLogger("streamlit.runtime.caching").setLevel(logging.ERROR)


@st.cache_resource(show_spinner=False)
def jobs() -> ReplayJobs:
    """The dashboard process's replays, shared by every session, kept across restarts for
    the source it reads."""
    return ReplayJobs(KeptReplays(queries.source_description()))


def current_policy(recorded: pd.DataFrame, pick: int = 0) -> Policy:
    """The policy the guards recorded on the runs (``queries.guard_policies``' row ``pick``,
    the most used first), or the defaults when none did."""
    if recorded.empty:
        return replays.build({})
    return replays.build(json.loads(recorded["policy"].iloc[pick] or "{}"),
                         source="the policy the guards recorded")


def data_stamp() -> tuple[Any, ...]:
    """What the replays depend on, cheaply: how many runs, the run with the newest activity
    (its calls and flags) and the newest label (a new run, call, flag or label changes it).
    Equal stamps mean a replay would give the same."""
    runs, total = queries.runs(limit=1)
    labels = queries.labels(limit=1)
    run = () if runs.empty else tuple(str(v) for v in runs.iloc[0][
        ["episode_id", "end_ns", "tool_calls", "flags"]])
    label = () if labels.empty else tuple(str(v) for v in labels.iloc[0][
        ["episode_id", "span_id", "label", "labelled_at"]])
    return (total, *run, *label)


def warm() -> None:
    """Replay the page's default view (the newest ``DEFAULT_NEWEST`` runs, the candidate as
    the current policy) in a worker process ``WARM_AFTER_S`` from now, once per dashboard
    process, while the source is a live collector (a file is replayed on the page's first
    visit). Nothing is replayed when the kept result is of the data as it is now."""
    shared = jobs()
    if shared.warmed or not queries.source_is_live():
        return
    shared.warmed = True
    timer = threading.Timer(WARM_AFTER_S, _warm_default, (shared,))
    timer.name, timer.daemon = "loopscope-replay-warm", True
    timer.start()


def _warm_default(shared: ReplayJobs) -> None:
    try:
        params = {"limit": DEFAULT_NEWEST}
        current = current_policy(queries.guard_policies(**params))
        shared.request(View.of(params, current, current), current, current,
                       fresh_for=REFRESH_S, stamp=data_stamp(), elsewhere=True)
    except Exception:  # the page replays on its first visit instead
        logger.exception("the Policy page's warm-up replay could not start")
