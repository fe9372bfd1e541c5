"""Runs whose spans were partly lost on the way to the store, as an agent's exporter drops
them when its queue overflows or the collector is down: one agent through the real SDK, in
observe and in enforce mode, then some of its calls' spans left out. The Episode page must
keep the agent's numbers for the calls that arrived, name the gaps, and say "would stop" and
"stopped" at the call the agent's own log named."""

from __future__ import annotations

import logging
import re
from typing import Final

from opentelemetry.sdk.trace import ReadableSpan

import loopscope
from loopscope import conventions as c
from loopscope.testing import capture_spans

LOST: Final = {"lossy-observe": {2, 3, 4}, "lossy-enforce": {2, 3, 4, 8}}
"""The calls whose spans are left out, by run: three in the middle of each run and, in the
enforce run, the call its guard stopped (the run's last: only its final span tells it was
made)."""
AGENT: Final = "lossy-agent"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def lossy_spans() -> tuple[list[ReadableSpan], dict[str, int]]:
    """The two runs' spans without the ``LOST`` calls, and the call at which each run's
    guard said it stopped or would stop: the observe run's from the agent's log line, the
    enforce run's from its ``LoopDetected`` (the stop's diagnostic)."""

    @loopscope.tool(kind="read")
    def get_order(order_id: str) -> str:
        return f"order {order_id}: in transit"

    @loopscope.tool(kind="read")
    def search_orders(query: str) -> str:
        return "no orders match"

    log = logging.getLogger("loopscope")
    lines = _Lines()
    log.addHandler(lines)
    level = log.level
    log.setLevel(logging.WARNING)  # (another test may have quietened it: `loopscope demo` does)
    stops: dict[str, int] = {}
    spans: list[ReadableSpan] = []
    try:
        for mode in ("observe", "enforce"):
            run = f"lossy-{mode}"
            with capture_spans(mode=mode, service_name="lossy-svc") as captured:
                try:
                    with loopscope.episode(task="find the late parcel", episode_id=run,
                                           agent_name=AGENT):
                        for order in ("A-1", "A-2", "A-3"):
                            get_order(order)
                        for _ in range(8):
                            search_orders("late parcel")
                except loopscope.LoopDetected as stop:
                    stops[run] = int(stop.diagnostic["call"])
            calls = sorted((s for s in captured.spans() if s.name.startswith(c.OP_EXECUTE_TOOL)),
                           key=lambda s: s.start_time or 0)  # (call 1 first, as the agent ran them)
            lost = {id(span) for n, span in enumerate(calls, 1) if n in LOST[run]}
            spans += [s for s in captured.spans() if id(s) not in lost]
    finally:
        log.removeHandler(lines)
        log.setLevel(level)
    [said] = [line for line in lines.lines if "enforce would stop run lossy-observe" in line]
    found = re.search(r" at call (\d+) \(", said)
    assert found is not None, said
    stops["lossy-observe"] = int(found.group(1))
    return spans, stops
