"""Writes after a timeout, and writes the user really wanted twice.

A timeout means the result is UNKNOWN, not FAILED. The right move is to look the
business record up by its reference (the step carries ``reconciles``: the timed-out write's
``tool_call_id``, and ``found``) and retry only if it did not happen. A blind retry with the
same arguments is the loop that double-charges a customer. Identical arguments alone prove
nothing: "buy another one" is an intended duplicate (``intent: "duplicate"`` on the step).
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from ._episode import EpisodeBuilder

TIMEOUT_OUTPUT = "Timeout after 30s"


class _Write(NamedTuple):
    create: str
    lookup: str
    id_key: str
    id_prefix: str


def _prepare(rng: random.Random, shape: str, variant: int) -> tuple[EpisodeBuilder, _Write, dict[str, Any]]:
    """Start the episode with the read that precedes the write; return the write's args.

    Variants rotate an order, a payment and a ticket. Every write carries a client
    ``reference`` (run id : step id) that the reconcile lookup uses.
    """
    reference = f"run-{rng.getrandbits(24):06x}:step-{rng.randint(3, 9)}"
    style = variant % 3
    if style == 0:
        write = _Write("create_order", "get_order_by_reference", "order_id", "ORD")
        sku, customer = f"SKU-{rng.randint(1000, 9999)}", f"C-{rng.randint(10000, 99999)}"
        task = f"Order one {sku} for customer {customer}."
        read = ("get_product", {"sku": sku}, {"sku": sku, "price": 49.0, "in_stock": 12})
        args = {"customer_id": customer, "sku": sku, "quantity": 1}
    elif style == 1:
        write = _Write("create_payment", "get_payment_by_reference", "payment_id", "PAY")
        invoice, amount = f"INV-{rng.randint(1000, 9999)}", round(rng.uniform(200, 3000), 2)
        task = f"Pay invoice {invoice} to ACME GmbH."
        read = ("get_invoice", {"invoice_id": invoice}, {"invoice_id": invoice, "amount": amount})
        args = {"invoice_id": invoice, "payee": "ACME GmbH", "amount": amount, "currency": "EUR"}
    else:
        write = _Write("create_ticket", "find_ticket_by_reference", "ticket_id", "TCK")
        host = f"db-{rng.randint(1, 9)}"
        task = f"Open a high-priority ticket about disk pressure on {host}."
        read = ("get_host_metrics", {"host": host}, {"host": host, "disk_used_pct": 93})
        args = {"title": f"Disk pressure on {host}", "priority": "high", "queue": "infra"}
    b = EpisodeBuilder(rng, shape, variant, task, "transaction")
    b.call(*read)
    return b, write, {**args, "reference": reference}


def _record(rng: random.Random, write: _Write) -> dict[str, Any]:
    """A freshly created business record: a new id every time."""
    return {write.id_key: f"{write.id_prefix}-{rng.randint(100000, 999999)}", "status": "created"}


def _reconcile(
    b: EpisodeBuilder, write: _Write, args: dict[str, Any], timed_out: int, record: dict[str, Any] | None
) -> int:
    """Look the timed-out write up by reference; ``record`` is what exists, if anything."""
    b.say(
        "The write timed out, so its result is unknown. Checking by reference before "
        "deciding anything."
    )
    reference = args["reference"]
    output = {**record, "reference": reference} if record else {"reference": reference}
    return b.call(
        write.lookup,
        {"reference": reference},
        {**output, "found": record is not None},
        reconciles=b.steps[timed_out]["tool_call_id"],
        found=record is not None,
    )


def write_timeout_reconciled(rng: random.Random, variant: int) -> dict[str, Any]:
    """Timeout, reconcile finds nothing, one retry succeeds with a new record id."""
    b, write, args = _prepare(rng, "write_timeout_reconciled", variant)
    timed_out = b.call(write.create, args, TIMEOUT_OUTPUT, kind="write", status="timeout")
    _reconcile(b, write, args, timed_out, None)
    record = _record(rng, write)
    b.call(write.create, args, record, kind="write")
    b.say(f"Done after one checked retry: {record[write.id_key]}.")
    return b.finish(
        outcome="success",
        loop=False,
        kind="write_retry_legit",
        first_loop_step=None,
        why=f"{write.create} retried once, after the lookup showed the first call never landed",
    )


def write_timeout_found(rng: random.Random, variant: int) -> dict[str, Any]:
    """Timeout, reconcile finds the record, no retry."""
    b, write, args = _prepare(rng, "write_timeout_found", variant)
    timed_out = b.call(write.create, args, TIMEOUT_OUTPUT, kind="write", status="timeout")
    record = _record(rng, write)
    _reconcile(b, write, args, timed_out, record)
    b.say(f"It went through despite the timeout: {record[write.id_key]}. No retry needed.")
    return b.finish(
        outcome="success",
        loop=False,
        kind="none",
        first_loop_step=None,
        why=f"{write.create} timed out, the lookup found the record, no second write",
    )


def write_duplicate(rng: random.Random, variant: int) -> dict[str, Any]:
    """Timeout, then blind identical retries with no reconcile; duplicates appear."""
    b, write, args = _prepare(rng, "write_duplicate", variant)
    b.call(write.create, args, TIMEOUT_OUTPUT, kind="write", status="timeout")
    b.say("That failed. Trying again.")
    retries = [
        b.call(write.create, args, TIMEOUT_OUTPUT, kind="write", status="timeout")
        for _ in range(variant % 2)
    ]
    record = _record(rng, write)
    retries.append(b.call(write.create, args, record, kind="write"))
    b.say(f"Created {record[write.id_key]}.")
    return b.finish(
        outcome="failure",
        loop=True,
        kind="write_duplicate",
        first_loop_step=retries[0],
        why=f"{write.create} retried {len(retries)}x after a timeout with no lookup: UNKNOWN taken "
        "for FAILED",
    )


def intended_duplicate(rng: random.Random, variant: int) -> dict[str, Any]:
    """The user asks to "buy another one": the second identical create_order is intended."""
    product = rng.choice(("trail shoes", "desk lamp", "espresso grinder", "rain jacket"))
    sku, customer = f"SKU-{rng.randint(1000, 9999)}", f"C-{rng.randint(10000, 99999)}"
    b = EpisodeBuilder(
        rng,
        "intended_duplicate",
        variant,
        f"Order the {product} ({sku}) for {customer}.",
        "transaction",
    )
    args = {"customer_id": customer, "sku": sku, "quantity": 1 + variant % 2}
    b.call("get_product", {"sku": sku}, {"sku": sku, "name": product, "in_stock": 7})
    first = {"order_id": f"ORD-{rng.randint(100000, 549999)}", "status": "created"}
    b.call("create_order", args, first, kind="write")
    b.say(f"Ordered: {first['order_id']}.")
    b.user(
        rng.choice(
            (
                "Great, buy another one of the same, please.",
                "Perfect. Order the same again for my sister.",
            )
        )
    )
    second = {"order_id": f"ORD-{rng.randint(550000, 999999)}", "status": "created"}
    b.call("create_order", args, second, kind="write", intent="duplicate")
    b.say(f"Second order placed: {second['order_id']}.")
    return b.finish(
        outcome="success",
        loop=False,
        kind="none",
        first_loop_step=None,
        why="the user asked for the same order again; two identical writes are intended",
    )
