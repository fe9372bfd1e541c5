"""The banner a page shows while its collector does not answer, and the watcher that notices.

Every page keeps showing what it last read (``queries`` answers from the last good read while
the collector is unreachable); this says so, with the time of that read, instead of a
traceback. The watcher is a fragment that asks the collector every few seconds; when the
answer changes (it went away, or it is back) it reruns the whole page once, so the banner
appears, or clears and fresh data replaces the old, without the user doing anything.

Under ``loopscope up``, which restarts a part that dies, the watcher also says which parts
were restarted, how often and when (from the file ``up`` names in ``$LOOPSCOPE_UP_STATUS``):
a collector killed and back a minute ago leaves no other trace on the pages.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final

import streamlit as st

from . import queries, restarts, state
from .environment_variables import UP_STATUS_ENV

WATCH_EVERY: Final = "3s"


def watch() -> None:
    """Draw the banner where it is called, and keep watching while the source is live."""
    try:
        live = queries.source_is_live()
    except queries.SourceError:  # no source at all: the entrypoint says why
        return
    if live:
        st.fragment(_watch, run_every=WATCH_EVERY)()


def _watch() -> None:
    now = queries.probe()
    if now.down_since != st.session_state.get(state.SOURCE_DOWN):
        st.session_state[state.SOURCE_DOWN] = now.down_since
        st.rerun(scope="app")  # redraw the page: stale data with the banner, or fresh without
    if now.down_since is not None:
        st.warning(message(now), icon=":material/cloud_off:")
    status = os.environ.get(UP_STATUS_ENV)
    for part in restarts.read(Path(status)) if status else []:
        st.info(restarted(part), icon=":material/restart_alt:")


def message(now: queries.Connection) -> str:
    """The banner's text: since when the collector is unreachable and how old the data is."""
    since = _clock(now.down_since)
    if now.last_good_at is None:
        data = "No data could be read yet."
    else:
        data = (f"The data shown is as of {_clock(now.last_good_at)}, the last good read; "
                "parts never read before are missing.")
    reason = now.reason.rstrip(".")
    return (f"**The collector is not answering** (since {since}): {reason}. {data} This clears "
            "by itself when the collector is back.")


def restarted(part: restarts.Restarts) -> str:
    """The banner's text for a part ``loopscope up`` started again after it died."""
    times = "once" if part.restarts == 1 else f"{part.restarts} times"
    return (f"**The {part.part} was restarted** {times} by `loopscope up`, last at "
            f"{_clock(part.last_restart_at)} (it had ended: "
            f"{restarts.how_it_ended(part.last_exit)}). What it printed is in the terminal "
            "running `loopscope up`.")


def _clock(epoch_s: float | None) -> str:
    if epoch_s is None:
        return "—"
    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch_s))
