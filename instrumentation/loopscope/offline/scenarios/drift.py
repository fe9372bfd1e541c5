"""Loops that no exact-signature rule sees: fuzzy repeats, oscillation, jitter, stagnation.

Each call here differs from the last one, in its arguments or its tool, or the agent only
talks; yet nothing new comes back. As docs/detection.md puts it: "fingerprints are only signals, the object to
govern is no progress". The fuzzy look-alike is the control: long, different arguments with
new results each time.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ._episode import EpisodeBuilder
from .domains import Call, pick_domain, take

_FUZZY_EDITS: tuple[Callable[[str], str], ...] = (
    lambda s: s + " ",
    lambda s: s + ".",
    lambda s: s.replace("50", "51", 1),
    lambda s: s.replace("50", "49", 1),
    lambda s: s.replace(" and ", "  and ", 1),
    lambda s: s.replace(", ", ",", 1),
    lambda s: s[:1].swapcase() + s[1:],
)
"""Tiny edits; each changes a text containing "50", " and " and ", " by a character or two."""


def _fuzzy_base(rng: random.Random, variant: int) -> tuple[str, str, str, dict[str, Any], str]:
    """Tool name, argument key, a long base argument text, the output and the task."""
    if variant % 2 == 0:
        customer = f"C-{rng.randint(10000, 99999)}"
        sql = (
            f"select order_id, status, total from orders where customer_id = '{customer}' "
            "and status in ('open', 'held') and created_at >= '2024-01-01' "
            "order by created_at desc limit 50"
        )
        task = f"List the open orders of customer {customer}."
        return "run_query", "sql", sql, {"rows": [], "row_count": 0}, task
    topic = rng.choice(("solid-state battery", "perovskite solar cell", "mRNA vaccine"))
    query = (
        f"peer reviewed studies on {topic} degradation over the first 1000 cycles, "
        "with the test temperature and the lab that ran them, 2019-2024, limit 50"
    )
    output = {"results": [f"Review: {topic} lifetimes (2021)"], "hits": 1}
    return "literature_search", "query", query, output, f"Summarise {topic} durability data."


def fuzzy_repeat(rng: random.Random, variant: int) -> dict[str, Any]:
    """The fuzzy case: long args with tiny edits (3-gram Jaccard >= 0.8), same output."""
    tool, key, base, output, task = _fuzzy_base(rng, variant)
    task_type = "lookup" if key == "sql" else "research"
    b = EpisodeBuilder(rng, "fuzzy_repeat", variant, task, task_type)
    total = rng.randint(4, 7)
    indexes = [b.call(tool, {key: base}, output)]
    for edit in rng.sample(_FUZZY_EDITS, total - 1):
        b.think(0.4, ("No results; tweaking the query slightly.", "Let me rephrase it a bit."))
        indexes.append(b.call(tool, {key: edit(base)}, output))
    return b.finish(
        outcome="failure",
        loop=True,
        kind="param_jitter",
        first_loop_step=indexes[1],
        why=f"{tool} re-sent {total}x with near-identical long arguments and the same result",
    )


def fuzzy_lookalike(rng: random.Random, variant: int) -> dict[str, Any]:
    """Long arguments on one tool, each substantially different, each with new results."""
    customer = f"C-{rng.randint(10000, 99999)}"
    queries = [
        (
            f"select order_id, total from orders where customer_id = '{customer}' "
            "order by created_at desc limit 10",
            {"rows": [["ORD-1", 42.5]], "row_count": 1},
        ),
        (
            f"select sku, sum(quantity) as units from order_items join orders using (order_id) "
            f"where customer_id = '{customer}' group by sku",
            {"rows": [["SKU-7", 3]]},
        ),
        (
            "select warehouse, available from inventory where sku = 'SKU-7' "
            "and available > 0 order by available desc",
            {"rows": [["W2", 14], ["W1", 2]]},
        ),
        (
            f"select reason, count(*) from returns where customer_id = '{customer}' "
            "group by reason having count(*) > 0",
            {"rows": [["wrong size", 1]]},
        ),
        (
            "select carrier, avg(days_in_transit) from shipments where shipped_at > "
            "date '2024-01-01' group by carrier",
            {"rows": [["UPS", 2.8], ["DHL", 3.4]]},
        ),
    ]
    n = rng.randint(3, len(queries))
    b = EpisodeBuilder(
        rng,
        "fuzzy_lookalike",
        variant,
        f"Give me a purchasing profile of customer {customer}.",
        "lookup",
    )
    for i, (sql, rows) in enumerate(rng.sample(queries, n)):
        if i:
            b.think()
        b.call("run_query", {"sql": sql}, rows)
    b.say(f"Profile of {customer}: recent orders, favourite SKUs, stock and return history.")
    return b.finish(
        outcome="success",
        loop=False,
        kind="none",
        first_loop_step=None,
        why=f"{n} long SQL queries on different tables, each answering a new question",
    )


def oscillation(rng: random.Random, variant: int) -> dict[str, Any]:
    """A->B->A->B... (even variants) or A->B->C->A->B->C... (odd), same outputs each cycle."""
    domain = pick_domain(rng, variant)
    period = 2 + variant % 2
    cycle = take(domain, period)
    cycles = rng.randint(3, 5)
    b = EpisodeBuilder(rng, "oscillation", variant, domain.task, domain.task_type)
    starts = []
    for _ in range(cycles):
        for j, call in enumerate(cycle):
            index = b.call(*call)
            if j == 0:
                starts.append(index)
            b.think(0.25, ("Let me compare with the other record again.",))
    names = "->".join(call.tool for call in cycle)
    return b.finish(
        outcome="failure",
        loop=True,
        kind="oscillation",
        first_loop_step=starts[1],
        why=f"{names} cycled {cycles}x with identical results every cycle",
    )


def param_jitter(rng: random.Random, variant: int) -> dict[str, Any]:
    """read_file at offsets 0,1,0,1,... or tiny query edits; the output never changes."""
    total = rng.randint(4, 8)
    if variant % 2 == 0:
        path = rng.choice(("src/billing/core.py", "src/cart/rules.py", "app/settings.py"))
        chunk = f"# {path}\nimport decimal\n\nROUNDING = decimal.ROUND_HALF_UP\n"
        calls = [Call("read_file", {"path": path, "offset": i % 2}, chunk) for i in range(total)]
        task, task_type = f"Find where rounding is configured in {path}.", "coding"
    else:
        topic = rng.choice(("voyager golden record", "svalbard seed vault", "rosetta stone"))
        words = topic.split()
        queries = [
            topic,
            f"{topic} facts",
            " ".join(reversed(words)),
            topic.title(),
            f"the {topic}",
            f"{topic}?",
            f"{words[0]} {words[-1]}",
            f"about {topic}",
        ]
        output = {"results": [topic.title()], "hits": 1}
        calls = [Call("wiki_search", {"query": q}, output) for q in queries[:total]]
        task, task_type = f"Who curated the {topic}?", "research"
    b = EpisodeBuilder(rng, "param_jitter", variant, task, task_type)
    indexes = []
    for call in calls:
        indexes.append(b.call(*call))
        b.think(0.3, ("Slightly different arguments might show more.", "Adjusting and retrying."))
    return b.finish(
        outcome="failure",
        loop=True,
        kind="param_jitter",
        first_loop_step=indexes[1],
        why=f"{calls[0].tool} args nudged {total}x, every call returned the same output",
    )


def output_stagnation(rng: random.Random, variant: int) -> dict[str, Any]:
    """Different tools and arguments, all returning the same (or only id/time-stamped) output."""
    total = rng.randint(4, 7)
    if variant % 2 == 0:
        email = f"{rng.choice(('ana', 'kenji', 'omar'))}{rng.randint(10, 99)}@example.com"
        tries: list[tuple[str, dict[str, Any]]] = [
            ("search_orders", {"q": email}),
            ("find_customer", {"email": email}),
            ("get_order_history", {"email": email, "days": 90}),
            ("search_orders", {"q": email.split("@")[0]}),
            ("lookup_by_phone", {"phone": f"+49 151 {rng.randint(1000000, 9999999)}"}),
            ("get_order_history", {"email": email, "days": 365}),
            ("search_orders", {"q": email.upper()}),
        ]
        outputs: list[Any] = ['{"orders": [], "total": 0}'] * total
        task, task_type = f"Find the last order placed with {email}.", "lookup"
    else:
        host = rng.choice(("example-news.com", "journal.example.org"))
        tries = [
            (tool, {"url": f"https://{host}/{path}"})
            for tool, path in (
                ("fetch_url", "article/8812"),
                ("fetch_url", "amp/article/8812"),
                ("browse", "article/8812?print=1"),
                ("fetch_url", "m/article/8812"),
                ("browse", "archive/8812"),
                ("fetch_url", "article/8812/full"),
                ("browse", "search?q=8812"),
            )
        ]
        outputs = [
            {
                "status": 403,
                "message": "Access denied by bot protection. Enable JavaScript and cookies.",
                "request_id": f"req_{rng.getrandbits(40):010x}",
                "served_at": f"2025-03-04T10:{12 + i:02d}:{rng.randint(10, 59)}Z",
            }
            for i in range(total)
        ]
        task, task_type = f"Summarise the article 8812 on {host}.", "research"
    b = EpisodeBuilder(rng, "output_stagnation", variant, task, task_type)
    indexes: list[int] = []
    for (tool, args), output in zip(tries[:total], outputs, strict=True):
        if indexes:
            b.think(0.4, ("Nothing useful; trying a different route.",))
        indexes.append(b.call(tool, args, output))
    return b.finish(
        outcome="failure",
        loop=True,
        kind="output_stagnation",
        first_loop_step=indexes[1],
        why=f"{total} different calls all came back with the same "
        + ("empty result" if variant % 2 == 0 else "403 page, only id and time stamp differ"),
    )


def monologue(rng: random.Random, variant: int) -> dict[str, Any]:
    """A monologue: the model writes plans turn after turn and never calls a tool."""
    domain = pick_domain(rng, variant)
    b = EpisodeBuilder(rng, "monologue", variant, domain.task, domain.task_type)
    calls = take(domain, rng.randint(1, 3))
    for call in calls:
        b.call(*call)
    tool = calls[-1].tool
    plans = (
        f"Plan: 1) call {domain.search.tool} 2) call {tool} again 3) answer. Starting now.",
        f"Next I will call {domain.search.tool} to confirm, then summarise.",
        f"To be thorough: first {domain.search.tool}, then {tool}, then the answer.",
        "Let me outline the remaining steps before acting.",
        f"I'll now run {domain.search.tool} with the details above.",
        "Recap of the plan: verify, compare, answer. Proceeding.",
        "Before answering I need one more lookup; I'll do that next.",
    )
    turns = rng.sample(plans, rng.randint(3, 7))
    indexes = [b.say(text) for text in turns]
    return b.finish(
        outcome="failure",
        loop=True,
        kind="monologue",
        first_loop_step=indexes[1],
        why=f"{len(turns)} assistant turns in a row announce a tool call that never happens",
    )
