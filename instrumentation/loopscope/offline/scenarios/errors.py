"""Retrying into the same error.

tau-bench's airline agent books, gets "payment amount does not add up", does some arithmetic
and books again with the very same arguments. The other cause: an error that says
nothing ("error: something went wrong") leaves the model nothing to fix, so every retry is
blind even when the arguments change.
"""

from __future__ import annotations

import random
from typing import Any

from ._episode import EpisodeBuilder

VAGUE_ERROR = "error: something went wrong"


def _airline(b: EpisodeBuilder, rng: random.Random, variant: int) -> tuple[dict[str, Any], int, int]:
    """Look up the user and the flight; return booking args, the fare total and the paid sum."""
    price, passengers = (125, 3) if variant == 0 else (rng.choice((139, 154, 189)), 2)
    total = price * passengers
    paid = 299 if variant == 0 else total - rng.choice((24, 50, 76))
    user = f"{rng.choice(('mia_li', 'raj_sanchez', 'noah_kim'))}_{rng.randint(1000, 9999)}"
    b.call(
        "get_user_details",
        {"user_id": user},
        {
            "user_id": user,
            "payment_methods": {
                "gift_card_7710": {"amount": paid},
                "credit_card_4421": {"last_four": "7447"},
            },
        },
    )
    b.call(
        "search_direct_flight",
        {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"},
        [{"flight_number": "HAT170", "prices": {"economy": price}, "available_seats": 9}],
    )
    args = {
        "user_id": user,
        "origin": "JFK",
        "destination": "SEA",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT170", "date": "2024-05-20"}],
        "passengers": passengers,
        "payment_methods": [{"payment_id": "gift_card_7710", "amount": paid}],
        "total_baggages": 0,
        "insurance": "no",
    }
    return args, total, paid


def repeat_same_error(rng: random.Random, variant: int) -> dict[str, Any]:
    """book_reservation retried 3-6 times with identical args and the identical error."""
    b = EpisodeBuilder(
        rng,
        "repeat_same_error",
        variant,
        "Book the one-way economy flight HAT170 JFK->SEA on 2024-05-20 for my party, "
        "paid with my gift card.",
        "transaction",
    )
    args, price_total, paid = _airline(b, rng, variant)
    error = f"Error: payment amount does not add up, total price is {price_total}, but paid {paid}"
    expression = f"{price_total // args['passengers']} * {args['passengers']}"
    total = rng.randint(3, 6)
    errors = []
    for i in range(total):
        errors.append(b.call("book_reservation", args, error, kind="write", status="error"))
        if i < total - 1:
            b.call("calculate", {"expression": expression}, str(price_total), kind=None)
            b.call(
                "think",
                {"thought": f"The total matches the fare; retry #{i + 1} should go through now."},
                "",
                kind=None,
            )
    b.say("I'm sorry, the booking system keeps rejecting the payment.")
    return b.finish(
        outcome="failure",
        loop=True,
        kind="repeat_same_error",
        first_loop_step=errors[1],
        why=f"book_reservation retried {total}x with identical args and the identical error",
    )


def vague_error_retry(rng: random.Random, variant: int) -> dict[str, Any]:
    """A tool answering only "error: something went wrong" to 3-7 different attempts."""
    if variant % 2 == 0:
        number = rng.randint(1000, 9999)
        tool, kind = "lookup_invoice", "read"
        attempts = [
            {"invoice_id": f}
            for f in (
                f"INV-{number}",
                str(number),
                f"inv_{number}",
                f"INV{number}",
                f"#{number}",
                f"INV-{number:06d}",
                f"invoice-{number}",
            )
        ]
        task = f"Send me the PDF link for invoice {number}."
    else:
        tool, kind = "export_report", None
        month = rng.randint(1, 9)
        attempts = [
            {"report": "sales", "from": f"2024-{month:02d}-01", "to": to, "format": f}
            for to in (f"2024-{month:02d}-28", f"2024-{month + 1:02d}-01")
            for f in ("csv", "xlsx", "pdf", "json")
        ]
        task = f"Export the 2024-{month:02d} sales report so I can open it in Excel."
    b = EpisodeBuilder(rng, "vague_error_retry", variant, task, "other")
    total = rng.randint(3, 7)
    errors = []
    for i, args in enumerate(attempts[:total]):
        if i:
            b.think(
                0.7,
                (
                    "Maybe the format is wrong; trying another one.",
                    "Still failing. Let me vary the arguments.",
                ),
            )
        errors.append(b.call(tool, args, VAGUE_ERROR, kind=kind, status="error"))
    b.say("The tool keeps failing without saying why; I could not complete this.")
    return b.finish(
        outcome="failure",
        loop=True,
        kind="repeat_same_error",
        first_loop_step=errors[1],
        why=f"{tool} returned the same uninformative error to {total} different attempts",
    )
