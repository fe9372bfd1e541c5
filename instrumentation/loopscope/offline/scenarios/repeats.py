"""Healthy lookups and the exact-repeat loops that look most like them.

An exact repeat is the same tool with the same canonical arguments returning the same output
(tool name + normalised args + model-visible output). The healthy shapes here make
many calls too, but every call is new, so a detector that fires on them is a false kill.
"""

from __future__ import annotations

import random
from typing import Any

from ._episode import EpisodeBuilder
from .domains import DOMAINS, Call, pick_domain, take

RETRY_THOUGHTS = (
    "Let me run that again to be sure.",
    "The result looks incomplete; trying the same lookup once more.",
    "I'll double-check with the same call.",
    "Maybe it was a transient glitch. Retrying.",
)


def _healthy(b: EpisodeBuilder, calls: list[Call], answer: str) -> dict[str, Any]:
    for i, call in enumerate(calls):
        if i:
            b.think()
        b.call(*call)
    b.say(answer)
    return b.finish(
        outcome="success",
        loop=False,
        kind="none",
        first_loop_step=None,
        why=f"{len(calls)} distinct calls, each returning new output, then a final answer",
    )


def healthy_lookup(rng: random.Random, variant: int) -> dict[str, Any]:
    """4-9 distinct reads (odd variants make more than five), each new, then an answer."""
    domain = pick_domain(rng, variant)
    n = rng.randint(6, 9) if variant % 2 else rng.randint(4, 5)
    b = EpisodeBuilder(rng, "healthy_lookup", variant, domain.task, domain.task_type)
    return _healthy(b, take(domain, n), domain.answer)


def seed001_long_healthy(rng: random.Random, variant: int) -> dict[str, Any]:
    """A coding task needing 8-12 distinct tool rounds completes normally."""
    domain = DOMAINS["files"](rng)
    b = EpisodeBuilder(rng, "seed001_long_healthy", variant, domain.task, domain.task_type)
    return _healthy(b, take(domain, rng.randint(8, 12)), domain.answer)


def _spin(b: EpisodeBuilder, call: Call, total: int) -> int:
    """Call ``call`` ``total`` times in a row; return the index of the 2nd call."""
    indexes = []
    for i in range(total):
        if i:
            b.think(0.3, RETRY_THOUGHTS)
        indexes.append(b.call(*call))
    return indexes[1]


def read_spin(rng: random.Random, variant: int) -> dict[str, Any]:
    """The classic read spin: the same search 4-7 times in a row, same result."""
    domain = pick_domain(rng, variant)
    b = EpisodeBuilder(rng, "read_spin", variant, domain.task, domain.task_type)
    for call in take(domain, rng.randint(1, 2)):
        b.call(*call)
    total = rng.randint(4, 7)
    first_loop = _spin(b, domain.search, total)
    return b.finish(
        outcome="failure",
        loop=True,
        kind="exact_repeat",
        first_loop_step=first_loop,
        why=f"{domain.search.tool} called {total}x in a row with identical args and result",
    )


def seed001_repeated_read(rng: random.Random, variant: int) -> dict[str, Any]:
    """read_file("lib/agent-builtins.ts") again and again, same content."""
    path = "lib/agent-builtins.ts"
    b = EpisodeBuilder(
        rng,
        "seed001_repeated_read",
        variant,
        "Explain how the built-in read tool resolves project paths.",
        "coding",
    )
    b.call("list_dir", {"path": "lib"}, "lib/agent-builtins.ts\nlib/agent-loop.ts\nlib/paths.ts")
    args = {"path": path} if variant % 2 == 0 else {"path": path, "limit": 200}
    source = (
        "export const readTool = defineTool({\n  name: 'read',\n  async run({ path }) {\n"
        "    const abs = resolveProjectPath(path);\n    return fs.readFile(abs, 'utf8');\n"
        "  },\n});\n"
    )
    total = rng.randint(3, 7)
    first_loop = _spin(b, Call("read_file", args, source), total)
    return b.finish(
        outcome="failure",
        loop=True,
        kind="exact_repeat",
        first_loop_step=first_loop,
        why=f"read_file({path}) returned the same source {total}x; nothing new was learned",
    )


def seed000_reordered(rng: random.Random, variant: int) -> dict[str, Any]:
    """The same search with its argument keys reordered, same result each time."""
    query = ("policy", "refund policy", "data retention policy")[variant % 3]
    limit = rng.randint(1, 3)
    b = EpisodeBuilder(
        rng,
        "seed000_reordered",
        variant,
        f"Quote the key rule of our {query}.",
        "lookup",
    )
    output = {"results": [{"title": f"{query.title()} v{rng.randint(2, 9)}", "id": 17}]}
    total = rng.randint(3, 6)
    indexes = []
    for i in range(total):
        if i:
            b.think(0.3, RETRY_THOUGHTS)
        args = {"q": query, "limit": limit} if i % 2 == 0 else {"limit": limit, "q": query}
        indexes.append(b.call("search", args, output))
    return b.finish(
        outcome="failure",
        loop=True,
        kind="exact_repeat",
        first_loop_step=indexes[1],
        why="the same search repeated with only the argument key order changed",
    )


def window_repeat(rng: random.Random, variant: int) -> dict[str, Any]:
    """A doom loop: A, B, A, C, A, B, ...: A 3 times within any 6 calls."""
    domain = pick_domain(rng, variant)
    others = take(domain, rng.randint(2, 3))
    b = EpisodeBuilder(rng, "window_repeat", variant, domain.task, domain.task_type)
    total = rng.randint(4, 7)
    indexes = []
    for i in range(total):
        indexes.append(b.call(*domain.search))
        b.think(0.3)
        if i < total - 1:
            b.call(*others[i % len(others)])
    return b.finish(
        outcome="failure",
        loop=True,
        kind="exact_repeat",
        first_loop_step=indexes[1],
        why=f"{domain.search.tool} repeats identically every other call, {total}x in all",
    )


def budget_runaway(rng: random.Random, variant: int) -> dict[str, Any]:
    """A research agent making 42-56 distinct searches and page reads, never answering."""
    domain = DOMAINS["wiki"](rng)
    b = EpisodeBuilder(rng, "budget_runaway", variant, domain.task, domain.task_type)
    for i, call in enumerate(take(domain, rng.randint(42, 56))):
        if i:
            b.think(0.15)
        b.call(*call)
    return b.finish(
        outcome="failure",
        loop=False,
        kind="none",
        first_loop_step=None,
        why="no repetition, every output new; only a budget can stop it",
    )
