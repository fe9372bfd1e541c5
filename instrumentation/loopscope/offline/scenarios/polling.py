"""Waiting and paging: repeated calls that are legitimate until they are not.

A poll repeats the same call on purpose: the server's state can still change. It becomes a
loop only once the deadline is past (``deadline_s`` on the poll steps, measured from the first
poll; the detector assumes 300 s when absent). Paging repeats one tool with a new cursor each
time; it is stuck when the returned ``next_cursor`` stops advancing. ``check_background_tasks``
is the exempt poll tool: identical polls with ``kind`` null, allowed by name.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from ._episode import EpisodeBuilder


class _Op(NamedTuple):
    start: str
    start_args: dict[str, Any]
    poll: str
    id_key: str
    read: str
    task: str


_OPS = (
    _Op(
        "start_export",
        {"report": "orders", "format": "csv"},
        "get_operation_status",
        "operation_id",
        "get_export_part",
        "Export all open orders to CSV and send me the files.",
    ),
    _Op(
        "trigger_build",
        {"branch": "main", "target": "release"},
        "get_build_status",
        "build_id",
        "get_build_artifact",
        "Build a release from main and give me the artifact checksums.",
    ),
    _Op(
        "start_reindex",
        {"index": "products"},
        "get_operation_status",
        "operation_id",
        "get_reindex_report",
        "Rebuild the product search index and report what changed.",
    ),
)


def _start(rng: random.Random, shape: str, variant: int) -> tuple[EpisodeBuilder, _Op, dict[str, Any]]:
    """Begin the episode and start the long-running operation; return the poll args too."""
    op = _OPS[variant % len(_OPS)]
    b = EpisodeBuilder(rng, shape, variant, op.task, "polling")
    args = {op.id_key: f"op-{rng.getrandbits(32):08x}"}
    b.call(op.start, op.start_args, {**args, "state": "QUEUED"}, kind="write")
    b.say("Started; I'll poll until it finishes.")
    return b, op, args


def poll_legit(rng: random.Random, variant: int) -> dict[str, Any]:
    """RUNNING, RUNNING, ..., DONE within the deadline, then the agent proceeds.

    Variant 0: kind "poll", identical JSON state. Variant 1: kind null, progress changes every
    time. Variant 2: kind "poll", the literal text "RUNNING" until "DONE".
    """
    style = variant % 3
    b, op, args = _start(rng, "poll_legit", variant)
    running = rng.randint(3, 6)
    outputs: list[Any]
    if style == 0:
        outputs = [{**args, "state": "RUNNING"}] * running + [{**args, "state": "DONE"}]
    elif style == 1:
        steps = sorted(rng.sample(range(5, 96), running))
        outputs = [{**args, "state": "RUNNING", "progress": p} for p in steps]
        outputs.append({**args, "state": "DONE", "progress": 100})
    else:
        outputs = [*(["RUNNING"] * running), "DONE"]
    extra: dict[str, Any] = {"deadline_s": 300} if style != 1 else {}
    kind = "poll" if style != 1 else None
    interval = rng.uniform(8.0, 20.0)
    for output in outputs:
        b.call(op.poll, args, output, kind=kind, latency=interval + rng.uniform(0, 2), **extra)
    for part in (1, 2):
        checksum = f"{rng.getrandbits(64):016x}"
        b.call(op.read, {**args, "part": part}, {"part": part, "sha256": checksum})
    b.say("Done: both parts are ready; checksums above.")
    return b.finish(
        outcome="success",
        loop=False,
        kind="poll_legit",
        first_loop_step=None,
        why=f"{op.poll} repeated {len(outputs)}x while the job ran; DONE before the deadline",
    )


def poll_timeout(rng: random.Random, variant: int) -> dict[str, Any]:
    """Polling goes on past the deadline while the state never changes."""
    b, op, args = _start(rng, "poll_timeout", variant)
    deadline = 120 if variant % 2 == 0 else None
    extra: dict[str, Any] = {"deadline_s": deadline} if deadline else {}
    limit = deadline or 300
    interval = rng.uniform(20.0, 30.0) if deadline else rng.uniform(45.0, 60.0)
    output = {**args, "state": "RUNNING", "queue_position": rng.randint(2, 9)}
    first = b.call(op.poll, args, output, kind="poll", latency=interval, **extra)
    late: list[int] = []
    extra_polls = rng.randint(3, 6)
    while len(late) <= extra_polls:
        index = b.call(op.poll, args, output, kind="poll", latency=interval, **extra)
        if b.steps[index]["t"] - b.steps[first]["t"] > limit:
            late.append(index)
    return b.finish(
        outcome="failure",
        loop=True,
        kind="poll_timeout",
        first_loop_step=late[0],
        why=f"{op.poll} still RUNNING and still polled {len(late)}x after the {limit}s deadline",
    )


def poll_exempt(rng: random.Random, variant: int) -> dict[str, Any]:
    """check_background_tasks polled with identical output, then a change; exempt by name."""
    task_id = f"bg-{rng.randint(10, 99)}"
    name = ("reindex", "thumbnail-render", "nightly-backup")[variant % 3]
    b = EpisodeBuilder(
        rng,
        "poll_exempt",
        variant,
        f"Wait for the {name} task to finish and report.",
        "polling",
    )
    same = rng.randint(3, 5)
    running = {"tasks": [{"id": task_id, "name": name, "status": "running"}]}
    done = {"tasks": [{"id": task_id, "name": name, "status": "completed", "errors": 0}]}
    for output in [running] * same + [done]:
        b.call("check_background_tasks", {}, output, kind=None, latency=rng.uniform(5.0, 12.0))
    b.call("get_task_log", {"task_id": task_id}, f"{name}: finished, 0 errors, 1 warning")
    b.say(f"The {name} task completed with no errors and one warning.")
    return b.finish(
        outcome="success",
        loop=False,
        kind="none",
        first_loop_step=None,
        why=f"check_background_tasks is an exempt poll; its output changed after {same} checks",
    )


class _Listing(NamedTuple):
    tool: str
    base_args: dict[str, Any]
    item_prefix: str
    detail_tool: str
    detail_key: str
    noun: str


_LISTINGS = (
    _Listing("list_orders", {"status": "open"}, "ORD", "get_order", "order_id", "orders"),
    _Listing("list_files", {"dir": "src"}, "src/f", "stat_file", "path", "files"),
    _Listing(
        "list_category_pages",
        {"category": "Ancient_astronomy"},
        "Page",
        "wiki_page",
        "title",
        "pages",
    ),
)


def _page(rng: random.Random, prefix: str, page: int, next_cursor: str | None) -> dict[str, Any]:
    """One page of three new items and the cursor of the next page (None on the last)."""
    items = [f"{prefix}-{page}{i}{rng.randint(100, 999)}" for i in range(3)]
    return {"items": items, "next_cursor": next_cursor}


def cursor_stuck(rng: random.Random, variant: int) -> dict[str, Any]:
    """The server hands back the cursor it was given; the agent keeps asking for that page."""
    listing = _LISTINGS[variant % len(_LISTINGS)]
    tool, base, prefix = listing.tool, listing.base_args, listing.item_prefix
    task = f"Count all {listing.noun} in the listing."
    b = EpisodeBuilder(rng, "cursor_stuck", variant, task, "lookup")
    cursors = [f"c_{rng.getrandbits(32):08x}" for _ in range(rng.randint(1, 2))]
    args: dict[str, Any] = dict(base)
    for page, cursor in enumerate(cursors):
        b.call(tool, args, _page(rng, prefix, page, cursor))
        args = {**base, "cursor": cursor}
    stuck = _page(rng, prefix, len(cursors), cursors[-1])
    repeats = rng.randint(4, 8)
    indexes = []
    for i in range(repeats):
        limit = {"limit": (50, 100)[i % 2]} if variant % 2 else {}
        indexes.append(b.call(tool, {**args, **limit}, stuck))
        b.think(0.3, ("Fetching the next page.",))
    return b.finish(
        outcome="failure",
        loop=True,
        kind="cursor_stuck",
        first_loop_step=indexes[1],
        why=f"{tool} returned next_cursor={cursors[-1]!r} {repeats}x: the page never advances",
    )


def cursor_legit(rng: random.Random, variant: int) -> dict[str, Any]:
    """Pagination that advances through 4-6 pages to the end, then two detail reads."""
    listing = _LISTINGS[variant % len(_LISTINGS)]
    tool, base, prefix = listing.tool, listing.base_args, listing.item_prefix
    task = f"List all {listing.noun} and show details of the first two."
    b = EpisodeBuilder(rng, "cursor_legit", variant, task, "lookup")
    pages = rng.randint(4, 6)
    args: dict[str, Any] = dict(base)
    first_items: list[str] = []
    for page in range(pages):
        cursor = f"c_{rng.getrandbits(32):08x}" if page < pages - 1 else None
        output = _page(rng, prefix, page, cursor)
        first_items = first_items or output["items"]
        b.call(tool, args, output)
        args = {**base, "cursor": cursor}
    for item in first_items[:2]:
        key = listing.detail_key
        b.call(listing.detail_tool, {key: item}, {key: item, "size": rng.randint(1, 900)})
    b.say(f"There are {3 * pages} {listing.noun}; details of the first two are above.")
    return b.finish(
        outcome="success",
        loop=False,
        kind="none",
        first_loop_step=None,
        why=f"{tool} followed an advancing cursor through {pages} pages to the end",
    )
